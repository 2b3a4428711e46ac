import Foundation

/// Bytes that travel as a standard base64 string in JSON.
///
/// Decoding is strict: anything that is not valid base64 is refused with a message naming
/// the field, never silently dropped. Only the canonical spelling is taken (padded to whole
/// groups of four, zero bits after the last byte), so one value has one text: `AR==` is
/// refused rather than read as the byte `AQ==` holds.
public struct Base64Data: Sendable, Hashable, Codable {
    /// The decoded bytes.
    public var data: Data

    /// Wraps bytes.
    public init(_ data: Data) {
        self.data = data
    }

    /// Decodes a base64 string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let data = Data(base64Encoded: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: Self.notBase64)
        }
        // Foundation ignores the bits after the last byte; re-encoding shows whether any were set.
        guard data.base64EncodedString() == text else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: Self.notCanonical)
        }
        self.data = data
    }

    /// The decoding error's description for text that is not base64 at all.
    package static let notBase64 = "must be base64"

    /// The decoding error's description for base64 with bits set after the last byte.
    package static let notCanonical = "must be base64 in canonical form (the bits after the last byte zero)"

    /// Encodes as a base64 string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data.base64EncodedString())
    }
}
