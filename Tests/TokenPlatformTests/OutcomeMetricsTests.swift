import Foundation
import HTTPTypes
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import Testing
@testable import TokenPlatform

@Suite("Every signed-cards and activation request is counted once, under the outcome the client sees")
struct OutcomeMetricsTests {
    static let provisioning = "pushprov_provisioning_outcomes_total"
    static let activation = "pushprov_activation_outcomes_total"

    /// The series of `family` in a Prometheus text exposition, by outcome.
    static func outcomes(_ family: String, in text: String) -> [String: Double] {
        var found: [String: Double] = [:]
        let prefix = "\(family){outcome=\""
        for line in text.split(separator: "\n") where line.hasPrefix(prefix) {
            let rest = line.dropFirst(prefix.count)
            guard let close = rest.range(of: "\"} ") else { continue }
            found[String(rest[..<close.lowerBound])] = Double(rest[close.upperBound...])
        }
        return found
    }

    /// The outcomes counted so far, leaving out those still at zero.
    static func counted(_ family: String, _ api: APIClient) async throws -> [String: Double] {
        try await outcomes(family, in: api.send(.get, "/metrics").text).filter { $0.value != 0 }
    }

    /// What the client saw of each reply: the error envelope's code, or the success outcome.
    static func seen(_ replies: [TestReply], success: (TestReply) throws -> String) throws -> [String: Double] {
        var seen: [String: Double] = [:]
        for reply in replies {
            seen[try reply.error?.code ?? success(reply), default: 0] += 1
        }
        return seen
    }

