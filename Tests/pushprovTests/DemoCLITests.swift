import Foundation
import Testing

@Suite("pushprov demo", .serialized)
struct DemoCLITests {
    @Test func theDemoPassesAndReportsEveryStepAsJSON() async throws {
        let result = try await CLI.run(["demo", "--json"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(report["passed"] as? Bool == true)
        let steps = try #require(report["steps"] as? [[String: Any]])
        #expect(steps.count >= 10)
        #expect(steps.allSatisfy { $0["passed"] as? Bool == true && $0["milliseconds"] is Double })
        #expect(!result.stdout.contains("4111111111111111"), "no card number in the trace")
    }

    @Test func theReadableTraceNumbersEachStepAndEndsWithTheTally() async throws {
        let result = try await CLI.run(["demo"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("ok    1. "))
        #expect(result.stdout.contains(" steps as expected\n"))
        #expect(!result.stdout.contains("FAIL"))
    }
}
