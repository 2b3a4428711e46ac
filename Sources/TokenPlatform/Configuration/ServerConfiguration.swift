import Foundation
import Logging
import ProvisioningCrypto
import X509

/// Everything `pushprov serve` needs, resolved from flags, environment and the data directory.
public struct ServerConfiguration: Sendable {
    /// Address to bind (default 127.0.0.1).
    public var host: String
    /// Port to bind (default 8080; 0 picks a free one).
    public var port: Int
    /// Where the embedded run keeps its database and keys.
    public var dataDirectory: String
    /// The database (SQLite file or PostgreSQL URL) and its pool size.
    public var database: DatabaseConfiguration
    /// Whether start-up applies pending migrations (otherwise it refuses to start with any).
    public var migrateOnStart: Bool
    /// Production mode: explicit secrets only, Apple's root only.
    public var production: Bool
    /// Apple's certificate-chain anchors (Apple Root CA - G3 plus configured extras).
    public var trustAnchors: TrustAnchors
    /// PAN vault and activation-data keys.
    public var keys: LocalKeys
    /// Where those keys live.
    public var keyFilePath: String
    /// Whether this start generated the key file, none being there (an embedded run's first).
    public var keyFileGenerated = false
    /// The issuer back office's API key.
    public var issuerAPIKey: String
    /// The token service provider's API key.
    public var tspAPIKey: String
    /// The key `GET /metrics` requires (`PUSHPROV_METRICS_API_KEY`); nil: it answers anyone.
    public var metricsAPIKey: String? = nil
    /// Cardholder JWT verification keys.
    public var cardholderKeys: JSONWebKeySet
    /// The embedded run's cardholder signing key (nil in production).
    public var developmentTokenKey: SigningKey?
    /// The identity provider's JWKS file (`PUSHPROV_JWKS`), if one is configured.
    public var cardholderKeysFile: String? = nil
    /// How often ``cardholderKeysFile`` is looked at for new keys (``CardholderKeyReloader``;
    /// default 10 s); nil: read once at start.
    public var cardholderKeysReloadInterval: Duration? = CardholderKeyReloader.defaultInterval
    /// The `iss` every cardholder JWT must carry (always set in production; nil: not checked).
    public var cardholderIssuer: String? = nil
    /// The `aud` every cardholder JWT must name (always set in production; nil: not checked).
    public var cardholderAudience: String? = nil
    /// The `typ` every cardholder JWT's header must carry (nil: not checked), for an identity
    /// provider that types its access tokens (`at+jwt`, RFC 9068) apart from its other JWTs.
    public var cardholderType: String? = nil
    /// Green or yellow for valid activation data.
    public var activationPolicy: ActivationPolicy
    /// The most one token service command may take (default 10 s).
    public var connectorTimeout: Duration
    /// Where Swift concurrency runs the server's request handling (default: the event loops).
    public var executor: ServerExecutor = .eventLoops
    /// Time between two rounds of ``TokenRealigner`` (default 30 s); nil when it is off.
    public var realignInterval: Duration? = TokenRealigner.defaultInterval
    /// The most client connections held open at once (``ConnectionLimit``).
    public var maximumConnections: Int = ConnectionLimit.defaultCeiling
    /// The longest a graceful shutdown (SIGINT, SIGTERM) waits for requests and connections
    /// to finish before it cancels what is left (default 25 s); nil: as long as they take.
    public var shutdownGrace: Duration? = ServerSettings.defaultShutdownGrace
    /// Lines to print once at start-up (generated secrets and where they live).
    public var notices: [String]

    /// The line start-up prints.
    public var startupLine: String {
        // An IPv6 address is written in brackets in a URL (RFC 3986, 3.2.2).
        let authority = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return "pushprov serve: listening on http://\(authority) · database \(database) · mode \(production ? "production" : "embedded") · activation \(activationPolicy.rawValue) · connections ≤ \(maximumConnections) · executor \(executor.rawValue)"
    }
}

/// Where `pushprov serve` runs Swift concurrency's work.
///
/// With ``eventLoops`` the process's SwiftNIO event-loop threads become Swift concurrency's
/// global executor, so request handlers run on the event-loop threads instead of hopping
/// between an event loop and Swift's own thread pool at every `await`. Handlers must then
/// never block for long; the server's only blocking calls are short SQLite reads.
/// ``swift`` keeps Swift's default pool (the choice when embedding code that blocks).
public enum ServerExecutor: String, Sendable, CaseIterable {
    /// SwiftNIO's event loops run all Swift concurrency work (default).
    case eventLoops = "event-loops"
    /// Swift's default global executor; event loops only do I/O.
    case swift
}

