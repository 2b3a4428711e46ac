import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProvisioningCrypto
import ProvisioningModels
import SDKTestSupport
import ServiceLifecycle
import TokenPlatform
import WalletSimulator

/// What every in-process TMP fixture shares: the start instant, the API keys, the secrets
/// (PAN vault, activation data, the identity provider's key, Apple's simulated PKI), the
/// application wired from them, and a loopback listener.
public enum TestTMP {
    /// The instant the fixtures' clocks start at: 2026-09-21.
    public static let start = Date(timeIntervalSince1970: 1_790_000_000)
    /// The issuer back office's API key.
    public static let issuerKey = "issuer-test-key"
    /// The token service provider's API key.
    public static let tspKey = "tsp-test-key"

    /// What instances serving one database must share: the PAN vault and activation-data
    /// keys, the identity provider's key and Apple's (simulated) PKI.
    public struct Secrets: Sendable {
        /// The PAN vault's keys.
        public var vaultKeys = PANVaultKeys.generate()
        /// The key that signs activation data.
        public var activationKey = SigningKey.generate()
        /// The identity provider's key: signs cardholder JWTs.
        public var cardholderKey = SigningKey.generate()
        /// Apple's PKI, simulated; its root is the extra trust anchor.
        public var pki: SimulatedApplePKI

        /// Fresh keys, and a PKI whose certificates are valid at `now`.
        public init(now: Date = TestTMP.start) throws {
            pki = try SimulatedApplePKI(now: now)
        }

        /// TMP's environment on `store` with these secrets; the rest as `PlatformEnvironment` takes it.
        public func environment(
            store: any TMPStore,
            policy: ActivationPolicy = .inApp,
            connector: any TokenServiceConnector,
            connectorTimeout: Duration = TimeLimitedTokenServiceConnector.defaultLimit,
            clock: any Clock<Duration> = ContinuousClock(),
            now: @escaping @Sendable () -> Date,
            makeIdentifier: @escaping @Sendable () -> String = { UUID().uuidString.replacingOccurrences(of: "-", with: "") },
            logger: Logger,
            serializingTokenCommands: Bool = true
        ) -> PlatformEnvironment {
            PlatformEnvironment(
                store: store,
                vault: PANVault(keys: vaultKeys),
                chainValidator: AppleChainValidator(configuration: .init(trustAnchors: TrustAnchors.apple.adding([pki.root]))),
                activationKeys: [activationKey],
                activationPolicy: policy,
                connector: connector,
                connectorTimeout: connectorTimeout,
                clock: clock,
                now: now,
                makeIdentifier: makeIdentifier,
                logger: logger,
                serializingTokenCommands: serializingTokenCommands
            )
        }

        /// A cardholder JWT for `user` issued at `now` (signed with `key`, the identity provider's unless given).
        public func jwt(_ user: String, lifetime: TimeInterval, now: Date, key: SigningKey? = nil) throws -> String {
            try DevelopmentTokenIssuer(key: key ?? cardholderKey).token(userId: user, lifetime: lifetime, now: now)
        }

        /// TMP's router serving `environment`, trusting these secrets' JWTs and the fixture API keys.
        public func router(environment: PlatformEnvironment, now: @escaping @Sendable () -> Date) -> Router<BasicRequestContext> {
            TokenPlatformRouter(environment: environment, authenticator: authenticator(now: now)).build()
        }

        /// An authenticator trusting these secrets' JWTs and the fixture API keys.
        public func authenticator(now: @escaping @Sendable () -> Date) -> Authenticator {
            Authenticator(
                cardholderTokens: CardholderTokenVerifier(keys: [cardholderKey.id: cardholderKey.privateKey.publicKey]),
                issuerKey: APIKey(TestTMP.issuerKey),
                tspKey: APIKey(TestTMP.tspKey),
                now: now
            )
        }

        /// TMP's application serving `environment` (for Hummingbird's in-process router tests;
        /// live tests serve the same router through ``TestTMP/runLive(router:logger:_:)``).
        public func application(environment: PlatformEnvironment, now: @escaping @Sendable () -> Date, logger: Logger) -> some ApplicationProtocol {
            Application(router: router(environment: environment, now: now), logger: logger)
        }
    }

    /// A fresh in-memory SQLite store, migrated.
    public static func memoryStore() async throws -> SQLiteStore {
        let store = try SQLiteStore.inMemory()
        try await store.migrate()
        return store
    }

