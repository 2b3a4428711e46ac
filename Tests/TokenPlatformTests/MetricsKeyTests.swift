import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing
import TokenPlatform

/// `PUSHPROV_METRICS_API_KEY`: when set, `GET /metrics` (and `HEAD`) requires it.
@Suite("Metrics key")
struct MetricsKeyTests {
    static let metricsKey = "metrics-key-0123456789abcdefghijklmnopqrs"

    /// The metrics route through `configuration`'s authenticator: the status for each
    /// `Authorization` header (nil: none).
    static func statuses(_ configuration: ServerConfiguration, _ headers: [String?], uri: String = "/metrics", method: HTTPRequest.Method = .get) async throws -> [HTTPResponse.Status] {
        let platform = try await TestPlatform()
        let router = TokenPlatformRouter(environment: platform.environment, authenticator: TMPServer.makeAuthenticator(configuration: configuration)).build()
        return try await Application(router: router).test(.router) { client in
            var statuses: [HTTPResponse.Status] = []
            for header in headers {
                let fields: HTTPFields = header.map { [.authorization: $0] } ?? [:]
                statuses.append(try await client.execute(uri: uri, method: method, headers: fields) { $0.status })
            }
            return statuses
        }
    }

    @Test func aConfiguredKeyIsRequiredAndOnlyItIsAccepted() async throws {
        let setup = try CardholderTokenSettingsTests.production(["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "pushprov-tmp", "PUSHPROV_METRICS_API_KEY": Self.metricsKey])
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let configuration = try CardholderTokenSettingsTests.productionSettings().resolve(environment: setup.environment)
        #expect(configuration.metricsAPIKey == Self.metricsKey)
        #expect(!configuration.notices.contains { $0.contains("GET /metrics answers anyone") })
        let statuses = try await Self.statuses(configuration, [
            "Bearer \(Self.metricsKey)", "bearer \(Self.metricsKey)", nil, "Bearer \(Self.metricsKey)x", "Bearer \(CardholderTokenSettingsTests.issuerKey)",
            "Bearer \(CardholderTokenSettingsTests.tspKey)", "Basic \(Self.metricsKey)", "Bearer ",
        ])
        #expect(statuses == [.ok, .ok, .unauthorized, .unauthorized, .unauthorized, .unauthorized, .unauthorized, .unauthorized])
        // HEAD, and the path with a trailing slash, are the same route.
        let other = try await Self.statuses(configuration, [nil, "Bearer \(Self.metricsKey)"], uri: "/metrics/", method: .head)
        #expect(other == [.unauthorized, .ok])
    }

    @Test func withoutAKeyTheMetricsAnswerAnyoneAndProductionSaysSo() async throws {
        let setup = try CardholderTokenSettingsTests.production(["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "pushprov-tmp"])
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let configuration = try CardholderTokenSettingsTests.productionSettings().resolve(environment: setup.environment)
        #expect(configuration.metricsAPIKey == nil)
        #expect(configuration.notices.contains { $0.hasPrefix("warning: GET /metrics answers anyone") })
        #expect(try await Self.statuses(configuration, [nil, "Bearer anything"]) == [.ok, .ok])
    }

    @Test(arguments: [
        ("short-key", "PUSHPROV_METRICS_API_KEY must be at least 32 characters"),
        ("metrics key with spaces 0123456789abcdefgh", "PUSHPROV_METRICS_API_KEY must be letters, digits"),
        (CardholderTokenSettingsTests.issuerKey, "PUSHPROV_METRICS_API_KEY must differ from the issuer API key"),
        (CardholderTokenSettingsTests.issuerKey + "==", "PUSHPROV_METRICS_API_KEY must differ from the issuer API key"),
        (CardholderTokenSettingsTests.tspKey, "PUSHPROV_METRICS_API_KEY must differ from the TSP API key"),
    ])
    func productionRefusesAKeyThatIsWeakMalformedOrAnotherAPIs(key: String, message: String) throws {
        let setup = try CardholderTokenSettingsTests.production(["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "pushprov-tmp", "PUSHPROV_METRICS_API_KEY": key])
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let refusal = #expect(throws: ConfigurationError.self) { try CardholderTokenSettingsTests.productionSettings().resolve(environment: setup.environment) }
        #expect(refusal?.message.hasPrefix(message) == true, "\(refusal?.message ?? "")")
    }

    @Test func theEmbeddedRunTakesAKeyOfAnyLengthButNotAnotherAPIs() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-metrics-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerSettings()
        settings.dataDirectory = directory.path
        let configuration = try settings.resolve(environment: ["PUSHPROV_METRICS_API_KEY": "m"])
        #expect(configuration.metricsAPIKey == "m")
        #expect(!configuration.notices.contains { $0.contains("GET /metrics answers anyone") })
        let refusal = #expect(throws: ConfigurationError.self) { try settings.resolve(environment: ["PUSHPROV_METRICS_API_KEY": configuration.issuerAPIKey]) }
        #expect(refusal?.message.hasPrefix("PUSHPROV_METRICS_API_KEY must differ from the issuer API key") == true)
    }
}
