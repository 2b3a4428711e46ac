import Foundation
import GRDB
import Testing
import TokenPlatform

/// The store's own date text must be exactly GRDB's, both ways, so rows written by either read
/// the same.
@Suite struct SQLiteTimestampTests {
    static func grdbText(_ date: Date) -> String? { String.fromDatabaseValue(date.databaseValue) }

    static var sampleDates: [Date] {
        var dates: [Date] = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_800_000_000), Date(timeIntervalSince1970: 951_782_400), // 2000-02-29
            Date(timeIntervalSince1970: 4_107_542_399.9995), Date(timeIntervalSince1970: 1_767_225_599.999), Date(timeIntervalSince1970: 1_767_225_599.9996),
            Date(timeIntervalSince1970: -1.5), Date(timeIntervalSince1970: 253_402_300_799), Date(timeIntervalSinceReferenceDate: 0),
            Date(timeIntervalSinceReferenceDate: 0.0005), Date(timeIntervalSinceReferenceDate: -0.0005),
        ]
        var state: UInt64 = 0xC0FFEE
        for _ in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            // 1970 … 2200, with sub-millisecond noise.
            let seconds = Double(state >> 11) / Double(1 << 53) * 7_258_118_400
            dates.append(Date(timeIntervalSince1970: seconds))
        }
        dates.append(Date())
        return dates
    }

    @Test func writesExactlyWhatGRDBWrites() throws {
        var mismatches: [String] = []
        for date in Self.sampleDates {
            let ours = SQLiteTimestamp(date).text
            let theirs = Self.grdbText(date)
            if ours != theirs { mismatches.append("\(date.timeIntervalSince1970): \(ours) vs \(theirs ?? "nil")") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    @Test func readsExactlyWhatGRDBReads() throws {
        var mismatches: [String] = []
        for date in Self.sampleDates {
            guard let text = Self.grdbText(date) else { continue }
            let ours = SQLiteTimestamp(text: text)?.date
            let theirs = Date.fromDatabaseValue(text.databaseValue)
            if ours != theirs { mismatches.append("\(text): \(ours?.timeIntervalSinceReferenceDate ?? .nan) vs \(theirs?.timeIntervalSinceReferenceDate ?? .nan)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    @Test func roundTripsThroughADatabaseColumn() throws {
        let queue = try DatabaseQueue()
        let date = Date(timeIntervalSince1970: 1_800_000_123.456)
        let read = try queue.write { db -> (SQLiteTimestamp?, Date?, String?) in
            try db.execute(sql: "CREATE TABLE t (a TEXT, b TEXT)")
            try db.execute(sql: "INSERT INTO t VALUES (?, ?)", arguments: [SQLiteTimestamp(date), date])
            let row = try #require(try Row.fetchOne(db, sql: "SELECT a, b FROM t"))
            return (row[1] as SQLiteTimestamp?, row[0] as Date?, row[0] as String?)
        }
        #expect(read.0?.date == Date.fromDatabaseValue("2027-01-15 08:02:03.456".databaseValue))
        #expect(read.1 == read.0?.date)
        #expect(read.2 == "2027-01-15 08:02:03.456")
    }

    @Test func otherFormsFallBackToGRDB() throws {
        #expect(SQLiteTimestamp(text: "2026-11-22")?.date == Date.fromDatabaseValue("2026-11-22".databaseValue))
        #expect(SQLiteTimestamp(text: "2026-11-22 10:00:00")?.date == Date.fromDatabaseValue("2026-11-22 10:00:00".databaseValue))
        #expect(SQLiteTimestamp(text: "not a date") == nil)
    }
}
