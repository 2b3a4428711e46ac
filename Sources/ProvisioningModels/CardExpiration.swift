import Foundation

/// A card's expiration month in the `MM/YY` form Apple's pass data and the networks use.
///
/// A card is valid through the last moment of its expiration month (UTC).
public struct CardExpiration: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The month, 1–12.
    public let month: Int
    /// The two-digit year, 0–99 (read as 2000 + year).
    public let twoDigitYear: Int

    /// Creates an expiration from a month (1–12) and a two-digit year (0–99).
    ///
    /// - Throws: ``ValidationError`` with code `invalid_expiration` for any other value.
    public init(month: Int, twoDigitYear: Int) throws {
        guard (1...12).contains(month) else {
            throw ValidationError(code: .invalidExpiration, field: "expiration", message: "month must be 01 to 12 (got \(month))")
        }
        guard (0...99).contains(twoDigitYear) else {
            throw ValidationError(code: .invalidExpiration, field: "expiration", message: "year must be two digits")
        }
        self.month = month
        self.twoDigitYear = twoDigitYear
    }

    /// Parses `MM/YY` exactly: two digits, a slash, two digits, and a real month.
    ///
    /// - Throws: ``ValidationError`` with code `invalid_expiration` naming what is wrong.
    public init(_ text: String, field: String = "expiration") throws {
        let bytes = Array(text.utf8)
        let isDigit: (UInt8) -> Bool = { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard bytes.count == 5, bytes[2] == UInt8(ascii: "/"),
            isDigit(bytes[0]), isDigit(bytes[1]), isDigit(bytes[3]), isDigit(bytes[4])
        else {
            throw ValidationError(code: .invalidExpiration, field: field, message: "must be MM/YY, e.g. 11/28")
        }
        let month = Int(bytes[0] - 48) * 10 + Int(bytes[1] - 48)
        let year = Int(bytes[3] - 48) * 10 + Int(bytes[4] - 48)
        guard (1...12).contains(month) else {
            throw ValidationError(code: .invalidExpiration, field: field, message: "month must be 01 to 12 (got \(String(format: "%02d", month)))")
        }
        try self.init(month: month, twoDigitYear: year)
    }

    /// The four-digit year.
    public var year: Int { 2000 + twoDigitYear }

    /// `MM/YY`.
    public var text: String {
        func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
        return twoDigits(month) + "/" + twoDigits(twoDigitYear)
    }

    /// `MM/YY`.
    public var description: String { text }

    /// The first instant after the card stops being valid: the start of the following month, UTC.
    public var validUntil: Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let next = month == 12 ? DateComponents(year: year + 1, month: 1, day: 1) : DateComponents(year: year, month: month + 1, day: 1)
        return calendar.date(from: next)!
    }

    /// Whether the card has expired at `date` (it is valid through the end of its month).
    public func isExpired(at date: Date) -> Bool { date >= validUntil }

    /// Orders expirations chronologically.
    public static func < (lhs: CardExpiration, rhs: CardExpiration) -> Bool {
        (lhs.twoDigitYear, lhs.month) < (rhs.twoDigitYear, rhs.month)
    }
}

extension CardExpiration: Codable {
    /// Decodes `MM/YY`.
    public init(from decoder: any Decoder) throws {
        try self.init(decoder.singleValueContainer().decode(String.self))
    }

    /// Encodes `MM/YY`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}
