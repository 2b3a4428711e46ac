import Foundation
import Testing
import TokenPlatform

@Suite("Connector timeout configuration")
struct ConnectorTimeoutConfigurationTests {
    @Test func defaultsToTenSecondsAndTheFlagWinsOverTheEnvironment() throws {
        var settings = ServerSettings()
        #expect(try settings.resolveConnectorTimeout(environment: [:]) == .seconds(10))
        #expect(try settings.resolveConnectorTimeout(environment: ["PUSHPROV_CONNECTOR_TIMEOUT": ""]) == .seconds(10))
        #expect(try settings.resolveConnectorTimeout(environment: ["PUSHPROV_CONNECTOR_TIMEOUT": "3"]) == .seconds(3))
        #expect(try settings.resolveConnectorTimeout(environment: ["PUSHPROV_CONNECTOR_TIMEOUT": "0.25"]) == .milliseconds(250))
        settings.connectorTimeout = "300"
        #expect(try settings.resolveConnectorTimeout(environment: ["PUSHPROV_CONNECTOR_TIMEOUT": "3"]) == .seconds(300))
    }

    @Test(arguments: ["0", "-1", "-0.5", "ten", "10s", "", "nan", "inf", "301", "0.05", "1e-19"])
    func aBadFlagIsRefusedWithOneLineSayingWhatIsAccepted(text: String) {
        var settings = ServerSettings()
        settings.connectorTimeout = text
        let error = #expect(throws: ConfigurationError.self) { try settings.resolveConnectorTimeout(environment: [:]) }
        #expect(error?.message == "connector timeout must be a number of seconds from 0.1 to 300 (got \(text))")
    }

    @Test func aBadEnvironmentValueIsRefusedToo() {
        let error = #expect(throws: ConfigurationError.self) { try ServerSettings().resolveConnectorTimeout(environment: ["PUSHPROV_CONNECTOR_TIMEOUT": "-2"]) }
        #expect(error?.message.hasSuffix("(got -2)") == true)
    }

    @Test func theResolvedConfigurationCarriesIt() throws {
        var settings = ServerSettings()
        settings.dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-timeout-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: settings.dataDirectory!) }
        settings.connectorTimeout = "2.5"
        #expect(try settings.resolve(environment: [:]).connectorTimeout == .milliseconds(2_500))
    }
}
