import Foundation
import ProvisioningModels
import Testing

@Suite("Event time")
struct EventTimeTests {
    @Test func readsRFC3339WithOrWithoutFractionAndAnyOffsetAndWritesUTCMilliseconds() throws {
        let base = try EventTime("2026-11-22T11:50:00Z")
        #expect(base.millisecondsSince1970 == 1_795_348_200_000)
        #expect(try EventTime("2026-11-22T11:50:00.123Z").millisecondsSince1970 == 1_795_348_200_123)
        #expect(try EventTime("2026-11-22T12:50:00+01:00") == base)
        #expect(try EventTime("2026-11-22T11:50:00.123Z").description == "2026-11-22T11:50:00.123Z")
        #expect(base.description == "2026-11-22T11:50:00.000Z")
        let json = try JSONEncoder().encode([try EventTime("2026-11-22T11:50:00.5Z")])
        #expect(String(decoding: json, as: UTF8.self) == #"["2026-11-22T11:50:00.500Z"]"#)
        #expect(try JSONDecoder().decode([EventTime].self, from: json) == [EventTime(millisecondsSince1970: 1_795_348_200_500)])
        #expect(try EventTime("2026-11-22T11:50:00.001Z") > base)
        #expect(try EventTime("2028-02-29T00:00:00Z").description == "2028-02-29T00:00:00.000Z")
    }

    @Test func takesRFC3339sWholeGrammar() throws {
        let base = try EventTime("2026-11-22T11:50:00Z")
        // Lower-case separators (RFC 3339 section 5.6 allows them).
        #expect(try EventTime("2026-11-22t11:50:00z") == base)
        // Any offset up to ±23:59, and -00:00 ("offset unknown") as UTC.
        #expect(try EventTime("2026-11-21T12:21:00-23:29") == base)
        #expect(try EventTime("2026-11-23T11:49:00+23:59") == base)
        #expect(try EventTime("2026-11-22T11:50:00-00:00") == base)
        #expect(try EventTime("2026-11-22T17:20:00+05:30") == base)
        // Fractions of any length, rounded to the nearest millisecond.
        #expect(try EventTime("2026-11-22T11:50:00.123456Z").millisecondsSince1970 == base.millisecondsSince1970 + 123)
        #expect(try EventTime("2026-11-22T11:50:00.1235Z").millisecondsSince1970 == base.millisecondsSince1970 + 124)
        #expect(try EventTime("2026-11-22T11:50:00.9996Z").millisecondsSince1970 == base.millisecondsSince1970 + 1_000)
        #expect(try EventTime("2026-11-22T11:50:00.12345678901234+01:00").millisecondsSince1970 == base.millisecondsSince1970 - 3_600_000 + 123)
        // A leap second counts as the next minute's first.
        #expect(try EventTime("2016-12-31T23:59:60Z") == EventTime("2017-01-01T00:00:00Z"))
        // The whole range of four-digit years, in the proleptic Gregorian calendar.
        #expect(try EventTime("0000-03-01T00:00:00Z").millisecondsSince1970 == -719_468 * 86_400_000)
        #expect(try EventTime("1970-01-01T00:00:00Z").millisecondsSince1970 == 0)
        #expect(try EventTime("2000-02-29T23:59:59.999Z").millisecondsSince1970 == 951_868_799_999)
        #expect(try EventTime("9999-12-31T23:59:59.999Z").description == "9999-12-31T23:59:59.999Z")
        #expect(try EventTime("0000-01-01T00:00:00Z").description == "0000-01-01T00:00:00.000Z")
        #expect(try EventTime("1543-06-27T19:32:51.18324-23:29").description == "1543-06-28T19:01:51.183Z")
        // The ends of the range, reached through an offset.
        #expect(try EventTime("0000-01-01T00:01:00+00:01").description == "0000-01-01T00:00:00.000Z")
        #expect(try EventTime("9999-12-31T12:00:00-11:59").description == "9999-12-31T23:59:00.000Z")
        #expect(try EventTime("0000-01-01T00:00:00Z").millisecondsSince1970 == EventTime.range.lowerBound)
        #expect(try EventTime("9999-12-31T23:59:59.999Z").millisecondsSince1970 == EventTime.range.upperBound)
    }

    @Test func agreesWithFoundationAndReadsBackWhatItWrites() throws {
        var random = SystemRandomNumberGenerator()
        let foundation = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        for _ in 0..<2_000 {
            // 1900 to 2100, where every calendar agrees.
            let milliseconds = Int64.random(in: -2_208_988_800_000..<4_102_444_800_000, using: &random)
            let time = EventTime(millisecondsSince1970: milliseconds)
            #expect(try EventTime(time.description) == time)
            // Foundation reads the same instant (its own formatting of a `Date` can print a
            // millisecond too few, so only the whole seconds are compared as text).
            #expect(EventTime(try foundation.parse(time.description)) == time, "\(milliseconds)")
            let wholeSeconds = Date(timeIntervalSince1970: TimeInterval(milliseconds.quotientAndRemainder(dividingBy: 1_000).quotient - (milliseconds % 1_000 < 0 ? 1 : 0)))
            #expect(time.description.prefix(19) == wholeSeconds.formatted(Date.ISO8601FormatStyle()).prefix(19))
            let offsetMinutes = Int.random(in: -(23 * 60 + 59)...(23 * 60 + 59), using: &random)
            let local = EventTime(millisecondsSince1970: milliseconds + Int64(offsetMinutes) * 60_000).description.dropLast()
            let sign = offsetMinutes < 0 ? "-" : "+"
            let offset = String(format: "%@%02d:%02d", sign, abs(offsetMinutes) / 60, abs(offsetMinutes) % 60)
            #expect(try EventTime(local + offset) == time, "\(local + offset)")
        }
        for year in stride(from: 0, through: 9_999, by: 7) {
            let text = String(format: "%04d-02-28T23:59:59.001Z", year)
            #expect(try EventTime(text).description == text)
        }
    }

    @Test(arguments: ["", "yesterday", "2026-11-22", "2026-11-22T11:50:00", "2026-02-30T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T11:60:00Z", "2026-11-22T11:50:61Z", "2026-11-22T11:50:00.Z", "2026-11-22T11:50:00+24:00", "2026-11-22T11:50:00+01:60", "2026-11-22T11:50:00+0100", "2026-11-22T11:50:00Z ", "2026-11-22 11:50:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-11-00T00:00:00Z", "2100-02-29T00:00:00Z", "+2026-11-22T11:50:00Z", "0000-01-01T00:00:00+00:01", "9999-12-31T23:59:60Z", "9999-12-31T23:59:59.9995Z", "9999-12-31T12:00:00-12:01", "2026-11-22T11:50:00.123456789012345678+01:00", String(repeating: "9", count: 41)])
    func anythingElseIsRefusedNamingTheField(text: String) {
        let error = #expect(throws: ValidationError.self) { try EventTime(text) }
        #expect(error?.field == "occurredAt")
        #expect(error?.code == .invalidField)
    }
}
