import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProvisioningCrypto
import ProvisioningModels
import TokenPlatform
import WalletSimulator

/// A value guarded by a lock, for test doubles shared across tasks.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withValue<T>(_ body: (inout Value) -> T) -> T { lock.withLock { body(&value) } }
    var current: Value { withValue { $0 } }
}

/// Captures every log line (message and metadata) so tests can grep them for secrets.
struct CapturingLogHandler: LogHandler {
    let lines: Locked<[String]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        lines.withValue { $0.append("\(event.level) \(event.message) \(all) \(event.error.map { "\($0)" } ?? "")") }
    }
}

/// A token service double: records commands, fails on demand, and can run a hook (for
/// example a token event echoed back to TMP) before a command returns.
final class RecordingConnector: TokenServiceConnector, @unchecked Sendable {
    // @unchecked: mutable state lives in `Locked` boxes.
    let commands = Locked<[String]>([])
    let failing = Locked<Bool>(false)
    /// Runs while a command is with the token service, before it returns to TMP (to change
    /// things meanwhile, or to deliver the token service's echo first).
    let meanwhile = Locked<(@Sendable (String, TokenRecord) async throws -> Void)?>(nil)

    private func record(_ command: String, _ token: TokenRecord) async throws {
        if failing.current { throw URLError(.cannotConnectToHost) }
        commands.withValue { $0.append("\(command) \(token.tokenUniqueReference)") }
        try await meanwhile.current?(command, token)
    }

    func activate(_ token: TokenRecord) async throws { try await record("activate", token) }
    func suspend(_ token: TokenRecord) async throws { try await record("suspend", token) }
    func resume(_ token: TokenRecord) async throws { try await record("resume", token) }
    func deactivate(_ token: TokenRecord) async throws { try await record("deactivate", token) }
}

/// The TMP server wired for tests: in-memory SQLite (or a file, or any store), a simulated
/// Apple PKI as the extra trust anchor, a recording token service, captured logs, a movable clock.
struct TestPlatform {
    static let issuerKey = "issuer-test-key"
    static let tspKey = "tsp-test-key"

    /// What instances serving one database must share: the PAN vault and activation-data
    /// keys, the identity provider's key and Apple's (simulated) PKI.
    struct Secrets: Sendable {
        var vaultKeys = PANVaultKeys.generate()
        var activationKey = SigningKey.generate()
        var cardholderKey = SigningKey.generate()
        var pki: SimulatedApplePKI

        init() throws {
            pki = try SimulatedApplePKI(now: Date(timeIntervalSince1970: 1_790_000_000))
        }
    }

    let store: any TMPStore
    let connector = RecordingConnector()
    let secrets: Secrets
    var pki: SimulatedApplePKI { secrets.pki }
    var activationKey: SigningKey { secrets.activationKey }
    var cardholderKey: SigningKey { secrets.cardholderKey }
    let clock = Locked(Date(timeIntervalSince1970: 1_790_000_000))  // 2026-09
    let logs = Locked<[String]>([])
    let environment: PlatformEnvironment
    let counter = Locked(0)

    /// An instance on a fresh SQLite database (in memory unless `databasePath` is given).
    ///
    /// `tokenService` replaces ``connector`` as the token service (which then sees nothing);
    /// `connectorTimeout` and `connectorClock` time its commands.
    init(
        policy: ActivationPolicy = .inApp,
        databasePath: String? = nil,
        tokenService: (any TokenServiceConnector)? = nil,
        connectorTimeout: Duration = TimeLimitedTokenServiceConnector.defaultLimit,
        connectorClock: any Clock<Duration> = ContinuousClock()
    ) async throws {
        let store = try databasePath.map { try SQLiteStore(path: $0) } ?? SQLiteStore.inMemory()
        try await store.migrate()
        try self.init(policy: policy, store: store, secrets: Secrets(), tokenService: tokenService, connectorTimeout: connectorTimeout, connectorClock: connectorClock)
    }

