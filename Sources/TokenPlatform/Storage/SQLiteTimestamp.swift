import Foundation
import GRDB
import GRDBSQLite
import ProvisioningModels

/// A date stored in SQLite as GRDB stores `Date`: UTC text `yyyy-MM-dd HH:mm:ss.SSS`.
///
/// GRDB formats dates through `DateFormatter` (ICU) and reads them back through `Calendar`;
/// on the `signed-cards` path (three dates written and two read per call) that was about 3 % of
/// the server's CPU. This type writes and reads the same text with integer arithmetic, so rows
/// written either way read the same (tests compare it with GRDB on many dates).
package struct SQLiteTimestamp: DatabaseValueConvertible, StatementColumnConvertible {
    /// The date.
    package var date: Date

    package init(_ date: Date) {
        self.date = date
    }

    /// Seconds from 1970-01-01 to 2001-01-01 (Foundation's reference date).
    private static let referenceOffset: Double = 978_307_200

    /// The stored text: milliseconds rounded to nearest as Foundation's formatter does.
    package var text: String {
        let milliseconds = ((date.timeIntervalSinceReferenceDate + Self.referenceOffset) * 1000 + 0.5).rounded(.down)
        guard milliseconds.isFinite, abs(milliseconds) < 2.5e14 else { return String.fromDatabaseValue(date.databaseValue) ?? "" }
        let total = Int64(milliseconds)
        let (days, millisecondOfDay) = CivilDate.floorDivision(total, 86_400_000)
        let (year, month, day) = CivilDate.date(days: days)
        let hour = millisecondOfDay / 3_600_000
        let minute = millisecondOfDay / 60_000 % 60
        let second = millisecondOfDay / 1000 % 60
        let millisecond = millisecondOfDay % 1000
        var bytes: [UInt8] = []
        bytes.reserveCapacity(23)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        guard year >= 0, year <= 9999 else { return String.fromDatabaseValue(date.databaseValue) ?? "" }
        digits(year, 4); bytes.append(UInt8(ascii: "-")); digits(month, 2); bytes.append(UInt8(ascii: "-")); digits(day, 2)
        bytes.append(UInt8(ascii: " "))
        digits(hour, 2); bytes.append(UInt8(ascii: ":")); digits(minute, 2); bytes.append(UInt8(ascii: ":")); digits(second, 2)
        bytes.append(UInt8(ascii: ".")); digits(millisecond, 3)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Reads `yyyy-MM-dd HH:mm:ss.SSS` (the form this store writes); other forms go to GRDB.
    package init?(text: String) {
        var utf8 = text.utf8.makeIterator()
        func number(_ count: Int) -> Int64? {
            var value: Int64 = 0
            for _ in 0..<count {
                guard let byte = utf8.next(), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        func separator(_ expected: Character) -> Bool { utf8.next() == expected.asciiValue }
        guard text.utf8.count == 23,
            let year = number(4), separator("-"), let month = number(2), separator("-"), let day = number(2), separator(" "),
            let hour = number(2), separator(":"), let minute = number(2), separator(":"), let second = number(2), separator("."),
            let millisecond = number(3),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60
        else {
            guard let date = Date.fromDatabaseValue(text.databaseValue) else { return nil }
            self.init(date)
            return
        }
        let days = CivilDate.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second
        // As Foundation's calendar computes it: whole seconds from the reference date, plus the
        // fraction.
        self.init(Date(timeIntervalSinceReferenceDate: Double(seconds - Int64(Self.referenceOffset)) + Double(millisecond * 1_000_000) / 1e9))
    }

    package var databaseValue: DatabaseValue { text.databaseValue }

    package static func fromDatabaseValue(_ dbValue: DatabaseValue) -> SQLiteTimestamp? {
        if let text = String.fromDatabaseValue(dbValue) { return SQLiteTimestamp(text: text) }
        return Date.fromDatabaseValue(dbValue).map(SQLiteTimestamp.init)
    }

    package init?(sqliteStatement: SQLiteStatement, index: CInt) {
        guard sqlite3_column_type(sqliteStatement, index) == SQLITE_TEXT, let text = sqlite3_column_text(sqliteStatement, index) else {
            guard let date = Date(sqliteStatement: sqliteStatement, index: index) else { return nil }
            self.init(date)
            return
        }
        self.init(text: String(cString: text))
    }
}
