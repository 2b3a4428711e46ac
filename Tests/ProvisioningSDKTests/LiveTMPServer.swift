import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProvisioningCrypto
import ProvisioningModels
import ProvisioningSDK
import TMPTestSupport
import TokenPlatform
import WalletSimulator

/// The real TMP server, in process, listening on a loopback port: what the SDK's client
/// talks to over real HTTP (URLSession), while the test plays the issuer back office and
/// the token service provider through their own APIs.
struct LiveTMPServer {
    static let issuerKey = TestTMP.issuerKey
    static let tspKey = TestTMP.tspKey
    static let now = TestTMP.start  // 2026-09

    let secrets: TestTMP.Secrets
    var pki: SimulatedApplePKI { secrets.pki }
    let environment: PlatformEnvironment

    init() async throws {
        secrets = try TestTMP.Secrets(now: Self.now)
        environment = secrets.environment(
            store: try await TestTMP.memoryStore(),
            connector: AcceptingConnector(),
            now: { Self.now },
            logger: Logger(label: "live-tmp") { _ in SwiftLogNoOpLogHandler() }
        )
    }

    /// A cardholder JWT for `user`, issued `age` seconds ago and valid for `lifetime`.
    func jwt(_ user: String, age: TimeInterval = 0, lifetime: TimeInterval = 600) throws -> String {
        try secrets.jwt(user, lifetime: lifetime, now: Self.now.addingTimeInterval(-age))
    }

    /// Runs `body` with the server listening; `Session` knows the base URL and plays the back office.
    func run(_ body: @escaping @Sendable (Session) async throws -> Void) async throws {
        let router = secrets.router(environment: environment, now: { Self.now })
        try await TestTMP.runLive(router: router, logger: Logger(label: "live-tmp.http") { _ in SwiftLogNoOpLogHandler() }) { client, port in
            try await body(Session(server: self, client: client, baseURL: URL(string: "http://localhost:\(port)/")!))
        }
    }

    /// One running server.
    struct Session: Sendable {
        let server: LiveTMPServer
        let client: TestTMP.LiveClient
        let baseURL: URL

        /// The SDK's client, over URLSession, as `user`.
        func sdkClient(user: String, age: TimeInterval = 0) throws -> TMPClient {
            let token = try server.jwt(user, age: age)
            return TMPClient(configuration: .init(baseURL: baseURL, retry: .none), cardholderToken: { token })
        }

        /// The back office loads a card.
        func putCard(_ id: String, user: String, pan: String = "4111111111111111", name: String = "Jane Appleseed") async throws {
            let request = CardUpsertRequest(userId: user, primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"), cardholderName: name, network: .visa, productTitle: "Everyday Debit")
            let reply = try await send(.put, "/lifecycle/cards/\(id)", key: LiveTMPServer.issuerKey, json: request)
            guard reply.status == .created || reply.status == .ok else { throw TestFailure("putCard \(id): \(reply.status)") }
        }

        /// The back office changes a card's status.
        func setCardStatus(_ id: String, _ status: CardStatus) async throws {
            let reply = try await send(.patch, "/lifecycle/cards/\(id)", key: LiveTMPServer.issuerKey, json: CardStatusChangeRequest(status: status))
            guard reply.status == .ok else { throw TestFailure("setCardStatus \(id): \(reply.status)") }
        }

        /// The token service decides on the sealed card and reports the token it made.
        func tokenize(pan: String = "4111111111111111", activationData: Data, device: DeviceType, token reference: String) async throws -> TokenizationDecision {
            let decision = try await send(.post, "/tsp/tokenization-decisions", key: LiveTMPServer.tspKey, json: TokenizationDecisionRequest(
                requestId: "req-\(reference)", primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"),
                activationData: String(decoding: activationData, as: UTF8.self), deviceType: device
            )).decode(TokenizationDecisionResponse.self)
            guard decision.decision != .declined, let pur = decision.panUniqueReference else { return decision.decision }
            let events: [TokenEventType] = decision.decision == .approved ? [.created, .activated] : [.created]
            for event in events {
                let reply = try await send(.post, "/tsp/token-events", key: LiveTMPServer.tspKey, json: TokenEventRequest(eventId: "evt-\(reference)-\(event.rawValue)", tokenUniqueReference: reference, panUniqueReference: pur, event: event, deviceType: device, tokenLast4: "9876"))
                guard reply.status == .ok else { throw TestFailure("token event: \(reply.status)") }
            }
            return decision.decision
        }

        private func send(_ method: HTTPRequest.Method, _ path: String, key: String, json: some Encodable) async throws -> TestReply {
            try await client.reply(
                method, path,
                headers: [.authorization: "Bearer \(key)", .contentType: "application/json"],
                body: ByteBuffer(bytes: try JSONEncoder().encode(json))
            )
        }
    }
}

/// A token service that carries out every command.
struct AcceptingConnector: TokenServiceConnector {
    func activate(_ token: TokenRecord) async throws {}
    func suspend(_ token: TokenRecord) async throws {}
    func resume(_ token: TokenRecord) async throws {}
    func deactivate(_ token: TokenRecord) async throws {}
}