    static func activate(_ api: APIClient, _ reference: String, as credential: Credential = .cardholder("alice")) async throws -> TestReply {
        try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: credential, json: TokenActivationRequest(tokenUniqueReference: reference))
    }

    @Test func everyActivationIsCountedUnderItsOutcomeOrItsErrorCode() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "T1")
            let approved = try await Self.activate(api, "T1")
            let unknown = try await Self.activate(api, "T404")
            let badReference = try await Self.activate(api, "not a reference!")
            let anonymous = try await Self.activate(api, "T1", as: .none)
            let notJSON = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), raw: Data("{".utf8))
            #expect(approved.status == .ok)
            #expect(unknown.status == .notFound)
            #expect(unknown.error?.code == "token_not_found")
            #expect(badReference.status == .badRequest)
            #expect(badReference.error?.code == "invalid_field")
            #expect(anonymous.status == .unauthorized)
            #expect(notJSON.status == .badRequest)

            let counted = try await Self.counted(Self.activation, api)
            #expect(counted == ["APPROVED": 1, "token_not_found": 1, "invalid_field": 1, "unauthorized": 1, "invalid_request": 1])
            let seen = try Self.seen([approved, unknown, badReference, anonymous, notJSON]) { try $0.decode(TokenActivationResponse.self).issuerMobileAppAuthResponse.rawValue }
            #expect(counted == seen)
        }
    }

    @Test func everySignedCardsRequestIsCountedUnderSealedOrItsErrorCode() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let sealed = try await api.signCard("c1", user: "alice")
            let unknown = try await api.signCard("c404", user: "alice")
            let notJSON = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), raw: Data("{".utf8))
            let anonymous = try await api.send(.post, "/issuer/push-provisioning/signed-cards", raw: Data("{}".utf8))
            let forged = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .raw("Bearer not-a-jwt"), raw: Data("{}".utf8))
            #expect(sealed.status == .ok)
            #expect(unknown.error?.code == "card_not_found")
            #expect(notJSON.status == .badRequest)
            #expect(anonymous.status == .unauthorized)
            #expect(forged.status == .unauthorized)

            let counted = try await Self.counted(Self.provisioning, api)
            #expect(counted == ["sealed": 1, "card_not_found": 1, "invalid_request": 1, "unauthorized": 2])
            #expect(counted == (try Self.seen([sealed, unknown, notJSON, anonymous, forged]) { _ in "sealed" }))
        }
    }

    @Test func aSignedCardsRequestTheDatabaseCannotServeIsCountedAsDatabaseUnavailable() async throws {
        try await DatabaseOutageTests().withSQLiteFile { platform, _, path in
            try await platform.run { api in
                try await api.putCard("c1", user: "alice")
                let other = try SQLiteWriteLock(path: path)
                defer { other.release() }
                let refused = try await api.signCard("c1", user: "alice")
                other.release()
                #expect(refused.status == .serviceUnavailable, "\(refused.text)")
                #expect(refused.error?.code == "database_unavailable")
                #expect(try await api.signCard("c1", user: "alice").status == .ok)
                #expect(try await Self.counted(Self.provisioning, api) == ["database_unavailable": 1, "sealed": 1])
            }
        }
    }

    @Test func failuresOfTheServerAreCountedUnderTheCodesAnswered() async throws {
        struct Broken: Error {}
        let store = FaultyStore(base: try await TestTMP.memoryStore())
        let platform = try TestPlatform(store: store, secrets: .init())
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "T1")

            store.failure.withValue { $0 = Broken() }
            let brokenSeal = try await api.signCard("a1", user: "alice")
            let brokenActivation = try await Self.activate(api, "T1")
            store.failure.withValue { $0 = DatabaseUnavailable("no connection within the wait") }
            let unavailableSeal = try await api.signCard("a1", user: "alice")
            let unavailableActivation = try await Self.activate(api, "T1")
            store.failure.withValue { $0 = nil }

            for reply in [brokenSeal, brokenActivation] {
                #expect(reply.status == .internalServerError)
                #expect(reply.error?.code == "internal_error")
            }
            for reply in [unavailableSeal, unavailableActivation] {
                #expect(reply.status == .serviceUnavailable)
                #expect(reply.error?.code == "database_unavailable")
            }
            // `sealed` is provisioning's, before the store failed.
            #expect(try await Self.counted(Self.provisioning, api) == ["sealed": 1, "internal_error": 1, "database_unavailable": 1])
            #expect(try await Self.counted(Self.activation, api) == ["internal_error": 1, "database_unavailable": 1])
        }
    }

    @Test func aFreshServerListsTheOutcomesWatchedAtZero() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let text = try await api.send(.get, "/metrics").text
            #expect(Self.outcomes(Self.provisioning, in: text) == ["sealed": 0, "database_unavailable": 0, "internal_error": 0])
            #expect(Self.outcomes(Self.activation, in: text) == ["APPROVED": 0, "DECLINED": 0, "FAILED": 0, "database_unavailable": 0, "internal_error": 0])
        }
    }

    @Test func latencyBucketsReachTheLongestWaitsAndUnmatchedRequestsAreNotFound() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            #expect(try await api.send(.get, "/health").status == .ok)
            #expect(try await api.send(.get, "/no-such-route").status == .notFound)
            #expect(try await api.send(.delete, "/health").status == .methodNotAllowed)
            let lines = try await api.send(.get, "/metrics").text.split(separator: "\n").map(String.init)
            let health = lines.filter { $0.hasPrefix("pushprov_http_request_duration_seconds_bucket{") && $0.contains(#"method="GET""#) && $0.contains(#"route="/health""#) }
            let bounds = health.compactMap { line in line.range(of: #"le=""#).map { line[$0.upperBound...].prefix { $0 != "\"" } } }.map(String.init)
            #expect(bounds.suffix(5) == ["5.0", "10.0", "30.0", "60.0", "+Inf"], "\(bounds)")
            #expect(lines.contains { $0.hasPrefix("pushprov_http_requests_total{") && $0.contains(#"method="GET""#) && $0.contains(#"route="NotFound""#) && $0.contains(#"status="404""#) })
            #expect(lines.contains { $0.hasPrefix("pushprov_http_requests_total{") && $0.contains(#"method="DELETE""#) && $0.contains(#"route="NotFound""#) && $0.contains(#"status="405""#) })
            #expect(!lines.contains { $0.contains("unmatched") || $0.contains("no-such-route") })
        }
    }
}