    /// An instance on `store` (migrated by the caller) with `secrets`; `instance` prefixes the
    /// identifiers it makes, so instances sharing a database do not collide.
    init(
        policy: ActivationPolicy = .inApp,
        store: any TMPStore,
        secrets: Secrets,
        instance: String = "",
        tokenService: (any TokenServiceConnector)? = nil,
        connectorTimeout: Duration = TimeLimitedTokenServiceConnector.defaultLimit,
        connectorClock: any Clock<Duration> = ContinuousClock()
    ) throws {
        self.store = store
        self.secrets = secrets
        let clock = clock
        let counter = counter
        environment = PlatformEnvironment(
            store: store,
            vault: PANVault(keys: secrets.vaultKeys),
            chainValidator: AppleChainValidator(configuration: .init(trustAnchors: TrustAnchors.apple.adding([secrets.pki.root]))),
            activationKeys: [secrets.activationKey],
            activationPolicy: policy,
            connector: tokenService ?? connector,
            connectorTimeout: connectorTimeout,
            clock: connectorClock,
            now: { clock.current },
            makeIdentifier: { instance + counter.withValue { $0 += 1; return String(format: "%08d", $0) } },
            logger: Logger(label: "test") { [logs] _ in CapturingLogHandler(lines: logs) }
        )
    }

    var logger: Logger { Logger(label: "test.http") { [logs] _ in CapturingLogHandler(lines: logs) } }

    func application() -> some ApplicationProtocol {
        let authenticator = Authenticator(
            cardholderTokens: CardholderTokenVerifier(keys: [cardholderKey.id: cardholderKey.privateKey.publicKey]),
            issuerKey: APIKey(Self.issuerKey),
            tspKey: APIKey(Self.tspKey),
            now: { [clock] in clock.current }
        )
        let router = TokenPlatformRouter(environment: environment, authenticator: authenticator).build()
        return Application(router: router, logger: logger)
    }

    /// A cardholder JWT for `user`.
    func jwt(_ user: String, lifetime: TimeInterval = 600, key: SigningKey? = nil) -> String {
        try! DevelopmentTokenIssuer(key: key ?? cardholderKey).token(userId: user, lifetime: lifetime, now: clock.current)
    }

    func advance(_ seconds: TimeInterval) { clock.withValue { $0 += seconds } }

    /// Runs `body` against the router with a client.
    func run(_ body: @escaping @Sendable (APIClient) async throws -> Void) async throws {
        try await application().test(.router) { client in
            try await body(APIClient(client: client, platform: self))
        }
    }
}

/// The credential a test request carries.
enum Credential: Sendable {
    case none
    case cardholder(String)
    case issuer
    case tsp
    case raw(String)
}

/// A thin JSON client over Hummingbird's test client, or over loopback HTTP to a live server.
struct APIClient: Sendable {
    /// Sends one request and returns the reply.
    typealias Transport = @Sendable (_ method: HTTPRequest.Method, _ path: String, _ headers: HTTPFields, _ body: ByteBuffer?) async throws -> Reply

    let transport: Transport
    let platform: TestPlatform

    init(client: any TestClientProtocol, platform: TestPlatform) {
        transport = { method, path, headers, body in
            let response = try await client.execute(uri: path, method: method, headers: headers, body: body)
            return Reply(status: response.status, headers: response.headers, body: Data(buffer: response.body))
        }
        self.platform = platform
    }

    /// A client of a live test server (on loopback, `localhost:port`): each request has its own connection,
    /// so concurrent requests are handled concurrently.
    init(port: Int, platform: TestPlatform) {
        transport = { method, path, headers, body in
            try await TestClient.withClient(host: "localhost", port: port) { client in
                let response = try await client.execute(TestClient.Request(path, method: method, authority: "localhost:\(port)", headers: headers, body: body))
                return Reply(status: response.status, headers: response.head.headerFields, body: response.body.map { Data(buffer: $0) } ?? Data())
            }
        }
        self.platform = platform
    }