/// Raw settings before resolution: flags win over environment variables.
public struct ServerSettings: Sendable {
    /// `--host` / `PUSHPROV_HOST`.
    public var host: String?
    /// `--port` / `PUSHPROV_PORT`.
    public var port: Int?
    /// `--data-dir` / `PUSHPROV_DATA_DIR`.
    public var dataDirectory: String?
    /// `--database` / `PUSHPROV_DATABASE`: a SQLite file path or a `postgres://` URL.
    public var database: String?
    /// `--database-pool-size` / `PUSHPROV_DATABASE_POOL_SIZE`.
    public var databasePoolSize: Int?
    /// `--database-wait` / `PUSHPROV_DATABASE_WAIT`: seconds a request waits for the database.
    public var databaseWait: String?
    /// `--database-statement-timeout` / `PUSHPROV_DATABASE_STATEMENT_TIMEOUT`: seconds one
    /// PostgreSQL database call may run.
    public var databaseStatementTimeout: String?
    /// False for `--no-migrate`: start only on an up-to-date schema.
    public var migrate = true
    /// `--trust-anchor` (repeatable) / `PUSHPROV_TRUST_ANCHORS` (colon-separated).
    public var trustAnchorFiles: [String] = []
    /// `--production`.
    public var production = false
    /// `--activation-policy` / `PUSHPROV_ACTIVATION_POLICY`.
    public var activationPolicy: String?
    /// `--connector-timeout` / `PUSHPROV_CONNECTOR_TIMEOUT`: seconds, as text (checked when resolving).
    public var connectorTimeout: String?
    /// `--executor` / `PUSHPROV_EXECUTOR`: `event-loops` (default) or `swift`.
    public var executor: String?
    /// `--realign-interval` / `PUSHPROV_REALIGN_INTERVAL`: seconds between two rounds of
    /// token realignment, as text; `0` turns it off.
    public var realignInterval: String?
    /// `--jwks-reload-interval` / `PUSHPROV_JWKS_RELOAD_INTERVAL`: seconds between two looks at
    /// the JWKS file for new keys, as text; `0` reads it only at start.
    public var cardholderKeysReloadInterval: String?
    /// `--max-connections` / `PUSHPROV_MAX_CONNECTIONS`: the most client connections held open
    /// at once, as text (checked when resolving).
    public var maximumConnections: String?
    /// `--shutdown-grace` / `PUSHPROV_SHUTDOWN_GRACE`: seconds a graceful shutdown may take
    /// before what is left is cancelled, as text; `0` waits as long as it takes.
    public var shutdownGrace: String?
    /// The most files this process may open (`ulimit -n`), which bounds the connection limit;
    /// nil: read from the process (`pushprov serve` raises it to the hard limit first).
    public var openFileLimit: Int?
    /// `--jwt-issuer` / `PUSHPROV_JWT_ISSUER`: the identity provider's `iss` in cardholder JWTs.
    public var cardholderIssuer: String?
    /// `--jwt-audience` / `PUSHPROV_JWT_AUDIENCE`: the `aud` cardholder JWTs must name for this server.
    public var cardholderAudience: String?
    /// `--jwt-type` / `PUSHPROV_JWT_TYPE`: the `typ` cardholder JWTs' headers must carry.
    public var cardholderType: String?

    /// Empty settings (all defaults).
    public init() {}

