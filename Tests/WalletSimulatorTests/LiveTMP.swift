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
import TokenPlatform
import WalletSimulator

/// Randomness that never repeats and is the same in every run: a counter's bytes.
struct CountingRandom: Sendable {
    let counter = Locked<UInt64>(0)
    var bytes: @Sendable (Int) -> [UInt8] {
        { [counter] count in
            let value = counter.withValue { $0 += 1; return $0 }
            return (0..<count).map { index in index < 8 ? UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) : 0 }.reversed()
        }
    }
}

/// Records every state change the token service reports, as the simulated device would.
final class RecordingObserver: TokenStateObserver {
    let changes = Locked<[String]>([])
    func tokenStateDidChange(tokenUniqueReference: String, to status: TokenStatus) {
        changes.withValue { $0.append("\(tokenUniqueReference) \(status.rawValue)") }
    }
}

/// TMP on a real loopback port, with the token service simulator as its connector and the
/// simulator talking back to it over HTTP: clock, randomness and PKI shared and injected.
struct LiveTMP {
    static let issuerKey = TestTMP.issuerKey
    static let tspKey = TestTMP.tspKey
    static let start = TestTMP.start  // 2026-09-21

    let store: SQLiteStore
    let secrets: TestTMP.Secrets
    var pki: SimulatedApplePKI { secrets.pki }
    var activationKey: SigningKey { secrets.activationKey }
    var cardholderKey: SigningKey { secrets.cardholderKey }
    let clock = Locked(LiveTMP.start)
    let logs = Locked<[String]>([])
    /// Every hang the simulator was asked to wait (it returns at once).
    let hangs = Locked<[Duration]>([])
    let simulator: TokenServiceSimulator
    let observer = RecordingObserver()
    let environment: PlatformEnvironment

    /// - Parameter connector: What TMP calls; the simulator itself unless a test wraps it.
    init(
        policy: ActivationPolicy = .inApp,
        delivery: TokenEventDeliveryMode = .background,
        connector: (TokenServiceSimulator) -> any TokenServiceConnector = { $0 }
    ) async throws {
        store = try await TestTMP.memoryStore()
        secrets = try TestTMP.Secrets(now: Self.start)
        let clock = clock
        let random = CountingRandom()
        simulator = TokenServiceSimulator(
            configuration: .init(eventDelivery: delivery),
            now: { clock.current },
            randomBytes: random.bytes,
            sleep: { [hangs] duration in hangs.withValue { $0.append(duration) } },
            logger: TestTMP.logger("test.tsp", into: logs)
        )
        await simulator.addObserver(observer)
        let identifiers = Locked(0)
        environment = secrets.environment(
            store: store,
            policy: policy,
            connector: connector(simulator),
            now: { clock.current },
            makeIdentifier: { identifiers.withValue { $0 += 1; return String(format: "%08d", $0) } },
            logger: TestTMP.logger("test.tmp", into: logs)
        )
    }

    func advance(_ seconds: TimeInterval) { clock.withValue { $0 += seconds } }

    /// TMP's router for `environment` (this fixture's unless a test changes it).
    func router(environment: PlatformEnvironment? = nil) -> Router<BasicRequestContext> {
        secrets.router(environment: environment ?? self.environment, now: { [clock] in clock.current })
    }

    /// The HTTP front's logger: its lines join the fixture's captured logs.
    var httpLogger: Logger { TestTMP.logger("test.http", into: logs) }

    /// The TSP endpoint of a server listening on `port`.
    static func endpoint(port: Int, apiKey: String = tspKey) -> TSPAPIEndpoint {
        TSPAPIEndpoint(baseURL: URL(string: "http://localhost:\(port)")!, apiKey: apiKey, requestTimeout: .seconds(30))
    }

    /// Starts TMP on a free loopback port, connects the simulator to it, and runs `body`.
    func run(_ body: @escaping @Sendable (LiveSession) async throws -> Void) async throws {
        try await TestTMP.runLive(router: router(), logger: httpLogger) { client, port in
            await simulator.connect(to: Self.endpoint(port: port))
            try await body(LiveSession(client: client, tmp: self))
        }
    }
}
