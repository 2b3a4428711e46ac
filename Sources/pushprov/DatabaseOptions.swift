import ArgumentParser
import Foundation
import Logging
import TokenPlatform

/// `--database`, `--database-pool-size`, `--database-wait` and `--database-statement-timeout`, shared by every command that opens TMP's storage.
struct DatabaseOptions: ParsableArguments {
    @Option(help: "SQLite file path, or postgres://user:password@host:5432/database[?sslmode=disable|prefer|require|verify-ca|verify-full][&sslrootcert=<PEM file>] (PUSHPROV_DATABASE; default <data-dir>/pushprov.sqlite).")
    var database: String?

    @Option(name: .customLong("database-pool-size"), help: "Most PostgreSQL connections this process opens (PUSHPROV_DATABASE_POOL_SIZE; default 10, 1 to 200; SQLite ignores it).")
    var poolSize: Int?

    @Option(name: .customLong("database-wait"), help: ArgumentHelp("Most seconds a request waits for the database (a PostgreSQL connection, a SQLite lock) before it is answered 503 (PUSHPROV_DATABASE_WAIT; default 5, 1 to 60).", valueName: "seconds"))
    var wait: String?

    @Option(name: .customLong("database-statement-timeout"), help: ArgumentHelp("Most seconds one PostgreSQL database call may run before it is cancelled and answered 503; migrations are not bounded (PUSHPROV_DATABASE_STATEMENT_TIMEOUT; default 10, 1 to 300; SQLite ignores it).", valueName: "seconds"))
    var statementTimeout: String?

    /// Copies the options into `settings`, warning on stderr when `--database` holds a
    /// password (``passwordWarning``).
    func apply(to settings: inout ServerSettings) {
        if let passwordWarning { FileHandle.standardError.write(Data("pushprov: \(passwordWarning)\n".utf8)) }
        settings.database = database
        settings.databasePoolSize = poolSize
        settings.databaseWait = wait
        settings.databaseStatementTimeout = statementTimeout
    }
}

extension DatabaseOptions {
    /// A warning (without the password) when the `--database` option holds a PostgreSQL URL
    /// with a password: a command line is in every local user's process list
    /// (`/proc/<pid>/cmdline`) for as long as the process runs, while its environment is
    /// readable by its own user only. Nil otherwise (`PUSHPROV_DATABASE` is not looked at).
    var passwordWarning: String? { Self.passwordWarning(for: database) }

    /// ``passwordWarning`` for a `--database` option's value.
    static func passwordWarning(for database: String?) -> String? {
        guard let database, database.lowercased().hasPrefix("postgres"),
            let url = try? PostgresURL(parsing: database), let password = url.password, !password.isEmpty
        else { return nil }
        return "warning: --database holds a password, which every local user can read in the process list while this runs; give the URL in PUSHPROV_DATABASE instead (a process's environment is readable by its own user only)"
    }

    /// Opens the database these options name (the default SQLite file in `dataDirectory`
    /// when none is given) for a command that runs once: migrating it first when `migrate`,
    /// else refusing it while migrations are pending. A bad setting or a database that cannot
    /// be opened is a one-line ``CLIError``.
    ///
    /// Without `migrate`, a SQLite file that does not exist is refused rather than created.
    func openStore(dataDirectory: String?, migrate: Bool, pendingAdvice: String = "run `pushprov migrate --database …` first") async throws -> (database: DatabaseConfiguration, store: any TMPStore, applied: [String]) {
        if dataDirectory?.isEmpty == true { throw DataDirectoryCheck.emptyRefusal }
        var settings = ServerSettings()
        settings.dataDirectory = dataDirectory
        apply(to: &settings)
        let database: DatabaseConfiguration
        do {
            database = try settings.resolveDatabase()
        } catch {
            throw CLIError(error.message)
        }
        if case .sqlite(let path) = database.location {
            if let problem = DatabaseConfiguration.sqliteAccessProblem(at: path, creating: migrate) { throw CLIError(problem) }
            if !migrate, !FileManager.default.fileExists(atPath: path) { throw CLIError("database \(path) does not exist") }
        }
        var logger = Logger(label: "pushprov")
        logger.logLevel = .warning
        do {
            let opened = try await database.openMigratedStore(migrate: migrate, logger: logger, pendingAdvice: pendingAdvice)
            return (database, opened.store, opened.applied)
        } catch let error as ConfigurationError {
            throw CLIError(error.message)
        }
    }
}
