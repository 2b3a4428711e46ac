import Foundation

/// When something happened at the token service: an RFC 3339 time on the wire
/// (`2026-11-22T11:50:00.123Z`), kept to the millisecond, so events of one token can be put in
/// the order they happened whatever order they are delivered in.
///
/// Reading takes RFC 3339's whole `date-time` grammar (section 5.6) up to 40 bytes: `T` or `t`,
/// a fraction of any length that fits (rounded to the nearest millisecond), `Z`, `z` or a
/// numeric offset up to ±23:59, and a leap second (`:60`, taken at any minute and counted as
/// the next minute's first second). The instant must fall in the years 0000–9999 in UTC, which
/// is what writing can give back: always UTC with milliseconds.
public struct EventTime: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let millisecondsSince1970: Int64

    /// The longest text read: a 14-digit fraction and an offset (longer fractions carry no
    /// time a millisecond clock can keep).
    public static let maximumTextLength = 40

    /// The instants an event time may name: 0000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z.
    public static let range: ClosedRange<Int64> = -62_167_219_200_000...253_402_300_799_999

    /// A time in milliseconds since 1970-01-01T00:00:00Z.
    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// `date`, to the nearest millisecond.
    public init(_ date: Date) {
        millisecondsSince1970 = Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// Parses an RFC 3339 `date-time`; a refusal names `field`.
    public init(_ text: String, field: String = "occurredAt") throws {
        guard let milliseconds = Self.parse(Array(text.utf8)) else {
            throw ValidationError(code: .invalidField, field: field, message: "must be an RFC 3339 time, e.g. 2026-11-22T11:50:00.123Z")
        }
        self.init(millisecondsSince1970: milliseconds)
    }

    /// Milliseconds since the epoch of RFC 3339 text, or `nil` when it is not one.
    private static func parse(_ bytes: [UInt8]) -> Int64? {
        guard bytes.count >= 20, bytes.count <= maximumTextLength else { return nil }
        func number(_ start: Int, _ count: Int) -> Int64? {
            var value: Int64 = 0
            for byte in bytes[start..<start + count] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        // full-date "T" partial-time: YYYY-MM-DDTHH:MM:SS
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
            let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
            (1...12).contains(month), hour < 24, minute < 60, second <= 60
        else { return nil }
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days: Int64 = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][Int(month) - 1]
        guard (1...days).contains(day) else { return nil }

        // time-secfrac: "." 1*DIGIT, rounded to the millisecond.
        var at = 19
        var milliseconds: Int64 = 0
        if bytes[at] == UInt8(ascii: ".") {
            at += 1
            let start = at
            while at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") { at += 1 }
            guard at > start else { return nil }
            for index in 0..<3 {
                milliseconds = milliseconds * 10 + (start + index < at ? Int64(bytes[start + index] - UInt8(ascii: "0")) : 0)
            }
            if start + 3 < at, bytes[start + 3] >= UInt8(ascii: "5") { milliseconds += 1 }
        }

        // time-offset: "Z" / ("+" / "-") HH ":" MM
        var offsetMinutes: Int64 = 0
        guard at < bytes.count else { return nil }
        switch bytes[at] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard at + 1 == bytes.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard at + 6 == bytes.count, bytes[at + 3] == UInt8(ascii: ":"),
                let offsetHour = number(at + 1, 2), let offsetMinute = number(at + 4, 2),
                offsetHour < 24, offsetMinute < 60
            else { return nil }
            offsetMinutes = (offsetHour * 60 + offsetMinute) * (bytes[at] == UInt8(ascii: "-") ? -1 : 1)
        default:
            return nil
        }

        let localSeconds = CivilDate.days(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second
        let instant = (localSeconds - offsetMinutes * 60) * 1_000 + milliseconds
        // An offset, a leap second or rounding can carry a time at either end of the four-digit
        // years out of them, where it could not be written back.
        return range.contains(instant) ? instant : nil
    }

    /// The time as a `Date`.
    public var date: Date { Date(timeIntervalSince1970: TimeInterval(millisecondsSince1970) / 1000) }

    /// RFC 3339 in UTC with milliseconds, e.g. `2026-11-22T11:50:00.123Z`.
    public var description: String {
        let (days, rest) = CivilDate.floorDivision(millisecondsSince1970, 86_400_000)
        let (year, month, day) = CivilDate.date(days: days)
        func digits(_ value: Int64, _ count: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, count - text.count)) + text
        }
        return "\(digits(year, 4))-\(digits(month, 2))-\(digits(day, 2))T\(digits(rest / 3_600_000, 2)):\(digits(rest / 60_000 % 60, 2)):\(digits(rest / 1_000 % 60, 2)).\(digits(rest % 1_000, 3))Z"
    }

    /// Whether `lhs` happened before `rhs`.
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
