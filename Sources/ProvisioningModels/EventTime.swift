import Foundation

/// When something happened at the token service: an RFC 3339 time in UTC on the wire
/// (`2026-11-22T11:50:00.123Z`; fractional seconds optional, at most millisecond precision
/// kept), so events of one token can be put in the order they happened whatever order they
/// are delivered in.
public struct EventTime: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let millisecondsSince1970: Int64

    /// A time in milliseconds since 1970-01-01T00:00:00Z.
    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// `date`, to the nearest millisecond.
    public init(_ date: Date) {
        millisecondsSince1970 = Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// Parses an RFC 3339 time with a `Z` or numeric offset; a refusal names `field`.
    public init(_ text: String, field: String = "occurredAt") throws {
        let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        let plain = Date.ISO8601FormatStyle()
        guard text.utf8.count <= 40, Self.hasValidDateAndTime(text), let date = (try? withFraction.parse(text)) ?? (try? plain.parse(text)) else {
            throw ValidationError(code: .invalidField, field: field, message: "must be an RFC 3339 time, e.g. 2026-11-22T11:50:00.123Z")
        }
        self.init(date)
    }

    /// Whether `YYYY-MM-DDTHH:MM:SS` at the start names a real day and time (the parser
    /// itself rolls 30 February over into March).
    private static func hasValidDateAndTime(_ text: String) -> Bool {
        let bytes = Array(text.utf8.prefix(19))
        guard bytes.count == 19 else { return false }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), hour < 24, minute < 60, second < 60
        else { return false }
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return (1...days).contains(day)
    }

    /// The time as a `Date`.
    public var date: Date { Date(timeIntervalSince1970: TimeInterval(millisecondsSince1970) / 1000) }

    /// RFC 3339 in UTC with milliseconds.
    public var description: String {
        // Whole seconds through the formatter, milliseconds by hand: formatting the `Date`
        // itself could print .122 for .123 (binary floating point).
        let (seconds, milliseconds) = millisecondsSince1970.quotientAndRemainder(dividingBy: 1000)
        let (whole, fraction) = milliseconds < 0 ? (seconds - 1, milliseconds + 1000) : (seconds, milliseconds)
        let text = Date(timeIntervalSince1970: TimeInterval(whole)).formatted(Date.ISO8601FormatStyle())
        return text.dropLast() + ".\(String(fraction + 1000).dropFirst())Z"
    }

    public static func < (lhs: EventTime, rhs: EventTime) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// Decodes RFC 3339 text.
    public init(from decoder: any Decoder) throws {
        try self.init(decoder.singleValueContainer().decode(String.self))
    }

    /// Encodes RFC 3339 text in UTC with milliseconds.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
