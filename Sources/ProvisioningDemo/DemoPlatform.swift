import Foundation
import Hummingbird
import Logging
import ProvisioningCrypto
import ProvisioningModels
import ServiceLifecycle
import TokenPlatform
import WalletSimulator
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The parties of the demo that are not the iPhone: the TMP server (real, on a loopback port,
/// with its real storage), the token service simulator as its connector, Apple's simulated
/// PKI trusted by TMP, and the issuer's back office speaking the Lifecycle API.
public final class DemoPlatform: Sendable {
    /// Where TMP listens, e.g. `http://127.0.0.1:49152/`.
    public let baseURL: URL
    /// TMP's resolved configuration (keys, policy, database).
    public let configuration: ServerConfiguration
    /// Apple's simulated certificates; TMP trusts their root.
    public let pki: SimulatedApplePKI
    /// The network's token service, TMP's connector.
    public let tokenService: TokenServiceSimulator
    /// TMP's storage, for checking what the server stored.
    public let store: any TMPStore
    /// The activation-link format the network sends and the issuer app accepts.
    public static let activationLink = ActivationLinkFormat(scheme: "pushprov-issuer", host: "wallet", path: "/activate")

    private let group: ServiceGroup
    private let running: Task<Void, any Error>
    private let dataDirectory: URL

    /// Starts TMP on a free loopback port with the token service simulator as its connector.
    ///
    /// Its keys, secrets and (without `database`) SQLite file live in a temporary directory,
    /// removed at ``stop()``, or before this throws when the start fails.
    ///
    /// - Parameters:
    ///   - database: a database setting as `pushprov serve --database` takes it; nil for a
    ///     temporary SQLite file.
    ///   - tokenServiceNow: the token service's clock (tests move it to expire activation data).
    ///   - tokenEvents: when the token service sends its events to TMP; with
    ///     ``TokenEventDeliveryMode/manual`` a test decides when TMP hears of a new token
    ///     (``TokenServiceSimulator/drainEvents()``).
    public static func start(
        database: String? = nil,
        tokenServiceNow: @escaping @Sendable () -> Date = { Date() },
        tokenEvents: TokenEventDeliveryMode = .background,
        logger: Logger = Logger(label: "pushprov.demo") { _ in SwiftLogNoOpLogHandler() }
    ) async throws -> DemoPlatform {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-\(UUID().uuidString)")
        // Owner-only whatever the umask: the server refuses a data directory others can write.
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        do {
            return try await start(in: directory, database: database, tokenServiceNow: tokenServiceNow, tokenEvents: tokenEvents, logger: logger)
        } catch {
            // It holds the run's keys (keys.json, secrets.json): nothing of a failed start stays.
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    private static func start(
        in directory: URL,
        database: String?,
        tokenServiceNow: @escaping @Sendable () -> Date,
        tokenEvents: TokenEventDeliveryMode,
        logger: Logger
    ) async throws -> DemoPlatform {
        let pki = try SimulatedApplePKI()
        let anchor = directory.appendingPathComponent("simulated-apple-root.pem")
        try Data(try pki.rootPEM().utf8).write(to: anchor)

        var settings = ServerSettings()
        settings.host = "127.0.0.1"
        settings.port = 0
        settings.dataDirectory = directory.path
        settings.database = database
        settings.trustAnchorFiles = [anchor.path]
        settings.activationPolicy = ActivationPolicy.inApp.rawValue
        // The demo's own settings only: nothing from the caller's PUSHPROV_* environment.
        let configuration = try settings.resolve(environment: [:])

        let tokenService = TokenServiceSimulator(configuration: .init(activationLink: activationLink, eventDelivery: tokenEvents), now: tokenServiceNow, logger: logger)
        // The demo brings new keys each run; on a database it shares (`--database`), cards of
        // earlier runs stay there, encrypted with keys it does not have, and it never reads them.
        let environment = try await TMPServer.makeEnvironment(configuration: configuration, connector: tokenService, checkingStoredCards: database == nil, logger: logger)
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let app = TMPServer.makeServer(configuration: configuration, environment: environment, logger: logger) { port in
            portContinuation.yield(port)
            portContinuation.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        let running = Task {
            // The stream ends if the server stops without having bound a port.
            defer { portContinuation.finish() }
            try await group.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            running.cancel()
            _ = try? await running.value
            await environment.store.close()
            throw DemoExpectation("the TMP server did not start")
        }
        let baseURL = URL(string: "http://127.0.0.1:\(port)/")!
        await tokenService.connect(to: TSPAPIEndpoint(baseURL: baseURL, apiKey: configuration.tspAPIKey))
        return DemoPlatform(
            baseURL: baseURL, configuration: configuration, pki: pki, tokenService: tokenService, store: environment.store,
            group: group, running: running, dataDirectory: directory
        )
    }

    private init(baseURL: URL, configuration: ServerConfiguration, pki: SimulatedApplePKI, tokenService: TokenServiceSimulator, store: any TMPStore, group: ServiceGroup, running: Task<Void, any Error>, dataDirectory: URL) {
        self.baseURL = baseURL
        self.configuration = configuration
        self.pki = pki
        self.tokenService = tokenService
        self.store = store
        self.group = group
        self.running = running
        self.dataDirectory = dataDirectory
    }

    /// Stops the server, closes its store and removes the temporary data directory (with the
    /// run's keys, whatever the database).
    public func stop() async {
        await tokenService.drainEvents()
        // No retry outlives this server (one could reach another on the same port).
        await tokenService.shutDown()
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        await store.close()
        try? FileManager.default.removeItem(at: dataDirectory)
    }

    /// A cardholder JWT for `userId`, signed with the embedded run's development key.
    public func cardholderToken(userId: String) throws -> String {
        guard let key = configuration.developmentTokenKey else { throw DemoExpectation("the server has no development token key") }
        return try DevelopmentTokenIssuer(key: key).token(userId: userId, lifetime: 3600, now: Date())
    }

    // MARK: The issuer's back office (Lifecycle API, issuer API key)

    /// `PUT /lifecycle/cards/{id}`.
    @discardableResult
    public func putCard(_ id: String, _ card: CardUpsertRequest) async throws -> CardResource {
        try await backOffice("PUT", "lifecycle/cards/\(id)", json: card)
    }

    /// `PATCH /lifecycle/cards/{id}`.
    public func setCardStatus(_ id: String, _ status: CardStatus) async throws {
        let _: AnyReply = try await backOffice("PATCH", "lifecycle/cards/\(id)", json: CardStatusChangeRequest(status: status))
        await tokenService.drainEvents()
    }

    /// `PUT /lifecycle/card-art/{artId}`.
    public func putCardArt(_ artId: String, png: Data) async throws {
        let _: AnyReply = try await backOffice("PUT", "lifecycle/card-art/\(artId)", body: png, contentType: "image/png")
    }

    /// Any JSON object; the demo checks the effects, not the echo.
    private struct AnyReply: Decodable {}

    private func backOffice<T: Decodable>(_ method: String, _ path: String, json: some Encodable) async throws -> T {
        try await backOffice(method, path, body: try JSONEncoder().encode(json), contentType: "application/json")
    }

    private func backOffice<T: Decodable>(_ method: String, _ path: String, body: Data, contentType: String) async throws -> T {
        var request = URLRequest(url: baseURL.appendingPathComponent(path))
        request.httpMethod = method
        request.httpBody = body
        request.timeoutInterval = 10
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(configuration.issuerAPIKey)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            let envelope = try? JSONDecoder().decode(ErrorEnvelope.self, from: data)
            throw DemoExpectation("\(method) /\(path) answered \(status) \(envelope.map { "\($0.error.code): \($0.error.message)" } ?? "")")
        }
        return try JSONDecoder().decode(T.self, from: data)
    }
}
