/// A string enum of the wire whose JSON value must be one of its raw values byte for byte.
///
/// Swift compares strings by canonical equivalence, so the raw-value initializer Swift gives a
/// string enum takes `"BLOC\u{212A}ED"` (with KELVIN SIGN) for `BLOCKED`. A reader that
/// compares bytes (an API gateway's allow-list, the OpenAPI enum, Python) sees an unknown
/// value, so the request would mean one thing to them and another here. Conforming types
/// decode only their exact spellings, and ``init(exactly:)`` does the same for other readers.
public protocol ExactWireValue: RawRepresentable, CaseIterable, Decodable where RawValue == String {}

extension ExactWireValue {
    /// The case whose raw value is `text`, byte for byte, or nil.
    public init?(exactly text: String) {
        guard let value = Self.allCases.first(where: { $0.rawValue.utf8.elementsEqual(text.utf8) }) else { return nil }
        self = value
    }

    /// Decodes one of the raw values, byte for byte; anything else is `dataCorrupted`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Self(exactly: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Cannot initialize \(Self.self) from invalid String value")
        }
        self = value
    }
}

extension CardStatus: ExactWireValue {}
extension CardNetwork: ExactWireValue {}
extension DeviceType: ExactWireValue {}
extension WalletType: ExactWireValue {}
extension TokenEventType: ExactWireValue {}
extension TokenStatus: ExactWireValue {}
extension ActivationOutcome: ExactWireValue {}
extension CardArtFormat: ExactWireValue {}
