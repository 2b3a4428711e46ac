import Foundation
import Testing
import TokenPlatform

@Suite("Executor configuration")
struct ExecutorConfigurationTests {
    static func resolve(flag: String?, environment: [String: String]) throws -> ServerConfiguration {
        var settings = ServerSettings()
        settings.dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-executor-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: settings.dataDirectory!) }
        settings.executor = flag
        return try settings.resolve(environment: environment)
    }

    @Test func defaultsToTheEventLoopsAndTheFlagWinsOverTheEnvironment() throws {
        #expect(try Self.resolve(flag: nil, environment: [:]).executor == .eventLoops)
        #expect(try Self.resolve(flag: nil, environment: ["PUSHPROV_EXECUTOR": ""]).executor == .eventLoops)
        #expect(try Self.resolve(flag: nil, environment: ["PUSHPROV_EXECUTOR": "swift"]).executor == .swift)
        #expect(try Self.resolve(flag: "event-loops", environment: ["PUSHPROV_EXECUTOR": "swift"]).executor == .eventLoops)
    }

    @Test func theStartUpLineSaysWhichOneRuns() throws {
        #expect(try Self.resolve(flag: "swift", environment: [:]).startupLine.hasSuffix(" · executor swift"))
        #expect(try Self.resolve(flag: nil, environment: [:]).startupLine.hasSuffix(" · executor event-loops"))
    }

    @Test(arguments: ["nio", "EVENT-LOOPS", "event loops", "swift "])
    func anUnknownValueIsRefusedWithOneLineSayingWhatIsAccepted(text: String) {
        let error = #expect(throws: ConfigurationError.self) { try Self.resolve(flag: text, environment: [:]) }
        #expect(error?.message == "executor must be event-loops or swift (got \(text))")
    }
}
