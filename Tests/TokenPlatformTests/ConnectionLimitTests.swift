import Foundation
import Testing
import TokenPlatform

/// `--max-connections` / `PUSHPROV_MAX_CONNECTIONS` and its default from the open-file limit.
@Suite("Connection limit")
struct ConnectionLimitTests {
    static func resolve(flag: String?, environment: [String: String], files: Int) throws(ConfigurationError) -> Int {
        var settings = ServerSettings()
        settings.maximumConnections = flag
        settings.openFileLimit = files
        return try settings.resolveMaximumConnections(environment: environment)
    }

    @Test func theDefaultLeavesFilesForTheRestAndStaysWithinBounds() throws {
        #expect(ConnectionLimit.defaultLimit(openFileLimit: 1_024) == 768)
        #expect(ConnectionLimit.defaultLimit(openFileLimit: 20_000) == 10_000)
        #expect(ConnectionLimit.defaultLimit(openFileLimit: Int.max) == 10_000)
        #expect(ConnectionLimit.defaultLimit(openFileLimit: 100) == 16)
        #expect(try Self.resolve(flag: nil, environment: [:], files: 1_024) == 768)
        #expect(ConnectionLimit.openFileLimit() > 0)
        // What the process may open after raising is at least what it had.
        let before = ConnectionLimit.openFileLimit()
        #expect(ConnectionLimit.raiseOpenFileLimit() >= before)
    }

    @Test func theFlagWinsOverTheEnvironment() throws {
        #expect(try Self.resolve(flag: "500", environment: ["PUSHPROV_MAX_CONNECTIONS": "300"], files: 1_024) == 500)
        #expect(try Self.resolve(flag: nil, environment: ["PUSHPROV_MAX_CONNECTIONS": "300"], files: 1_024) == 300)
        #expect(try Self.resolve(flag: nil, environment: ["PUSHPROV_MAX_CONNECTIONS": ""], files: 1_024) == 768)
        #expect(try Self.resolve(flag: "20000", environment: [:], files: Int.max) == 20_000)
    }

    @Test(arguments: ["0", "-1", "ten", "1.5", "1000001"])
    func aBadNumberIsOneClearLine(text: String) {
        let error = #expect(throws: ConfigurationError.self) { try Self.resolve(flag: text, environment: [:], files: 1_024) }
        #expect(error?.message == "max connections must be a whole number from 1 to 1000000 (got \(text))")
    }

    @Test func aLimitTheOpenFileLimitCannotHoldIsRefusedNamingIt() {
        #expect(throws: Never.self) { try Self.resolve(flag: "768", environment: [:], files: 1_024) }
        let error = #expect(throws: ConfigurationError.self) { try Self.resolve(flag: "769", environment: [:], files: 1_024) }
        #expect(error?.message.contains("may open 1024 (ulimit -n)") == true)
    }

    @Test func theStartUpLineNamesTheLimit() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-connections-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerSettings()
        settings.dataDirectory = directory.path
        settings.maximumConnections = "300"
        let configuration = try settings.resolve(environment: [:])
        #expect(configuration.maximumConnections == 300)
        #expect(configuration.startupLine.contains(" · connections ≤ 300 · executor event-loops"))
    }
}
