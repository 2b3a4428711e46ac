import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProvisioningCrypto
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import Testing
import TokenPlatform
import WalletSimulator

/// A token service double: records commands, fails on demand, and can run a hook (for
/// example a token event echoed back to TMP) before a command returns.
final class RecordingConnector: TokenServiceConnector, @unchecked Sendable {
    // @unchecked: mutable state lives in `Locked` boxes.
    let commands = Locked<[String]>([])
    let failing = Locked<Bool>(false)
    /// Runs while a command is with the token service, before it returns to TMP (to change
    /// things meanwhile, or to deliver the token service's echo first).
    let meanwhile = Locked<(@Sendable (String, TokenRecord) async throws -> Void)?>(nil)
    /// Runs when a command reaches the token service, before it is carried out (recorded in
    /// ``commands``): what it runs reaches the token service first.
    let before = Locked<(@Sendable (String, TokenRecord) async throws -> Void)?>(nil)

    private func record(_ command: String, _ token: TokenRecord) async throws {
        if failing.current { throw URLError(.cannotConnectToHost) }
        // The hooks run as tasks of their own, as requests from outside would (a request they
        // send does not share the command's place in TMP's line).
        if let hook = before.current { try await Task.detached { try await hook(command, token) }.value }
        commands.withValue { $0.append("\(command) \(token.tokenUniqueReference)") }
        if let hook = meanwhile.current { try await Task.detached { try await hook(command, token) }.value }
    }

    func activate(_ token: TokenRecord) async throws { try await record("activate", token) }
    func suspend(_ token: TokenRecord) async throws { try await record("suspend", token) }
    func resume(_ token: TokenRecord) async throws { try await record("resume", token) }
    func deactivate(_ token: TokenRecord) async throws { try await record("deactivate", token) }
}

/// The TMP server wired for tests: in-memory SQLite (or a file, or any store), a simulated
/// Apple PKI as the extra trust anchor, a recording token service, captured logs, a movable clock.
struct TestPlatform {
    static let issuerKey = TestTMP.issuerKey
    static let tspKey = TestTMP.tspKey

    /// What instances serving one database must share.
    typealias Secrets = TestTMP.Secrets

    let store: any TMPStore
    let connector = RecordingConnector()
    let secrets: Secrets
    var pki: SimulatedApplePKI { secrets.pki }
    var activationKey: SigningKey { secrets.activationKey }
    var cardholderKey: SigningKey { secrets.cardholderKey }
    let clock = Locked(TestTMP.start)  // 2026-09
    /// Set, the environment's next reading of the time cancels the task that reads it (once):
    /// a caller cancelled at a chosen step.
    let cancelAtNextNow = Locked(false)
    let logs = Locked<[String]>([])
    var environment: PlatformEnvironment
    let counter = Locked(0)

    /// An instance on a fresh SQLite database (in memory unless `databasePath` is given).
    ///
    /// `tokenService` replaces ``connector`` as the token service (which then sees nothing);
    /// `serializingTokenCommands` false lets one token's commands overlap, as two instances
    /// sharing a database would send them (the races TMP's corrections are for; a hook of
    /// ``connector`` sending a command for the token it holds then does not wait for it);
    /// `connectorTimeout` and `connectorClock` time its commands. The clock stands still unless
    /// a test passes one: a command a test holds at a gate, on a loaded machine, must not run
    /// into the 10 s limit (ConnectorTimeoutTests move their own clock past it).
    init(
        policy: ActivationPolicy = .inApp,
        databasePath: String? = nil,
        tokenService: (any TokenServiceConnector)? = nil,
        connectorTimeout: Duration = TimeLimitedTokenServiceConnector.defaultLimit,
        connectorClock: any Clock<Duration> = ManualClock(),
        serializingTokenCommands: Bool = true
    ) async throws {
        let store = try databasePath.map { try SQLiteStore(path: $0) } ?? SQLiteStore.inMemory()
        try await store.migrate()
        try self.init(
            policy: policy, store: store, secrets: Secrets(), tokenService: tokenService, connectorTimeout: connectorTimeout, connectorClock: connectorClock,
            serializingTokenCommands: serializingTokenCommands
        )
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
        connectorClock: any Clock<Duration> = ManualClock(),
        serializingTokenCommands: Bool = true
    ) throws {
        self.store = store
        self.secrets = secrets
        let clock = clock
        let counter = counter
        let cancelAtNextNow = cancelAtNextNow
        environment = secrets.environment(
            store: store,
            policy: policy,
            connector: tokenService ?? connector,
            connectorTimeout: connectorTimeout,
            clock: connectorClock,
            now: {
                if cancelAtNextNow.withValue({ cancel in defer { cancel = false }; return cancel }) { withUnsafeCurrentTask { $0?.cancel() } }
                return clock.current
            },
            makeIdentifier: { instance + counter.withValue { $0 += 1; return String(format: "%08d", $0) } },
            logger: TestTMP.logger("test", into: logs),
            serializingTokenCommands: serializingTokenCommands
        )
    }