    /// Serves `router` through the server's real HTTP front (``TMPHTTPServer``) on a free
    /// loopback port, runs `body` with a client and the port, and stops the server gracefully.
    @discardableResult
    public static func runLive<T: Sendable>(
        router: Router<BasicRequestContext>,
        logger: Logger,
        _ body: @escaping @Sendable (LiveClient, Int) async throws -> T
    ) async throws -> T {
        try await runLive({ onRunning in TMPHTTPServer(router: router, host: "127.0.0.1", port: 0, logger: logger, onServerRunning: onRunning) }, body)
    }

    /// Runs the server `makeServer` builds (given the callback that learns its port) and
    /// `body` with a keep-alive client on that port; then shuts the server down gracefully.
    @discardableResult
    public static func runLive<T: Sendable>(
        _ makeServer: (@escaping @Sendable (Int) async -> Void) -> TMPHTTPServer,
        _ body: @escaping @Sendable (LiveClient, Int) async throws -> T
    ) async throws -> T {
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let server = makeServer { port in
            portContinuation.yield(port)
            portContinuation.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [server], gracefulShutdownSignals: [], logger: Logger(label: "test.live") { _ in SwiftLogNoOpLogHandler() }))
        return try await withThrowingTaskGroup(of: T?.self) { tasks in
            tasks.addTask {
                try await group.run()
                return nil
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw TestFailure("the live server did not start") }
            let client = TestClient(host: "127.0.0.1", port: port)
            client.connect()
            let result: T
            do {
                result = try await body(LiveClient(client: client, port: port), port)
            } catch {
                try? await client.shutdown()
                await group.triggerGracefulShutdown()
                throw error
            }
            try await client.shutdown()
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return result
        }
    }

    /// A keep-alive HTTP/1.1 client of a live server.
    public struct LiveClient: Sendable {
        let client: TestClient
        /// The server's port.
        public let port: Int?

        /// Sends one request on the client's connection.
        public func execute(uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil) async throws -> TestReply {
            var headers = headers
            headers[.connection] = "keep-alive"
            let response = try await client.execute(TestClient.Request(uri, method: method, authority: "localhost", headers: headers, body: body))
            return TestReply(status: response.status, headers: response.head.headerFields, body: response.body.map { Data(buffer: $0) } ?? Data())
        }

        /// Sends one request on the client's connection (as ``TestClientProtocol/reply(_:_:headers:body:)``).
        public func reply(_ method: HTTPRequest.Method, _ path: String, headers: HTTPFields, body: ByteBuffer?) async throws -> TestReply {
            try await execute(uri: path, method: method, headers: headers, body: body)
        }
    }

    /// A logger whose lines (message, metadata, error) go to `lines`.
    public static func logger(_ label: String, into lines: Locked<[String]>) -> Logger {
        Logger(label: label) { _ in CapturingLogHandler(lines: lines) }
    }
}

/// Captures every log line (level, message, metadata, error) so tests can grep them for secrets.
public struct CapturingLogHandler: LogHandler {
    /// Where the lines go.
    public let lines: Locked<[String]>
    /// The logger's own metadata.
    public var metadata: Logger.Metadata = [:]
    /// Everything is captured.
    public var logLevel: Logger.Level = .trace

    /// Captures into `lines`.
    public init(lines: Locked<[String]>) { self.lines = lines }

    /// One metadata value.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Appends the line.
    public func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        lines.withValue { $0.append("\(event.level) \(event.message) \(all) \(event.error.map { "\($0)" } ?? "")") }
    }
}

/// One reply from TMP, as a test reads it.
public struct TestReply: Sendable {
    /// The status.
    public var status: HTTPResponse.Status
    /// The headers.
    public var headers: HTTPFields
    /// The body.
    public var body: Data

    /// A reply.
    public init(status: HTTPResponse.Status, headers: HTTPFields = [:], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }
    /// The body decoded as JSON.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T { try JSONDecoder().decode(T.self, from: body) }
    /// The error envelope's body, when the reply is one.
    public var error: ErrorEnvelope.Body? { try? JSONDecoder().decode(ErrorEnvelope.self, from: body).error }
}

extension TestClientProtocol {
    /// Sends one request and reads the whole reply.
    public func reply(_ method: HTTPRequest.Method, _ path: String, headers: HTTPFields, body: ByteBuffer?) async throws -> TestReply {
        let response = try await execute(uri: path, method: method, headers: headers, body: body)
        return TestReply(status: response.status, headers: response.headers, body: Data(buffer: response.body))
    }
}

/// A fixture step that did not go as the scenario needs.
public struct TestFailure: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String
    /// A failure saying `description`.
    public init(_ description: String) { self.description = description }
}
