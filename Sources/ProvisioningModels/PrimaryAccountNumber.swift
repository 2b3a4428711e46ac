import Foundation

/// A validated primary account number (the card number).
///
/// A value of this type always holds 12–19 ASCII digits with a valid Luhn check digit.
/// It never prints itself: `description`, `debugDescription` and mirrors show only the
/// redacted form (`•••• 1234`), so a PAN that reaches a log line, an error message or a
/// test failure is never disclosed by accident. The digits are reachable only through
/// ``digits``, which callers use deliberately (sealing, vault encryption, keyed hashing).
public struct PrimaryAccountNumber: Sendable, Hashable {
    /// The shortest PAN ISO/IEC 7812 allows.
    public static let minimumLength = 12
    /// The longest PAN ISO/IEC 7812 allows.
    public static let maximumLength = 19

    /// The card number's digits, without spaces or separators.
    public let digits: String

    /// Validates `digits` as a PAN.
    ///
    /// - Throws: ``ValidationError`` with code `invalid_pan` when the value holds anything
    ///   but ASCII digits, has the wrong length, or fails the Luhn check. The message never
    ///   repeats the value.
    public init(_ digits: String) throws {
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw ValidationError(code: .invalidPAN, field: "primaryAccountNumber", message: "must contain digits only")
        }
        let count = digits.utf8.count
        guard count >= Self.minimumLength, count <= Self.maximumLength else {
            throw ValidationError(
                code: .invalidPAN,
                field: "primaryAccountNumber",
                message: "must have \(Self.minimumLength) to \(Self.maximumLength) digits (got \(count))"
            )
        }
        guard Self.passesLuhnCheck(digits) else {
            throw ValidationError(code: .invalidPAN, field: "primaryAccountNumber", message: "fails the Luhn check digit")
        }
        self.digits = digits
    }

    /// The last four digits, which may be shown to people and stored in clear.
    public var last4: String { String(digits.suffix(4)) }

    /// The redacted form: `•••• ` followed by the last four digits.
    public var redacted: String { Redaction.pan(last4: last4) }

    /// Whether a string of ASCII digits carries a valid Luhn (mod 10) check digit.
    public static func passesLuhnCheck(_ digits: String) -> Bool {
        var sum = 0
        for (index, byte) in digits.utf8.reversed().enumerated() {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return false }
            var value = Int(byte - UInt8(ascii: "0"))
            if index % 2 == 1 {
                value *= 2
                if value > 9 { value -= 9 }
            }
            sum += value
        }
        return sum % 10 == 0
    }
}

extension PrimaryAccountNumber: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The redacted form; never the digits.
    public var description: String { redacted }
    /// The redacted form; never the digits.
    public var debugDescription: String { "PrimaryAccountNumber(\(redacted))" }
    /// A mirror that shows only the redacted form, so `dump` and test failures cannot leak the PAN.
    public var customMirror: Mirror { Mirror(self, children: ["redacted": redacted]) }
}

extension PrimaryAccountNumber: Codable {
    /// Decodes and validates a PAN from a JSON string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        try self.init(container.decode(String.self))
    }

    /// Encodes the digits as a JSON string (the wire needs them; logs must not get them).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(digits)
    }
}
