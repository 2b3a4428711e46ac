import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import TokenPlatform

/// `pushprov serve`: the TMP server.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the TMP server (Push Provisioning, Lifecycle and TSP APIs).",
        discussion: """
            Embedded defaults need nothing else: 127.0.0.1:8080, SQLite in ./.pushprov/, keys and \
            API keys generated there once (mode 0600). Flags win over environment variables. \
            --database postgres://… shares one PostgreSQL database between instances. Pending \
            schema migrations are applied on start unless --no-migrate. \
            --production generates no keys, secrets or data directory and refuses to start without \
            PUSHPROV_ISSUER_API_KEY, PUSHPROV_TSP_API_KEY, PUSHPROV_JWKS, PUSHPROV_KEY_FILE, the \
            cardholder JWTs' issuer and audience, and --database; it trusts only Apple's root. \
            PUSHPROV_METRICS_API_KEY, when set, is the bearer key GET /metrics requires.
            """
    )

    @Option(help: "Address to bind (PUSHPROV_HOST; default 127.0.0.1).") var host: String?
    @Option(help: "Port to bind (PUSHPROV_PORT; default 8080).") var port: Int?
    @Option(name: .customLong("data-dir"), help: "Data directory (PUSHPROV_DATA_DIR; default ./.pushprov, made 0700); one every user can write is refused.") var dataDirectory: String?
    @OptionGroup var databaseOptions: DatabaseOptions
    @Flag(name: .customLong("no-migrate"), help: "Do not apply pending migrations on start; refuse to start while any are pending (run `pushprov migrate`).") var noMigrate = false
    @Option(name: .customLong("trust-anchor"), help: "Extra trust anchor PEM beside Apple Root CA - G3; repeatable (PUSHPROV_TRUST_ANCHORS, colon-separated).") var trustAnchors: [String] = []
    @Option(name: .customLong("activation-policy"), help: "in-app (yellow) or immediate (green) for valid activation data (PUSHPROV_ACTIVATION_POLICY; default in-app).") var activationPolicy: String?
    @Option(name: .customLong("connector-timeout"), help: ArgumentHelp("Most seconds one token service command may take; a slower one counts as failed (PUSHPROV_CONNECTOR_TIMEOUT; default 10, at most 300).", valueName: "seconds")) var connectorTimeout: String?
    @Option(name: .customLong("realign-interval"), help: ArgumentHelp("Seconds between two rounds that send again the token service commands a card's status still owes (PUSHPROV_REALIGN_INTERVAL; default 30, 0 turns it off, at most 3600).", valueName: "seconds")) var realignInterval: String?
    @Option(name: .customLong("jwks-reload-interval"), help: ArgumentHelp("Seconds between two looks at the PUSHPROV_JWKS file; a changed, valid file's keys replace the ones in force (PUSHPROV_JWKS_RELOAD_INTERVAL; default 10; 0 reads it only at start; otherwise 1 to 3600, decimals allowed).", valueName: "seconds")) var jwksReloadInterval: String?
    @Option(help: ArgumentHelp("event-loops (default): Swift concurrency runs on SwiftNIO's event loops, no thread hop per request; swift: Swift's own pool (PUSHPROV_EXECUTOR).", valueName: "executor")) var executor: String?
    @Option(name: .customLong("jwt-issuer"), help: ArgumentHelp("The iss cardholder JWTs must carry: the identity provider's (PUSHPROV_JWT_ISSUER; required with --production).", valueName: "issuer")) var jwtIssuer: String?
    @Option(name: .customLong("jwt-audience"), help: ArgumentHelp("The aud cardholder JWTs must name: this server (PUSHPROV_JWT_AUDIENCE; required with --production).", valueName: "audience")) var jwtAudience: String?
    @Option(name: .customLong("jwt-type"), help: ArgumentHelp("The typ cardholder JWTs' headers must carry, e.g. at+jwt for an identity provider that types its access tokens (PUSHPROV_JWT_TYPE; default: not checked).", valueName: "type")) var jwtType: String?
    @Option(name: .customLong("max-connections"), help: ArgumentHelp("Most client connections held open at once; more wait in the listen queue (PUSHPROV_MAX_CONNECTIONS; default: the open-file limit less 256, at least 16, at most 10000).", valueName: "count")) var maxConnections: String?
    @Option(name: .customLong("shutdown-grace"), help: ArgumentHelp("Most seconds a graceful shutdown (SIGINT, SIGTERM) waits for requests and connections to finish before it cancels what is left (PUSHPROV_SHUTDOWN_GRACE; default 25; 0 waits as long as they take; otherwise 1 to 3600, decimals allowed).", valueName: "seconds")) var shutdownGrace: String?
    @Flag(help: "Production mode: explicit secrets only, Apple's root only.") var production = false

    func run() async throws {
        var settings = ServerSettings()
        settings.host = host
        settings.port = port
        settings.dataDirectory = dataDirectory
        databaseOptions.apply(to: &settings)
        settings.migrate = !noMigrate
        settings.trustAnchorFiles = trustAnchors
        settings.production = production
        settings.activationPolicy = activationPolicy
        settings.connectorTimeout = connectorTimeout
        settings.executor = executor
        settings.realignInterval = realignInterval
        settings.cardholderKeysReloadInterval = jwksReloadInterval
        settings.cardholderIssuer = jwtIssuer
        settings.cardholderAudience = jwtAudience
        settings.cardholderType = jwtType
        settings.maximumConnections = maxConnections
        settings.shutdownGrace = shutdownGrace
        // A server may hold as many files as the system lets it; the connection limit is then
        // judged against that.
        settings.openFileLimit = ConnectionLimit.raiseOpenFileLimit()
        // Before any key or card number is read: a crash must not write them to disk.
        let hardeningNotices = ProcessHardening.withholdMemoryFromDumps(production: production)
        var resolved: ServerConfiguration
        do {
            resolved = try settings.resolve()
        } catch let error as ConfigurationError {
            throw CLIError(error.message)
        }
        // NIO requires this on the main thread on Darwin; `run()` is not main-actor isolated.
        if resolved.executor == .eventLoops, !(await MainActor.run { NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor() }) {
            // Only this command installs it, once per process; false means the runtime has no hook.
            resolved.notices.append("this Swift runtime cannot run concurrency on the event loops; using Swift's own pool")
            resolved.executor = .swift
        }
        let configuration = resolved
        var logger = Logger(label: "pushprov") { ServerLogHandler(label: $0, metadataProvider: RequestLogContext.metadataProvider) }
        let (level, levelNotice) = ServerLogHandler.level(fromEnvironment: ProcessInfo.processInfo.environment["LOG_LEVEL"])
        logger.logLevel = level
        for notice in configuration.notices + hardeningNotices + [levelNotice].compactMap({ $0 }) { print(notice) }
        fflush(nil)
        let environment: PlatformEnvironment
        do {
            environment = try await TMPServer.makeEnvironment(configuration: configuration, logger: logger)
        } catch let error as ConfigurationError {
            throw CLIError(error.message)
        }
        let metrics = PlatformMetrics()
        let authenticator = TMPServer.makeAuthenticator(configuration: configuration)
        let app = TMPServer.makeServer(configuration: configuration, environment: environment, metrics: metrics, authenticator: authenticator, logger: logger) { port in
            var running = configuration
            running.port = port
            print(running.startupLine)
            // stdout is block-buffered when it is a pipe (systemd, a supervisor, a test): flush.
            fflush(nil)
        }
        do {
            let realigner = TMPServer.makeRealigner(configuration: configuration, environment: environment, metrics: metrics)
            let reloader = TMPServer.makeCardholderKeyReloader(configuration: configuration, authenticator: authenticator, logger: logger)
            var services: [any Service] = []
            if let realigner { services.append(realigner) }
            if let reloader { services.append(reloader) }
            try await app.runService(alongside: services, shutdownGrace: configuration.shutdownGrace)
        } catch {
            await environment.store.close()
            throw Self.describe(error, host: configuration.host, port: configuration.port)
        }
        // Requests have drained: now the database connections can go.
        await environment.store.close()
    }

    /// A failure to listen said in one line naming the address, rather than NIO's text
    /// (`bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)`); anything else as
    /// it came.
    static func describe(_ error: any Error, host: String, port: Int) -> any Error {
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        if let error = error as? IOError {
            switch error.errnoCode {
            case EADDRINUSE: return CLIError("cannot listen on \(address): the address is in use (another server on that port?); choose another with --port")
            case EACCES: return CLIError("cannot listen on \(address): permission denied (ports below 1024 need privileges); choose another with --port")
            case EADDRNOTAVAIL: return CLIError("cannot listen on \(address): this machine has no such address; choose another with --host")
            default: return CLIError("cannot listen on \(address): \(String(cString: strerror(error.errnoCode)))")
            }
        }
        if error is SocketAddressError || error is SocketAddressError.UnknownHost {
            return CLIError("cannot listen on \(address): the host cannot be resolved; give an IP address or a name this machine resolves with --host")
        }
        return error
    }
}
