import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProvisioningCrypto
import ProvisioningModels
import Synchronization
import Testing
import TokenPlatform
import WalletSimulator

/// A value behind a mutex, for clocks, randomness and recorders shared across tasks.
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func update<T: Sendable>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
    var value: Value { mutex.withLock { $0 } }
}

/// Randomness that never repeats and is the same in every run: a counter's bytes.
struct CountingRandom: Sendable {
    let counter = Shared<UInt64>(0)
    var bytes: @Sendable (Int) -> [UInt8] {
        { [counter] count in
            let value = counter.update { $0 += 1; return $0 }
            return (0..<count).map { index in index < 8 ? UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) : 0 }.reversed()
        }
    }
}

/// Records every state change the token service reports, as the simulated device would.
final class RecordingObserver: TokenStateObserver {
    let changes = Shared<[String]>([])
    func tokenStateDidChange(tokenUniqueReference: String, to status: TokenStatus) async {
        changes.update { $0.append("\(tokenUniqueReference) \(status.rawValue)") }
    }
}

/// Captures log lines so tests can check that no PAN reaches them.
struct CapturedLogs: LogHandler {
    let lines: Shared<[String]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        lines.update { $0.append("\(event.level) \(event.message) \(all)") }
    }
}

/// TMP on a real loopback port, with the token service simulator as its connector and the
/// simulator talking back to it over HTTP: clock, randomness and PKI shared and injected.
struct LiveTMP {
    static let issuerKey = "issuer-live-key"
    static let tspKey = "tsp-live-key"
    static let start = Date(timeIntervalSince1970: 1_790_000_000)  // 2026-09-21

    let store: SQLiteStore
    let pki: SimulatedApplePKI
    let activationKey = SigningKey.generate()
    let cardholderKey = SigningKey.generate()
    let clock = Shared(LiveTMP.start)
    let logs = Shared<[String]>([])
    /// Every hang the simulator was asked to wait (it returns at once).
    let hangs = Shared<[Duration]>([])
    let simulator: TokenServiceSimulator
    let observer = RecordingObserver()
    let environment: PlatformEnvironment

    /// - Parameter connector: What TMP calls; the simulator itself unless a test wraps it.
    init(
        policy: ActivationPolicy = .inApp,
        delivery: TokenEventDeliveryMode = .background,
        connector: (TokenServiceSimulator) -> any TokenServiceConnector = { $0 }
    ) async throws {
        store = try SQLiteStore.inMemory()
        try await store.migrate()
        pki = try SimulatedApplePKI(now: Self.start)
        let clock = clock
        let random = CountingRandom()
        simulator = TokenServiceSimulator(
            configuration: .init(eventDelivery: delivery),
            now: { clock.value },
            randomBytes: random.bytes,
            sleep: { [hangs] duration in hangs.update { $0.append(duration) } },
            logger: Logger(label: "test.tsp") { [logs] _ in CapturedLogs(lines: logs) }
        )
        await simulator.addObserver(observer)
        let identifiers = Shared(0)
        environment = PlatformEnvironment(
            store: store,
            vault: PANVault(keys: .generate()),
            chainValidator: AppleChainValidator(configuration: .init(trustAnchors: TrustAnchors.apple.adding([pki.root]))),
            activationKeys: [activationKey],
            activationPolicy: policy,
            connector: connector(simulator),
            now: { clock.value },
            makeIdentifier: { identifiers.update { $0 += 1; return String(format: "%08d", $0) } },
            logger: Logger(label: "test.tmp") { [logs] _ in CapturedLogs(lines: logs) }
        )
    }

    func advance(_ seconds: TimeInterval) { clock.update { $0 += seconds } }

    /// TMP's application for `environment` (this fixture's unless a test changes it).
    func application(environment: PlatformEnvironment? = nil) -> some ApplicationProtocol {
        let authenticator = Authenticator(
            cardholderTokens: CardholderTokenVerifier(keys: [cardholderKey.id: cardholderKey.privateKey.publicKey]),
            issuerKey: APIKey(Self.issuerKey),
            tspKey: APIKey(Self.tspKey),
            now: { [clock] in clock.value }
        )
        let router = TokenPlatformRouter(environment: environment ?? self.environment, authenticator: authenticator).build()
        return Application(router: router, logger: Logger(label: "test.http") { [logs] _ in CapturedLogs(lines: logs) })
    }

    /// The TSP endpoint of a server listening on `port`.
    static func endpoint(port: Int, apiKey: String = tspKey) -> TSPAPIEndpoint {
        TSPAPIEndpoint(baseURL: URL(string: "http://localhost:\(port)")!, apiKey: apiKey, requestTimeout: .seconds(30))
    }

    /// Starts TMP on a free loopback port, connects the simulator to it, and runs `body`.
    func run(_ body: @escaping @Sendable (LiveSession) async throws -> Void) async throws {
        try await application().test(.live) { client in
            let port = try #require(client.port)
            await simulator.connect(to: Self.endpoint(port: port))
            try await body(LiveSession(client: client, tmp: self))
        }
    }
}