    /// Resolves the settings against `environment` (normally the process environment).
    ///
    /// Embedded runs create the data directory, key file and secrets on first use. A
    /// production run creates nothing: every secret must be configured explicitly, or this
    /// throws a ``ConfigurationError`` naming what is missing.
    /// Refuses a JWT `typ` the server would not take: 1 to 128 printable ASCII characters
    /// without spaces (a media type such as `at+jwt`). `dev-token --jwt-type` checks the same.
    public static func checkJWTType(_ type: String) throws(ConfigurationError) {
        guard !type.isEmpty, type.utf8.count <= 128, type.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }) else {
            throw ConfigurationError("JWT type must be a media type of 1 to 128 printable ASCII characters without spaces, such as at+jwt (got \(type.debugDescription))")
        }
    }

    public func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServerConfiguration {
        let env = { (name: String) -> String? in environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let host = self.host ?? env("PUSHPROV_HOST") ?? "127.0.0.1"
        // A space or control character is never part of an address (and `--host ""`, or a
        // value with a stray space, failed only when binding, with the resolver's message).
        guard !host.isEmpty, !host.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) else {
            throw ConfigurationError("host must be an IP address or a host name without spaces (got \(host.debugDescription))")
        }
        let portText = self.port.map(String.init) ?? env("PUSHPROV_PORT") ?? "8080"
        guard let port = Int(portText), (0...65_535).contains(port) else {
            throw ConfigurationError("port must be a number from 0 to 65535 (got \(portText))")
        }
        let dataDirectory = self.dataDirectory ?? env("PUSHPROV_DATA_DIR") ?? "./.pushprov"
        // An empty flag would be the current directory (the variable set empty counts as unset).
        guard !dataDirectory.isEmpty else { throw ConfigurationError("--data-dir must not be empty (it would be the current directory); name the directory, e.g. --data-dir .") }
        let database = try resolveDatabase(environment: environment)
        let policyText = activationPolicy ?? env("PUSHPROV_ACTIVATION_POLICY") ?? ActivationPolicy.inApp.rawValue
        guard let policy = ActivationPolicy(rawValue: policyText) else {
            throw ConfigurationError("activation policy must be in-app or immediate (got \(policyText))")
        }
        let connectorTimeout = try resolveConnectorTimeout(environment: environment)
        let realignInterval = try resolveRealignInterval(environment: environment)
        let keysReloadInterval = try resolveCardholderKeysReloadInterval(environment: environment)
        let maximumConnections = try resolveMaximumConnections(environment: environment)
        let shutdownGrace = try resolveShutdownGrace(environment: environment)
        let executorText = executor ?? env("PUSHPROV_EXECUTOR") ?? ServerExecutor.eventLoops.rawValue
        guard let executor = ServerExecutor(rawValue: executorText) else {
            throw ConfigurationError("executor must be event-loops or swift (got \(executorText))")
        }
        // The flags, when given, replace the environment's list (as every other flag does).
        let anchorFiles = trustAnchorFiles.isEmpty ? (env("PUSHPROV_TRUST_ANCHORS")?.split(separator: ":").map(String.init) ?? []) : trustAnchorFiles
        if production, !anchorFiles.isEmpty {
            throw ConfigurationError("--production trusts only Apple Root CA - G3; remove --trust-anchor / PUSHPROV_TRUST_ANCHORS")
        }
        var anchors = TrustAnchors.apple
        for file in anchorFiles {
            do {
                anchors = anchors.adding(try TrustAnchors.certificates(fromFile: file))
            } catch let error as CertificateFileError {
                throw ConfigurationError("trust anchor \(error.description)")
            }
        }

        let cardholderIssuer = self.cardholderIssuer.flatMap { $0.isEmpty ? nil : $0 } ?? env("PUSHPROV_JWT_ISSUER")
        let cardholderAudience = self.cardholderAudience.flatMap { $0.isEmpty ? nil : $0 } ?? env("PUSHPROV_JWT_AUDIENCE")
        let cardholderType = self.cardholderType.flatMap { $0.isEmpty ? nil : $0 } ?? env("PUSHPROV_JWT_TYPE")
        if let cardholderType { try Self.checkJWTType(cardholderType) }

        var notices: [String] = []
        if production {
            let missing = ["PUSHPROV_ISSUER_API_KEY", "PUSHPROV_TSP_API_KEY", "PUSHPROV_JWKS", "PUSHPROV_KEY_FILE"].filter { env($0) == nil }
            guard missing.isEmpty else {
                throw ConfigurationError("--production needs explicitly configured secrets; missing: \(missing.joined(separator: ", "))")
            }
            // One identity provider signs tokens for many apps with the same keys: only a token
            // issued by it for this server may act for a cardholder here (RFC 8725, 3.9).
            let unnamed = [("--jwt-issuer / PUSHPROV_JWT_ISSUER", cardholderIssuer), ("--jwt-audience / PUSHPROV_JWT_AUDIENCE", cardholderAudience)].filter { $0.1 == nil }.map(\.0)
            guard unnamed.isEmpty else {
                throw ConfigurationError("--production needs the cardholder JWTs' issuer and audience; missing: \(unnamed.joined(separator: ", "))")
            }
            // Several instances behind a load balancer must share one database; one that
            // quietly made its own would answer 404 for the others' cards and take activation
            // data the others had already used.
            guard self.database != nil || env("PUSHPROV_DATABASE") != nil else {
                throw ConfigurationError("--production needs --database / PUSHPROV_DATABASE (a postgres:// URL, or the SQLite file this one instance owns); it creates no database of its own")
            }
            // `prefer` falls back to plain text when anyone on the path refuses TLS, and checks
            // no certificate; only a server on this machine may be reached without a verified one.
            if case .postgres(let url) = database.location, !url.tls.verifiesServer, !Self.isLoopback(url.host) {
                throw ConfigurationError("--production needs sslmode=require (or verify-full, verify-ca) to reach PostgreSQL on \(url.host): with sslmode=\(url.tls.rawValue) \(url.tls == .disable ? "the connection is plain text" : "the connection can fall back to plain text and the server's certificate is not checked") (only a server on this machine may go without a verified TLS connection; sslrootcert=<PEM file> names a private CA)")
            }
            try Self.checkAPIKeys(issuer: env("PUSHPROV_ISSUER_API_KEY")!, tsp: env("PUSHPROV_TSP_API_KEY")!, minimumLength: Self.minimumProductionAPIKeyLength, source: "PUSHPROV_ISSUER_API_KEY", "PUSHPROV_TSP_API_KEY")
            let metricsKey = try Self.metricsAPIKey(env, issuer: env("PUSHPROV_ISSUER_API_KEY")!, tsp: env("PUSHPROV_TSP_API_KEY")!, minimumLength: Self.minimumProductionAPIKeyLength)
            let keyFile = env("PUSHPROV_KEY_FILE")!
            let keys: LocalKeys
            do { keys = try LocalKeyFile.load(at: keyFile) } catch { throw ConfigurationError("\(error)") }
            return ServerConfiguration(
                host: host, port: port, dataDirectory: dataDirectory, database: database, migrateOnStart: migrate, production: true, trustAnchors: anchors,
                keys: keys, keyFilePath: keyFile, issuerAPIKey: env("PUSHPROV_ISSUER_API_KEY")!, tspAPIKey: env("PUSHPROV_TSP_API_KEY")!, metricsAPIKey: metricsKey,
                cardholderKeys: try Self.loadJWKS(env("PUSHPROV_JWKS")!), developmentTokenKey: nil,
                cardholderKeysFile: env("PUSHPROV_JWKS"), cardholderKeysReloadInterval: keysReloadInterval,
                cardholderIssuer: cardholderIssuer, cardholderAudience: cardholderAudience, cardholderType: cardholderType, activationPolicy: policy,
                connectorTimeout: connectorTimeout, executor: executor, realignInterval: realignInterval, maximumConnections: maximumConnections, shutdownGrace: shutdownGrace,
                notices: metricsKey == nil ? [Self.openMetricsWarning] : []
            )
        }

        // Everything that can be refused is checked before the first file is made, so a refusal
        // never costs the one start-up that prints the generated secrets.
        let extraCardholderKeys = try env("PUSHPROV_JWKS").map { try Self.loadJWKS($0) }
        for name in ["PUSHPROV_ISSUER_API_KEY", "PUSHPROV_TSP_API_KEY", "PUSHPROV_METRICS_API_KEY"] {
            if let key = env(name) { try Self.checkAPIKey(key, minimumLength: 1, source: name) }
        }
        if let issuer = env("PUSHPROV_ISSUER_API_KEY"), let tsp = env("PUSHPROV_TSP_API_KEY") {
            try Self.checkAPIKeys(issuer: issuer, tsp: tsp, minimumLength: 1, source: "PUSHPROV_ISSUER_API_KEY", "PUSHPROV_TSP_API_KEY")
        }
        // (Against the API keys the environment gives; generated ones are checked below.)
        _ = try Self.metricsAPIKey(env, issuer: env("PUSHPROV_ISSUER_API_KEY") ?? "", tsp: env("PUSHPROV_TSP_API_KEY") ?? "", minimumLength: 1)
        var existing = stat()
        if stat(dataDirectory, &existing) == 0, existing.st_mode & S_IFMT != S_IFDIR {
            throw ConfigurationError("data directory \(dataDirectory) is not a directory")
        }
        // A SQLite database that will be refused (a directory, a file others can read, one
        // this user may not use) is refused before keys and secrets are generated for it.
        if case .sqlite(let path) = database.location {
            if let problem = DatabaseConfiguration.sqliteAccessProblem(at: path, creating: migrate) { throw ConfigurationError(problem) }
            if FileManager.default.fileExists(atPath: path) {
                // Its warnings are logged when the store opens it; here only its refusals count.
                try DatabaseConfiguration.checkSQLiteFiles(at: path, logger: Logger(label: "pushprov.config") { _ in SwiftLogNoOpLogHandler() })
            }
            // Without migrations, a database that lacks some (a new one lacks all) is refused
            // when the store opens; as early as this, a first start makes nothing for it.
            if !migrate, let pending = DatabaseConfiguration.pendingSQLiteMigrations(at: path), !pending.isEmpty {
                throw ConfigurationError("database \(database) lacks migrations \(pending.joined(separator: ", ")); run `pushprov migrate --database …` first, or start without --no-migrate")
            }
        }
        do {
            try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ConfigurationError("data directory \(dataDirectory) cannot be made: \(error.localizedDescription)")
        }
        try Self.checkDataDirectory(dataDirectory, notices: &notices)
        let keyFile = env("PUSHPROV_KEY_FILE") ?? (dataDirectory as NSString).appendingPathComponent("keys.json")
        let keys: LocalKeys
        let keyFileGenerated: Bool
        do {
            let loaded = try LocalKeyFile.loadOrCreate(at: keyFile)
            keys = loaded.keys
            keyFileGenerated = loaded.created
            if loaded.created { notices.append("generated PAN vault and activation-data keys in \(keyFile) (mode 0600)") }
        } catch {
            throw ConfigurationError("\(error)")
        }
        let secretsPath = (dataDirectory as NSString).appendingPathComponent("secrets.json")
        let secrets = try EmbeddedSecrets.loadOrCreate(at: secretsPath)
        let issuerKey = env("PUSHPROV_ISSUER_API_KEY") ?? secrets.value.issuerAPIKey
        let tspKey = env("PUSHPROV_TSP_API_KEY") ?? secrets.value.tspAPIKey
        try Self.checkAPIKeys(
            issuer: issuerKey, tsp: tspKey, minimumLength: 1,
            source: env("PUSHPROV_ISSUER_API_KEY") == nil ? "issuerApiKey in \(secretsPath)" : "PUSHPROV_ISSUER_API_KEY",
            env("PUSHPROV_TSP_API_KEY") == nil ? "tspApiKey in \(secretsPath)" : "PUSHPROV_TSP_API_KEY"
        )
        let metricsKey = try Self.metricsAPIKey(env, issuer: issuerKey, tsp: tspKey, minimumLength: 1)
        // The API keys the run takes from the file: printed the once it is made, named after.
        let keysFromFile = [
            ("issuer API key", "PUSHPROV_ISSUER_API_KEY", issuerKey),
            ("TSP API key", "PUSHPROV_TSP_API_KEY", tspKey),
        ].filter { env($0.1) == nil }
        if secrets.created {
            if keysFromFile.isEmpty {
                notices.append("generated embedded-run secrets in \(secretsPath) (mode 0600): the key dev-token signs with; the API keys come from the environment")
            } else {
                notices.append("generated embedded-run secrets in \(secretsPath) (mode 0600); the API keys taken from it are printed this once:")
                notices += keysFromFile.map { "  \($0.0) (\($0.1)): \($0.2)" }
            }
        } else if !keysFromFile.isEmpty {
            notices.append("\(keysFromFile.map(\.0).joined(separator: " and ")): from \(secretsPath)")
        }
        let devKey = secrets.value.cardholderDevelopmentKey
        let cardholderKeys = Self.cardholderKeySet(development: devKey.publicJWK, file: extraCardholderKeys)
        // The embedded run is for development; said plainly when it is set up like more.
        if extraCardholderKeys != nil, cardholderIssuer == nil || cardholderAudience == nil {
            let unchecked = [cardholderIssuer == nil ? "iss" : nil, cardholderAudience == nil ? "aud" : nil].compactMap { $0 }.joined(separator: " or ")
            notices.append("warning: the identity provider's tokens (PUSHPROV_JWKS) are accepted without checking their \(unchecked), so a token it issued for another application signs in here too; set --jwt-issuer and --jwt-audience (--production requires them)")
        }
        if !Self.isLoopback(host) {
            notices.append("warning: embedded mode on \(host) is reachable from other machines; it accepts cardholder tokens signed with the development key in \(secretsPath), which whoever can read that file can make for any user; use --production for anything but development")
        }
        return ServerConfiguration(
            host: host, port: port, dataDirectory: dataDirectory, database: database, migrateOnStart: migrate, production: false, trustAnchors: anchors,
            keys: keys, keyFilePath: keyFile, keyFileGenerated: keyFileGenerated, issuerAPIKey: issuerKey, tspAPIKey: tspKey, metricsAPIKey: metricsKey, cardholderKeys: cardholderKeys,
            developmentTokenKey: devKey, cardholderKeysFile: env("PUSHPROV_JWKS"), cardholderKeysReloadInterval: keysReloadInterval, cardholderIssuer: cardholderIssuer, cardholderAudience: cardholderAudience, cardholderType: cardholderType, activationPolicy: policy, connectorTimeout: connectorTimeout, executor: executor, realignInterval: realignInterval, maximumConnections: maximumConnections, shutdownGrace: shutdownGrace, notices: notices
        )
    }

    /// Resolves only the database settings (what `pushprov migrate` needs): `--database` or
    /// `PUSHPROV_DATABASE`, defaulting to `<data-dir>/pushprov.sqlite`, and the pool size.
    public func resolveDatabase(environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> DatabaseConfiguration {
        let env = { (name: String) -> String? in environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let dataDirectory = self.dataDirectory ?? env("PUSHPROV_DATA_DIR") ?? "./.pushprov"
        let setting = self.database ?? env("PUSHPROV_DATABASE") ?? (dataDirectory as NSString).appendingPathComponent("pushprov.sqlite")
        let poolText = databasePoolSize.map(String.init) ?? env("PUSHPROV_DATABASE_POOL_SIZE") ?? String(DatabaseConfiguration.defaultPoolSize)
        let range = DatabaseConfiguration.poolSizeRange
        guard let poolSize = Int(poolText), range.contains(poolSize) else {
            throw ConfigurationError("database pool size must be a number from \(range.lowerBound) to \(range.upperBound) (got \(poolText))")
        }
        var database = try DatabaseConfiguration(parsing: setting, poolSize: poolSize)
        if let waitText = databaseWait ?? env("PUSHPROV_DATABASE_WAIT") {
            let range = DatabaseConfiguration.connectionWaitRange
            guard let seconds = Double(waitText.trimmingCharacters(in: .whitespaces)), range.contains(seconds) else {
                throw ConfigurationError("database wait must be a number of seconds from \(Int(range.lowerBound)) to \(Int(range.upperBound)) (got \(waitText))")
            }
            database.connectionWait = .seconds(seconds)
        }
        if let timeoutText = databaseStatementTimeout ?? env("PUSHPROV_DATABASE_STATEMENT_TIMEOUT") {
            let range = DatabaseConfiguration.statementTimeoutRange
            guard let seconds = Double(timeoutText.trimmingCharacters(in: .whitespaces)), range.contains(seconds) else {
                throw ConfigurationError("database statement timeout must be a number of seconds from \(Int(range.lowerBound)) to \(Int(range.upperBound)) (got \(timeoutText))")
            }
            database.statementTimeout = .seconds(seconds)
        }
        return database
    }

    /// The longest `--connector-timeout` / `PUSHPROV_CONNECTOR_TIMEOUT` accepted, in seconds.
    public static let maximumConnectorTimeoutSeconds = 300.0
    /// The shortest accepted (shorter limits fail every command a network answers in time).
    public static let minimumConnectorTimeoutSeconds = 0.1

    /// Resolves only the token service time limit: `--connector-timeout` or
    /// `PUSHPROV_CONNECTOR_TIMEOUT`, seconds from ``minimumConnectorTimeoutSeconds`` to
    /// ``maximumConnectorTimeoutSeconds`` (decimals allowed), default 10.
    public func resolveConnectorTimeout(environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Duration {
        guard let text = connectorTimeout ?? environment["PUSHPROV_CONNECTOR_TIMEOUT"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            return TimeLimitedTokenServiceConnector.defaultLimit
        }
        let maximum = Self.maximumConnectorTimeoutSeconds
        guard let seconds = Double(text.trimmingCharacters(in: .whitespaces)), seconds >= Self.minimumConnectorTimeoutSeconds, seconds <= maximum else {
            throw ConfigurationError("connector timeout must be a number of seconds from \(Self.minimumConnectorTimeoutSeconds) to \(Int(maximum)) (got \(text))")
        }
        return .seconds(seconds)
    }

    /// The longest `--realign-interval` / `PUSHPROV_REALIGN_INTERVAL` accepted, in seconds.
    public static let maximumRealignIntervalSeconds = 3_600.0

    /// Resolves only the token realignment interval: `--realign-interval` or
    /// `PUSHPROV_REALIGN_INTERVAL`: 0 (off, nil) or seconds from 1 to
    /// ``maximumRealignIntervalSeconds`` (decimals allowed), default 30.
    public func resolveRealignInterval(environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Duration? {
        try Self.interval(
            realignInterval ?? environment["PUSHPROV_REALIGN_INTERVAL"].flatMap { $0.isEmpty ? nil : $0 }, default: TokenRealigner.defaultInterval,
            maximum: Self.maximumRealignIntervalSeconds, name: "realign interval", zero: "off"
        )
    }

    /// An interval setting's `text` (the flag's, else the environment's; nil: not set,
    /// `fallback`): 0 (nil: `zero` says what that means) or seconds from 1 to `maximum`,
    /// decimals allowed; otherwise an error naming the setting (`name`).
    private static func interval(_ text: String?, default fallback: Duration, maximum: Double, name: String, zero: String) throws(ConfigurationError) -> Duration? {
        guard let text else { return fallback }
        guard let seconds = Double(text.trimmingCharacters(in: .whitespaces)), seconds == 0 || (seconds >= 1 && seconds <= maximum) else {
            throw ConfigurationError("\(name) must be 0 (\(zero)) or a number of seconds from 1 to \(Int(maximum)) (got \(text))")
        }
        return seconds == 0 ? nil : .seconds(seconds)
    }

    /// The longest `--jwks-reload-interval` / `PUSHPROV_JWKS_RELOAD_INTERVAL` accepted, in seconds.
    public static let maximumCardholderKeysReloadIntervalSeconds = 3_600.0

    /// Resolves only the JWKS reload interval: `--jwks-reload-interval` or
    /// `PUSHPROV_JWKS_RELOAD_INTERVAL`: 0 (read only at start, nil) or seconds from 1 to
    /// ``maximumCardholderKeysReloadIntervalSeconds`` (decimals allowed), default 10.
    public func resolveCardholderKeysReloadInterval(environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Duration? {
        try Self.interval(
            cardholderKeysReloadInterval ?? environment["PUSHPROV_JWKS_RELOAD_INTERVAL"].flatMap { $0.isEmpty ? nil : $0 }, default: CardholderKeyReloader.defaultInterval,
            maximum: Self.maximumCardholderKeysReloadIntervalSeconds, name: "JWKS reload interval", zero: "read only at start"
        )
    }

    /// The default of `--shutdown-grace`: 25 s, inside the 30 s a container's orchestrator
    /// (Kubernetes, Docker) gives a process between SIGTERM and SIGKILL by default, so what is
    /// cancelled at the end still ends cleanly (the database closed, a SQLite file checkpointed).
    public static let defaultShutdownGrace: Duration = .seconds(25)
    /// The longest `--shutdown-grace` / `PUSHPROV_SHUTDOWN_GRACE` accepted, in seconds.
    public static let maximumShutdownGraceSeconds = 3_600.0

    /// Resolves only the shutdown grace: `--shutdown-grace` or `PUSHPROV_SHUTDOWN_GRACE`, 0
    /// (wait as long as it takes, nil) or seconds from 1 to ``maximumShutdownGraceSeconds``
    /// (decimals allowed), default ``defaultShutdownGrace``.
    public func resolveShutdownGrace(environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Duration? {
        try Self.interval(
            shutdownGrace ?? environment["PUSHPROV_SHUTDOWN_GRACE"].flatMap { $0.isEmpty ? nil : $0 }, default: Self.defaultShutdownGrace,
            maximum: Self.maximumShutdownGraceSeconds, name: "shutdown grace", zero: "no limit"
        )
    }

    /// Resolves only the connection limit: `--max-connections` or `PUSHPROV_MAX_CONNECTIONS`, a
    /// whole number in ``ConnectionLimit/range`` that leaves ``ConnectionLimit/reservedFiles``
    /// of the process's open-file limit; by default ``ConnectionLimit/defaultLimit(openFileLimit:)``.
    public func resolveMaximumConnections(environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Int {
        let files = openFileLimit ?? ConnectionLimit.openFileLimit()
        guard let text = maximumConnections ?? environment["PUSHPROV_MAX_CONNECTIONS"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            return ConnectionLimit.defaultLimit(openFileLimit: files)
        }
        let range = ConnectionLimit.range
        guard let limit = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(limit) else {
            throw ConfigurationError("max connections must be a whole number from \(range.lowerBound) to \(range.upperBound) (got \(text))")
        }
        guard files == Int.max || limit <= files - ConnectionLimit.reservedFiles else {
            throw ConfigurationError("max connections \(limit) needs \(limit + ConnectionLimit.reservedFiles) open files with the \(ConnectionLimit.reservedFiles) kept for the database and the rest, but this process may open \(files) (ulimit -n); lower --max-connections or raise the limit")
        }
        return limit
    }

    /// Whether `host` names this machine (`localhost`, 127.0.0.0/8, `::1`).
    package static func isLoopback(_ host: String) -> Bool {
        let lowered = host.lowercased()
        if lowered == "localhost" || lowered == "::1" { return true }
        let parts = lowered.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The shortest API key `--production` accepts (the generated ones have 43 characters).
    public static let minimumProductionAPIKeyLength = 32

    /// Refuses API keys that cannot be presented as they are configured (spaces, characters a
    /// `Bearer` credential cannot hold), are too short, or are the same for the issuer and the
    /// token service (which would give the token service the Lifecycle API) — judged without
    /// `=` padding, which carries no secret: one key with an `=` more is as good as the other.
    static func checkAPIKeys(issuer: String, tsp: String, minimumLength: Int, source issuerSource: String, _ tspSource: String) throws(ConfigurationError) {
        try checkAPIKey(issuer, minimumLength: minimumLength, source: issuerSource)
        try checkAPIKey(tsp, minimumLength: minimumLength, source: tspSource)
        guard unpadded(issuer) != unpadded(tsp) else {
            throw ConfigurationError("\(issuerSource) and \(tspSource) must differ: with one key the token service could call the Lifecycle API")
        }
    }

    /// The start-up notice of a production server whose `GET /metrics` answers anyone.
    static let openMetricsWarning = "warning: GET /metrics answers anyone who can reach the server (request counts and outcomes, no card data); set PUSHPROV_METRICS_API_KEY to require a key, or keep the port off networks scrapers do not own"

    /// `PUSHPROV_METRICS_API_KEY`, checked as an API key of at least `minimumLength`
    /// characters that is neither of the other two (nil when unset).
    static func metricsAPIKey(_ env: (String) -> String?, issuer: String, tsp: String, minimumLength: Int) throws(ConfigurationError) -> String? {
        guard let key = env("PUSHPROV_METRICS_API_KEY") else { return nil }
        try checkAPIKey(key, minimumLength: minimumLength, source: "PUSHPROV_METRICS_API_KEY")
        // Judged without `=` padding, which carries no secret: the issuer key with one more `=`
        // would still be the issuer key.
        for (other, name) in [(issuer, "the issuer API key"), (tsp, "the TSP API key")] where unpadded(key) == unpadded(other) {
            throw ConfigurationError("PUSHPROV_METRICS_API_KEY must differ from \(name): whoever scrapes the metrics would hold that API's key")
        }
        return key
    }

    /// An API key without its trailing `=` padding, for telling keys apart.
    static func unpadded(_ key: String) -> [UInt8] { Array(key.utf8.reversed().drop { $0 == UInt8(ascii: "=") }.reversed()) }

    /// Refuses one API key that cannot be presented as configured or is too short.
    static func checkAPIKey(_ key: String, minimumLength: Int, source: String) throws(ConfigurationError) {
        // token68: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
        let body = key.utf8.reversed().drop(while: { $0 == UInt8(ascii: "=") })
        guard !body.isEmpty, body.allSatisfy({ Self.token68.contains($0) }) else {
            throw ConfigurationError("\(source) must be letters, digits and - . _ ~ + / (then = padding), with no spaces")
        }
        // `=` padding carries no secret: a key is judged on the characters before it.
        guard body.count >= minimumLength else {
            throw ConfigurationError("\(source) must be at least \(minimumLength) characters before any = padding in production (got \(body.count)); `openssl rand -base64 32` makes one")
        }
    }

    /// The bytes of RFC 7235's token68 (an HTTP credential) before its `=` padding.
    private static let token68 = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/".utf8)

    /// Refuses a data directory every user can write, and warns of one its group can write or
    /// another user owns: the embedded run reads its PAN vault keys and the key that signs
    /// development tokens (for any user) from there, and whoever can write the directory can
    /// put files of their own in their place (even with the sticky bit: before the first run).
    package static func checkDataDirectory(_ path: String, notices: inout [String]) throws(ConfigurationError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw ConfigurationError("data directory \(path) cannot be read (\(String(cString: strerror(errno))))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw ConfigurationError("data directory \(path) is not a directory")
        }
        let mode = String(Int(info.st_mode) & 0o7777, radix: 8)
        if Int(info.st_mode) & 0o002 != 0 {
            throw ConfigurationError("data directory \(path) can be written by every user (mode \(mode)): anyone could put their own keys.json or secrets.json there for this server to read; choose another --data-dir, or chmod o-w \(path)")
        }
        if Int(info.st_mode) & 0o020 != 0 {
            notices.append("warning: data directory \(path) can be written by its group (mode \(mode)): the group's members can replace the keys and the database in it; chmod g-w \(path)")
        }
        if info.st_uid != geteuid() {
            notices.append("warning: data directory \(path) belongs to user id \(info.st_uid), not to this process's user (\(geteuid())), who can replace the keys and the database in it")
        }
    }

    /// The cardholder JWT keys in force: the embedded run's development key (nil in
    /// production) and the identity provider's, from its JWKS file (nil if none); a key of the
    /// file with the development key's id takes its place.
    static func cardholderKeySet(development: JSONWebKey?, file: JSONWebKeySet?) -> JSONWebKeySet {
        JSONWebKeySet(keys: (development.map { [$0] } ?? []) + (file?.keys ?? []))
    }

    static func loadJWKS(_ path: String) throws -> JSONWebKeySet {
        try readJWKS(path).set
    }

    /// The largest JWKS file read (a set of a few hundred keys fits many times over).
    static let maximumJWKSFileSize = 1 << 20

    /// Reads and checks the JWKS file at `path`: its set of keys, and the identity of the file
    /// read. The file is opened once, and its owner, mode and bytes all come from that open
    /// file, so a file swapped in between the checks and the read is never read unchecked.
    static func readJWKS(_ path: String) throws -> (set: JSONWebKeySet, identity: FileIdentity) {
        // Judged on the file itself, through a symbolic link (a Kubernetes ConfigMap or Secret
        // mount is one): the link's own mode says nothing.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw ConfigurationError("JWKS file \(path) cannot be read (\(String(cString: strerror(errno))))")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw ConfigurationError("JWKS file \(path) cannot be read (\(String(cString: strerror(errno))))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw ConfigurationError("JWKS file \(path) is not a regular file")
        }
        // Whoever can write this file can sign in as any cardholder.
        if Int(info.st_mode) & 0o022 != 0 {
            let mode = Int(info.st_mode) & 0o7777
            throw ConfigurationError("JWKS file \(path) can be written by group or others (mode \(String(mode, radix: 8))); whoever can write it can sign in as any cardholder: chmod go-w \(path)")
        }
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw ConfigurationError("JWKS file \(path) belongs to user id \(info.st_uid), neither this process's user (\(geteuid())) nor root; whoever owns it can sign in as any cardholder: chown it")
        }
        guard Int(info.st_size) <= maximumJWKSFileSize else {
            throw ConfigurationError("JWKS file \(path) is larger than \(maximumJWKSFileSize) bytes")
        }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while data.count <= maximumJWKSFileSize {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(contentsOf: chunk[..<count])
            } else if count == 0 {
                break
            } else if errno != EINTR {
                throw ConfigurationError("JWKS file \(path) cannot be read (\(String(cString: strerror(errno))))")
            }
        }
        guard data.count <= maximumJWKSFileSize else {
            throw ConfigurationError("JWKS file \(path) is larger than \(maximumJWKSFileSize) bytes")
        }
        guard let set = try? JSONDecoder().decode(JSONWebKeySet.self, from: data) else {
            throw ConfigurationError("JWKS file \(path) is not a JSON Web Key Set ({\"keys\":[…]})")
        }
        let repeated = set.repeatedP256KeyIDs
        guard repeated.isEmpty else {
            throw ConfigurationError("JWKS file \(path) has more than one P-256 key with kid \(repeated.joined(separator: ", ")); each key needs its own kid")
        }
        guard !set.p256KeysByID.isEmpty else {
            throw ConfigurationError("JWKS file \(path) holds no EC P-256 signing key with a kid (keys of other types or for encryption are skipped)")
        }
        return (set, FileIdentity(info))
    }
}

/// A configuration that cannot be used; the message says what to fix.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var message: String
    /// Creates an error.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}
