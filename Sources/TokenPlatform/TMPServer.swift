import Foundation
import Hummingbird
import Logging
import ProvisioningCrypto

/// Assembles the TMP server from a resolved configuration.
public enum TMPServer {
    /// The environment (storage, keys, policies) for `configuration`.
    ///
    /// Every command to `connector` gets the configured time limit
    /// (``ServerConfiguration/connectorTimeout``).
    ///
    /// Opens the configured database and applies pending migrations, or with
    /// ``ServerConfiguration/migrateOnStart`` off refuses a schema that lacks any. Close the
    /// store (`environment.store.close()`) once the server has stopped.
    public static func makeEnvironment(
        configuration: ServerConfiguration,
        connector: any TokenServiceConnector = UnconfiguredTokenServiceConnector(),
        logger: Logger
    ) async throws -> PlatformEnvironment {
        let (store, applied) = try await configuration.database.openMigratedStore(migrate: configuration.migrateOnStart, logger: logger)
        if !applied.isEmpty {
            logger.notice("applied database migrations", metadata: ["database": "\(configuration.database)", "migrations": "\(applied.joined(separator: ", "))"])
        }
        return PlatformEnvironment(
            store: store,
            vault: PANVault(keys: configuration.keys.panVault),
            chainValidator: AppleChainValidator(configuration: .init(trustAnchors: configuration.trustAnchors)),
            activationKeys: configuration.keys.activationSigningKeys,
            activationPolicy: configuration.activationPolicy,
            connector: connector,
            connectorTimeout: configuration.connectorTimeout,
            logger: logger
        )
    }

    /// The authenticator for `configuration`.
    public static func makeAuthenticator(configuration: ServerConfiguration) -> Authenticator {
        Authenticator(
            cardholderTokens: CardholderTokenVerifier(
                keys: configuration.cardholderKeys.p256KeysByID,
                issuer: configuration.cardholderIssuer,
                audience: configuration.cardholderAudience
            ),
            issuerKey: APIKey(configuration.issuerAPIKey),
            tspKey: APIKey(configuration.tspAPIKey)
        )
    }

    /// The HTTP server: bind address from `configuration`, graceful shutdown on SIGINT/SIGTERM
    /// when run with `runService()` (see ``TMPHTTPServer``).
    public static func makeServer(
        configuration: ServerConfiguration,
        environment: PlatformEnvironment,
        metrics: PlatformMetrics = PlatformMetrics(),
        logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> TMPHTTPServer {
        TMPHTTPServer(
            router: TokenPlatformRouter(environment: environment, authenticator: makeAuthenticator(configuration: configuration), metrics: metrics).build(),
            host: configuration.host,
            port: configuration.port,
            serverName: "pushprov",
            logger: logger,
            bodyLimit: bodyLimit(issuerKey: APIKey(configuration.issuerAPIKey)),
            maximumConnections: configuration.maximumConnections,
            metrics: metrics,
            onServerRunning: onServerRunning
        )
    }

    /// How much of a request's body the HTTP front holds, decided from its head: a card-art
    /// upload (`PUT /lifecycle/card-art/{artId}`) that carries the issuer key up to the art
    /// limit (4 MiB), every other request up to the JSON limit (64 KiB). So no caller without
    /// the issuer key makes the server hold more than 64 KiB for a request.
    public static func bodyLimit(issuerKey: APIKey) -> TMPHTTPServer.BodyLimit {
        { head in
            guard head.method == .put, head.path?.hasPrefix("/lifecycle/card-art/") == true,
                let header = head.headerFields[.authorization], header.utf8.count <= 8192, Authenticator.hasBearerScheme(header),
                issuerKey.matches(Authenticator.credential(afterScheme: header.utf8.dropFirst("Bearer ".utf8.count)))
            else { return JSONCoding.maximumBodySize }
            return TMPHTTPServer.maximumBodySize
        }
    }

    /// The token realignment for `configuration` (nil when ``ServerConfiguration/realignInterval``
    /// is off), counting into `metrics`: run it beside the server
    /// (``TMPHTTPServer/runService(alongside:gracefulShutdownSignals:)``).
    public static func makeRealigner(configuration: ServerConfiguration, environment: PlatformEnvironment, metrics: PlatformMetrics) -> TokenRealigner? {
        configuration.realignInterval.map { TokenRealigner(environment: environment, interval: $0, metrics: metrics) }
    }
}
