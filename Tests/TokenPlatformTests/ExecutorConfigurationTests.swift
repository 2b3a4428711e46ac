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

    @Test func theStartUpLineWritesAnIPv6AddressInBrackets() throws {
        #expect(try Self.resolve(flag: nil, environment: ["PUSHPROV_HOST": "::1", "PUSHPROV_PORT": "8443"]).startupLine.hasPrefix("pushprov serve: listening on http://[::1]:8443 · "))
        #expect(try Self.resolve(flag: nil, environment: ["PUSHPROV_PORT": "8443"]).startupLine.hasPrefix("pushprov serve: listening on http://127.0.0.1:8443 · "))
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