    struct Reply: Sendable {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try JSONDecoder().decode(T.self, from: body) }
        var error: ErrorEnvelope.Body? { try? JSONDecoder().decode(ErrorEnvelope.self, from: body).error }
    }

    func send(_ method: HTTPRequest.Method, _ path: String, as credential: Credential = .none, json: (any Encodable)? = nil, raw: Data? = nil, contentType: String? = "application/json") async throws -> Reply {
        var headers: HTTPFields = [:]
        switch credential {
        case .none: break
        case .cardholder(let user): headers[.authorization] = "Bearer \(platform.jwt(user))"
        case .issuer: headers[.authorization] = "Bearer \(TestPlatform.issuerKey)"
        case .tsp: headers[.authorization] = "Bearer \(TestPlatform.tspKey)"
        case .raw(let value): headers[.authorization] = value
        }
        var body: ByteBuffer?
        if let json {
            body = ByteBuffer(bytes: try JSONEncoder().encode(json))
        } else if let raw {
            body = ByteBuffer(bytes: raw)
        }
        if body != nil, let contentType { headers[.contentType] = contentType }
        return try await transport(method, path, headers, body)
    }

    // MARK: Scenario helpers

    @discardableResult
    func putCard(_ id: String, user: String, pan: String = "4111111111111111", expiration: String = "12/29", name: String = "Jane Appleseed", network: CardNetwork = .visa) async throws -> CardResource {
        let request = CardUpsertRequest(userId: user, primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration(expiration), cardholderName: name, network: network, productTitle: "Everyday Debit")
        let reply = try await send(.put, "/lifecycle/cards/\(id)", as: .issuer, json: request)
        guard reply.status == .created || reply.status == .ok else { throw TestFailure("putCard \(id): \(reply.status) \(reply.text)") }
        return try reply.decode(CardResource.self)
    }

    func signCard(_ id: String, user: String, device: DeviceType = .phone, nonce: Data = Data("nonce-\(UUID())".utf8)) async throws -> Reply {
        let request = SignedCardRequest(externalCardId: id, deviceType: device, certificates: platform.pki.walletCertificates, nonce: nonce, nonceSignature: Data("apple-signature".utf8))
        return try await send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder(user), json: request)
    }

    /// Runs a card through provisioning as Wallet and the TSP would: seal, decide, create (and activate on green).
    @discardableResult
    func provision(_ id: String, user: String, pan: String = "4111111111111111", device: DeviceType = .phone, token reference: String, expiration: String = "12/29") async throws -> TokenizationDecisionResponse {
        let sealed = try await signCard(id, user: user, device: device)
        guard sealed.status == .ok else { throw TestFailure("signCard: \(sealed.status) \(sealed.text)") }
        let response = try sealed.decode(SignedCardResponse.self)
        let decision = try await send(.post, "/tsp/tokenization-decisions", as: .tsp, json: TokenizationDecisionRequest(
            requestId: "req-\(reference)", primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration(expiration),
            activationData: String(decoding: response.activationData.data, as: UTF8.self), deviceType: device
        )).decode(TokenizationDecisionResponse.self)
        guard decision.decision != .declined, let pur = decision.panUniqueReference else { return decision }
        try await event(reference, pur: pur, .created, device: device)
        if decision.decision == .approved { try await event(reference, pur: pur, .activated, device: device) }
        return decision
    }

    @discardableResult
    func event(_ reference: String, pur: String, _ type: TokenEventType, device: DeviceType = .phone, id: String? = nil) async throws -> Reply {
        let reply = try await send(.post, "/tsp/token-events", as: .tsp, json: TokenEventRequest(eventId: id ?? "evt-\(UUID())", tokenUniqueReference: reference, panUniqueReference: pur, event: type, deviceType: device, tokenLast4: "9876"))
        return reply
    }

    /// While the token service works on `command`, card `id` changes to `status`: a request
    /// of another caller landing mid-flight.
    func meanwhile(_ command: String, setCard id: String, to status: CardStatus) {
        platform.connector.meanwhile.withValue { $0 = { current, _ in
            guard current == command else { return }
            _ = try await send(.patch, "/lifecycle/cards/\(id)", as: .issuer, json: CardStatusChangeRequest(status: status))
        } }
    }

    func tokenStatus(_ reference: String) async throws -> TokenStatus? {
        try await platform.store.token(reference: reference)?.status
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
