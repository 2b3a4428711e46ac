import Foundation
import ProvisioningModels

/// The plaintext of `encryptedPassData`: exactly the five fields Apple reads.
///
/// Building a value validates every field; ``jsonData()`` encodes exactly the keys
/// `primaryAccountNumber`, `expiration`, `name`, `nonce` and `nonceSignature`, with the
/// nonce and signature as lowercase hex of the bytes Wallet supplied.
public struct PassDataPayload: Sendable, Hashable {
    /// The longest cardholder name accepted, in characters.
    public static let maximumNameLength = 64
    /// The largest nonce or nonce signature accepted, in bytes.
    public static let maximumNonceBytes = 1024

    /// The card number.
    public let primaryAccountNumber: PrimaryAccountNumber
    /// The card's expiration.
    public let expiration: CardExpiration
    /// The cardholder name.
    public let name: String
    /// The nonce Wallet supplied.
    public let nonce: Data
    /// The nonce signature Wallet supplied.
    public let nonceSignature: Data

    /// Validates and assembles a payload.
    ///
    /// - Throws: ``ValidationError``: `invalid_name` for an empty, over-long or control-character
    ///   name; `invalid_field` for an empty or oversized nonce or signature.
    public init(
        primaryAccountNumber: PrimaryAccountNumber,
        expiration: CardExpiration,
        name: String,
        nonce: Data,
        nonceSignature: Data
    ) throws {
        // One pass over the scalars: blank means only what `CharacterSet.whitespaces` trims
        // (category Zs, tab, and U+200B zero width space).
        var blank = true
        var control = false
        for scalar in name.unicodeScalars {
            let category = scalar.properties.generalCategory
            if category != .spaceSeparator, scalar != "\t", scalar != "\u{200B}" { blank = false }
            if category == .control { control = true }
        }
        guard !blank else {
            throw ValidationError(code: .invalidName, field: "name", message: "must not be empty")
        }
        guard name.count <= Self.maximumNameLength else {
            throw ValidationError(code: .invalidName, field: "name", message: "must be at most \(Self.maximumNameLength) characters (got \(name.count))")
        }
        guard !control else {
            throw ValidationError(code: .invalidName, field: "name", message: "must not contain control characters")
        }
        for (field, value) in [("nonce", nonce), ("nonceSignature", nonceSignature)] {
            guard !value.isEmpty else {
                throw ValidationError(code: .invalidField, field: field, message: "must not be empty")
            }
            guard value.count <= Self.maximumNonceBytes else {
                throw ValidationError(code: .invalidField, field: field, message: "must be at most \(Self.maximumNonceBytes) bytes (got \(value.count))")
            }
        }
        self.primaryAccountNumber = primaryAccountNumber
        self.expiration = expiration
        self.name = name
        self.nonce = nonce
        self.nonceSignature = nonceSignature
    }

    /// The JSON Apple decrypts: five keys, sorted, slashes unescaped, UTF-8.
    public func jsonData() -> Data {
        var writer = CompactJSONWriter(capacity: 160 + 2 * (nonce.count + nonceSignature.count))
        writer.add("expiration", expiration.text)
        writer.add("name", name)
        writer.add("nonce", nonce.lowercaseHex)
        writer.add("nonceSignature", nonceSignature.lowercaseHex)
        writer.add("primaryAccountNumber", primaryAccountNumber.digits)
        return writer.finish()
    }

    /// Reads and validates the JSON form, as Apple's side does after opening it.
    ///
    /// - Throws: ``PassDataPayloadError`` when the JSON is not an object of exactly the five
    ///   string keys, or a field is invalid (its ``ValidationError``).
    public init(jsonData: Data) throws {
        guard let object = try? JSONSerialization.jsonObject(with: jsonData) as? [String: Any] else {
            throw PassDataPayloadError.notAJSONObject
        }
        let expected: Set<String> = ["primaryAccountNumber", "expiration", "name", "nonce", "nonceSignature"]
        guard Set(object.keys) == expected else {
            throw PassDataPayloadError.unexpectedKeys(found: object.keys.sorted())
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: jsonData)
        } catch {
            throw PassDataPayloadError.notAJSONObject
        }
        guard let nonce = Data(lowercaseHex: wire.nonce) else { throw PassDataPayloadError.notLowercaseHex(field: "nonce") }
        guard let signature = Data(lowercaseHex: wire.nonceSignature) else {
            throw PassDataPayloadError.notLowercaseHex(field: "nonceSignature")
        }
        try self.init(
            primaryAccountNumber: PrimaryAccountNumber(wire.primaryAccountNumber),
            expiration: CardExpiration(wire.expiration),
            name: wire.name,
            nonce: nonce,
            nonceSignature: signature
        )
    }

    private struct Wire: Codable {
        var primaryAccountNumber: String
        var expiration: String
        var name: String
        var nonce: String
        var nonceSignature: String

        init(_ payload: PassDataPayload) {
            primaryAccountNumber = payload.primaryAccountNumber.digits
            expiration = payload.expiration.text
            name = payload.name
            nonce = payload.nonce.lowercaseHex
            nonceSignature = payload.nonceSignature.lowercaseHex
        }
    }
}

extension PassDataPayload: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// A summary with the PAN redacted.
    public var description: String { "PassDataPayload(pan: \(primaryAccountNumber.redacted), expiration: \(expiration))" }
    /// A summary with the PAN redacted.
    public var debugDescription: String { description }
    /// A mirror without the PAN.
    public var customMirror: Mirror { Mirror(self, children: ["pan": primaryAccountNumber.redacted, "expiration": expiration.text]) }
}

/// Why a pass-data JSON document was refused.
public enum PassDataPayloadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The bytes are not a JSON object of string values.
    case notAJSONObject
    /// The object does not hold exactly the five expected keys.
    case unexpectedKeys(found: [String])
    /// `nonce` or `nonceSignature` is not lowercase hex.
    case notLowercaseHex(field: String)

    /// A sentence saying what is wrong.
    public var description: String {
        switch self {
        case .notAJSONObject: "pass data is not a JSON object of string values"
        case .unexpectedKeys(let found): "pass data must hold exactly primaryAccountNumber, expiration, name, nonce, nonceSignature (found \(found.joined(separator: ", ")))"
        case .notLowercaseHex(let field): "\(field) must be lowercase hex"
        }
    }
}