    var logger: Logger { TestTMP.logger("test.http", into: logs) }

    func application() -> some ApplicationProtocol {
        secrets.application(environment: environment, now: { [clock] in clock.current }, logger: logger)
    }

    /// The router `application()` serves, for a live server (``TestTMP/runLive(router:logger:_:)``).
    func router() -> Router<BasicRequestContext> {
        secrets.router(environment: environment, now: { [clock] in clock.current })
    }

    /// The authenticator `router()` would use (a new one each call), following this platform's clock.
    func authenticator() -> Authenticator {
        secrets.authenticator(now: { [clock] in clock.current })
    }

    /// The router `application()` serves, authenticating with `authenticator`.
    func router(authenticator: Authenticator) -> Router<BasicRequestContext> {
        TokenPlatformRouter(environment: environment, authenticator: authenticator).build()
    }

    /// A cardholder JWT for `user`.
    func jwt(_ user: String, lifetime: TimeInterval = 600, key: SigningKey? = nil) -> String {
        try! secrets.jwt(user, lifetime: lifetime, now: clock.current, key: key)
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
            try await client.reply(method, path, headers: headers, body: body)
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

    typealias Reply = TestReply

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
        // The token service's events must be taken, or a broken event endpoint would fail the
        // tests that provision only indirectly.
        let created = try await event(reference, pur: pur, .created, device: device)
        guard created.status == .ok else { throw TestFailure("CREATED \(reference): \(created.status) \(created.text)") }
        if decision.decision == .approved {
            let activated = try await event(reference, pur: pur, .activated, device: device)
            guard activated.status == .ok else { throw TestFailure("ACTIVATED \(reference): \(activated.status) \(activated.text)") }
        }
        return decision
    }

    @discardableResult
    func event(_ reference: String, pur: String, _ type: TokenEventType, device: DeviceType = .phone, id: String? = nil, occurredAt: EventTime? = nil, tokenLast4: String? = "9876") async throws -> Reply {
        let reply = try await send(.post, "/tsp/token-events", as: .tsp, json: TokenEventRequest(eventId: id ?? "evt-\(UUID())", tokenUniqueReference: reference, panUniqueReference: pur, event: type, deviceType: device, tokenLast4: tokenLast4, occurredAt: occurredAt))
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

extension TestPlatform {
    /// Uploads `art` as `artId` through the Lifecycle API and puts alice's card `c1`
    /// (4111 1111 1111 1111) showing it.
    func putAliceCard(showing art: Data, contentType: String, as artId: String, through api: APIClient) async throws {
        let upload = try await api.send(.put, "/lifecycle/card-art/\(artId)", as: .issuer, raw: art, contentType: contentType)
        #expect(upload.status == .ok, "\(upload.text)")
        let body = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold", artId: artId)
        let card = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, json: body)
        #expect(card.status == .created, "\(card.text)")
    }

    /// Writes card art straight to the store, as another instance or an earlier version would
    /// have stored it, without this process's check.
    func storeArtDirectly(_ artId: String, contentType: String, data: Data) async throws {
        try await store.putCardArt(
            CardArtRecord(artId: artId, contentType: contentType, data: data, updatedAt: clock.current),
            audit: AuditEntry(at: clock.current, actor: "issuer", action: "card_art.put", subject: "card_art:\(artId)", detail: "test")
        )
    }
}
