import Foundation
import Hummingbird
import Logging
import ProvisioningCrypto
import ProvisioningModels

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
    ///
    /// It refuses (``ConfigurationError``) a database holding cards whose card numbers the
    /// configured PAN vault keys cannot read (see `checkVaultKeys`), unless
    /// `checkingStoredCards` is off: only for a demonstration that brings keys of its own to a
    /// database it shares and reads only the cards it stores itself.
    public static func makeEnvironment(
        configuration: ServerConfiguration,
        connector: any TokenServiceConnector = UnconfiguredTokenServiceConnector(),
        checkingStoredCards: Bool = true,
        logger: Logger
    ) async throws -> PlatformEnvironment {
        let (store, applied) = try await configuration.database.openMigratedStore(migrate: configuration.migrateOnStart, logger: logger)
        if !applied.isEmpty {
            logger.notice("applied database migrations", metadata: ["database": "\(configuration.database)", "migrations": "\(applied.joined(separator: ", "))"])
        }
        let vault = PANVault(keys: configuration.keys.panVault)
        do {
            if checkingStoredCards { try await checkVaultKeys(vault, against: store, keyFile: configuration.keyFilePath) }
        } catch {
            await store.close()
            throw error
        }
        return PlatformEnvironment(
            store: store,
            vault: vault,
            chainValidator: AppleChainValidator(configuration: .init(trustAnchors: configuration.trustAnchors)),
            activationKeys: configuration.keys.activationSigningKeys,
            activationPolicy: configuration.activationPolicy,
            connector: connector,
            connectorTimeout: configuration.connectorTimeout,
            logger: logger
        )
    }

    /// Refuses to serve a database whose card numbers `vault` cannot read: a key file lost and
    /// generated again (a data directory not kept, a mistyped `PUSHPROV_KEY_FILE`) would
    /// otherwise start normally and fail every `signed-cards` and tokenization decision of the
    /// cards already stored. One stored card is decrypted and its lookup hash recomputed.
    static func checkVaultKeys(_ vault: PANVault, against store: any TMPStore, keyFile: String) async throws {
        guard let card = try await store.anyCard() else { return }
        let advice = "restore the key file that goes with this database (\(keyFile)); the server does not start with keys that cannot read the cards it holds"
        guard let encrypted = EncryptedPAN(serialized: card.encryptedPAN) else {
            throw ConfigurationError("card \(Redaction.identifier(card.externalCardId))'s stored card number is unreadable; the database may be damaged")
        }
        let pan: PrimaryAccountNumber
        do {
            pan = try vault.decrypt(encrypted, cardID: card.externalCardId)
        } catch {
            throw ConfigurationError("the PAN vault keys cannot decrypt the stored card numbers (card \(Redaction.identifier(card.externalCardId)) is encrypted with key \(encrypted.keyID), which is not among them or does not open it): \(advice)")
        }
        guard constantTimeEquals(vault.lookupHash(pan), card.panLookupHash) else {
            throw ConfigurationError("the PAN vault's lookup key is not the one the stored cards were indexed with (card \(Redaction.identifier(card.externalCardId))): \(advice)")
        }
    }

    /// The authenticator for `configuration`.
    public static func makeAuthenticator(configuration: ServerConfiguration) -> Authenticator {
        Authenticator(
            cardholderTokens: CardholderTokenVerifier(
                keys: configuration.cardholderKeys.p256KeysByID,
                issuer: configuration.cardholderIssuer,
                audience: configuration.cardholderAudience,
                type: configuration.cardholderType
            ),
            issuerKey: APIKey(configuration.issuerAPIKey),
            tspKey: APIKey(configuration.tspAPIKey)
        )
    }

    /// The HTTP server: bind address from `configuration`, graceful shutdown on SIGINT/SIGTERM
    /// when run with `runService()` (see ``TMPHTTPServer``). It authenticates with
    /// `authenticator` (by default ``makeAuthenticator(configuration:)``), both in its routes
    /// and when it decides from a request's head how much of its body to hold
    /// (``bodyLimit(authenticator:)``); pass the one a ``CardholderKeyReloader`` updates.
    public static func makeServer(
        configuration: ServerConfiguration,
        environment: PlatformEnvironment,
        metrics: PlatformMetrics = PlatformMetrics(),
        authenticator: Authenticator? = nil,
        logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> TMPHTTPServer {
        let authenticator = authenticator ?? makeAuthenticator(configuration: configuration)
        return TMPHTTPServer(
            router: TokenPlatformRouter(environment: environment, authenticator: authenticator, metrics: metrics).build(),
            host: configuration.host,
            port: configuration.port,
            serverName: "pushprov",
            logger: logger,
            bodyLimit: bodyLimit(authenticator: authenticator),
            maximumConnections: configuration.maximumConnections,
            metrics: metrics,
            onServerRunning: onServerRunning
        )
    }

    /// How much of a request's body the HTTP front holds, decided from its head with the
    /// credentials `authenticator` accepts:
    /// - nothing for a request that can only be refused (401): one with no bearer credential
    ///   (every route that takes a body needs one; the routes open to all are `GET`s), one to
    ///   the Lifecycle or TSP API without that API's key, and any other whose bearer token is
    ///   no cardholder JWT that may be valid now (``Authenticator``'s verdicts remembered, or its
    ///   form, key id and unproven times: no signature is verified on the event loop, so a
    ///   forged signature is found by the route, and from then on by the head too);
    /// - up to the art limit (4,000,001 bytes) for a card-art upload
    ///   (`PUT /lifecycle/card-art/{artId}`) with the issuer key;
    /// - up to the JSON limit (64 KiB) for every other request.
    ///
    /// So no caller without the issuer key makes the server hold more than 64 KiB for a
    /// request, and none without a credential of the right kind holds any body at all. The API
    /// is told by the path's first two segments as the router reads them (empty segments
    /// skipped, the query ignored: `//lifecycle//card-art/a` is the card-art route). A
    /// cardholder JWT that expires between the head and the route is refused by the route
    /// (401); one that becomes acceptable in that instant (a key added by a reload, `nbf` just
    /// reached) reaches its route with its body cut to one byte and is refused as malformed
    /// JSON (400): sent again, it is read whole.
    public static func bodyLimit(authenticator: Authenticator) -> TMPHTTPServer.BodyLimit {
        { head in
            guard let header = head.headerFields[.authorization], header.utf8.count <= Authenticator.maximumHeaderLength, Authenticator.hasBearerScheme(header) else { return 0 }
            let (api, resource) = leadingSegments(head.path ?? "")
            if api == "lifecycle" {
                guard authenticator.issuerKey.matches(Authenticator.credential(afterScheme: header.utf8.dropFirst("Bearer ".utf8.count))) else { return 0 }
                return head.method == .put && resource == "card-art" ? TMPHTTPServer.maximumBodySize : JSONCoding.maximumBodySize
            }
            if api == "tsp" {
                return authenticator.tspKey.matches(Authenticator.credential(afterScheme: header.utf8.dropFirst("Bearer ".utf8.count))) ? JSONCoding.maximumBodySize : 0
            }
            return authenticator.admitsCardholder(authorization: header) ? JSONCoding.maximumBodySize : 0
        }
    }

    /// The first two non-empty segments of a request target's path (before any `?`), as
    /// Hummingbird's router reads them.
    static func leadingSegments(_ target: String) -> (Substring, Substring) {
        let path = target.prefix { $0 != "?" }
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        return (segments.first ?? "", segments.dropFirst().first ?? "")
    }

    /// The watcher of the identity provider's JWKS file for `configuration`, updating
    /// `authenticator` (nil when no file is configured or
    /// ``ServerConfiguration/cardholderKeysReloadInterval`` is off): run it beside the server.
    public static func makeCardholderKeyReloader(configuration: ServerConfiguration, authenticator: Authenticator, logger: Logger) -> CardholderKeyReloader? {
        guard let path = configuration.cardholderKeysFile, let interval = configuration.cardholderKeysReloadInterval else { return nil }
        return CardholderKeyReloader(path: path, interval: interval, developmentKey: configuration.developmentTokenKey?.publicJWK, authenticator: authenticator, logger: logger)
    }

    /// The token realignment for `configuration` (nil when ``ServerConfiguration/realignInterval``
    /// is off), counting into `metrics`: run it beside the server
    /// (``TMPHTTPServer/runService(alongside:gracefulShutdownSignals:)``).
    public static func makeRealigner(configuration: ServerConfiguration, environment: PlatformEnvironment, metrics: PlatformMetrics) -> TokenRealigner? {
        configuration.realignInterval.map { TokenRealigner(environment: environment, interval: $0, metrics: metrics) }
    }
}
