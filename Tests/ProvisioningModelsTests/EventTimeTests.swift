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

    @Test(arguments: ["", "yesterday", "2026-11-22", "2026-11-22T11:50:00", "2026-02-30T00:00:00Z", "2026-11-22T24:00:00Z", String(repeating: "9", count: 41)])
    func anythingElseIsRefusedNamingTheField(text: String) {
        let error = #expect(throws: ValidationError.self) { try EventTime(text) }
        #expect(error?.field == "occurredAt")
        #expect(error?.code == .invalidField)
    }
}
