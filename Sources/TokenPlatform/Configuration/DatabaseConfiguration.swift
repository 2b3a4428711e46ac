import Foundation
import Logging
import GRDB
#if canImport(Glibc)
import Glibc
#endif

/// Which database TMP keeps its data in, and how many connections one instance may open.
///
/// One value describes the database for every command that needs one (`serve`, `migrate`, and
/// whatever else opens TMP's storage): parse the `--database` setting with
/// ``init(parsing:poolSize:)``, then ``openStore(logger:)``.
public struct DatabaseConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// Where the data lives.
    public enum Location: Sendable, Hashable {
        /// A SQLite file (created on first use), WAL mode.
        case sqlite(path: String)
        /// A PostgreSQL database shared by every instance pointed at it.
        case postgres(PostgresURL)
    }

    /// Where the data lives.
    public var location: Location
    /// The most connections one instance opens (PostgreSQL; SQLite ignores it).
    public var poolSize: Int
    /// How long a PostgreSQL migration statement waits for a table lock before the migration
    /// gives up (``PostgresStore/defaultMigrationLockTimeout``; SQLite ignores it).
    public var migrationLockTimeout: Duration = PostgresStore.defaultMigrationLockTimeout
    /// How long a request waits for the database before it is answered with
    /// `503 database_unavailable`: for a PostgreSQL connection from the pool (all in use, or
    /// the server unreachable), for SQLite for a lock another process holds (its busy timeout).
    public var connectionWait: Duration = defaultConnectionWait
    /// How long one PostgreSQL database call (a statement, or a transaction with all its
    /// statements) may run once it has a connection before it fails as
    /// `503 database_unavailable`: the server cancels a longer statement, and a call still
    /// unanswered a second later (a silent network) has its connection closed. Migrations are
    /// not bounded. SQLite ignores it (its statements run in this process).
    public var statementTimeout: Duration = defaultStatementTimeout

    /// Connections per instance when not configured.
    public static let defaultPoolSize = 10
    /// The pool sizes accepted.
    public static let poolSizeRange = 1...200
    /// ``connectionWait`` when not configured: well inside the 20 s Apple gives the app's
    /// `signed-cards` round trip, and long enough for a pool busy with a burst.
    public static let defaultConnectionWait: Duration = .seconds(5)
    /// The waits accepted, in seconds: a new PostgreSQL connection (TCP, TLS and
    /// authentication to a remote server) can take a good part of a second.
    public static let connectionWaitRange = 1.0...60.0
    /// ``statementTimeout`` when not configured: far above what any of TMP's statements takes
    /// (milliseconds), and with ``defaultConnectionWait`` and the second's grace still inside
    /// the 20 s of the app's `signed-cards` round trip.
    public static let defaultStatementTimeout: Duration = .seconds(10)
    /// The statement timeouts accepted, in seconds (`pushprov prune` deletes in batches; a slow
    /// disk may want more than the default for those).
    public static let statementTimeoutRange = 1.0...300.0

    /// Creates a configuration.
    public init(location: Location, poolSize: Int = defaultPoolSize) {
        self.location = location
        self.poolSize = poolSize
    }

    /// Reads a database setting: a `postgres://` or `postgresql://` URL selects PostgreSQL,
    /// anything else is a SQLite file path.
    ///
    /// Throws a ``ConfigurationError`` for a malformed URL or a pool size outside
    /// ``poolSizeRange``; the message never contains the password.
    public init(parsing setting: String, poolSize: Int = defaultPoolSize) throws(ConfigurationError) {
        guard Self.poolSizeRange.contains(poolSize) else {
            throw ConfigurationError("database pool size must be from \(Self.poolSizeRange.lowerBound) to \(Self.poolSizeRange.upperBound) (got \(poolSize))")
        }
        // A value padded by an env file, or a URL of another scheme, must not become a SQLite
        // file named after it (and a URL's password must not be shown as that file's name).
        guard setting == setting.trimmingCharacters(in: .whitespacesAndNewlines) else {
            throw ConfigurationError("database must not begin or end with spaces or line breaks")
        }
        if PostgresURL.isPostgresURL(setting) {
            self.init(location: .postgres(try PostgresURL(parsing: setting)), poolSize: poolSize)
        } else {
            guard !setting.isEmpty else { throw ConfigurationError("database must be a SQLite file path or a postgres:// URL (got an empty value)") }
            if let scheme = Self.urlScheme(of: setting) {
                throw ConfigurationError("database URL scheme \(scheme) is not supported; use postgres:// or postgresql://, or a SQLite file path")
            }
            // A PostgreSQL URL mistyped (`postgres//…`, `postgres ://…`, `//user:pw@host/db`)
            // would otherwise become a SQLite file, its password part of the file's name.
            if setting.lowercased().hasPrefix("postgres") || setting.contains("://") || (setting.hasPrefix("//") && setting.contains("@")) {
                throw ConfigurationError("database looks like a mistyped PostgreSQL URL; write postgres://user:password@host:5432/database, or give a SQLite file path")
            }
            self.init(location: .sqlite(path: setting), poolSize: poolSize)
        }
    }

    /// The scheme of a setting that looks like a URL (`name:` then `//`, or a `name:` that
    /// holds `@`, as `jdbc:postgresql://…` or `postgress://…`), or nil for a file path.
    static func urlScheme(of setting: String) -> String? {
        guard let colon = setting.firstIndex(of: ":") else { return nil }
        let scheme = setting[..<colon]
        guard let first = scheme.first, first.isASCII, first.isLetter,
            scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+.-".contains($0)) })
        else { return nil }
        let rest = setting[setting.index(after: colon)...]
        return rest.hasPrefix("//") || rest.contains("@") ? String(scheme) : nil
    }

    /// What people see: the SQLite path, or the PostgreSQL URL without its password.
    public var description: String {
        switch location {
        case .sqlite(let path): path
        case .postgres(let url): url.description
        }
    }

    /// Opens the store this configuration names, without migrating it.
    ///
    /// A SQLite file's directory is created (mode 0700) when missing, a new file 0600, and a
    /// file that group or others can read or write, or that another user owns, is refused
    /// (``checkSQLiteFiles(at:user:logger:)``), as is one this process may not reach, read,
    /// write or create, naming what stands in the way (``sqliteAccessProblem(at:creating:)``). A PostgreSQL database is
    /// connected to once up front, so a wrong host, password or database name is a clear error
    /// here rather than a stalled first request. Call ``TMPStore/close()`` when done.
    public func openStore(logger: Logger) async throws -> any TMPStore {
        switch location {
        case .sqlite(let path):
            if let problem = Self.sqliteAccessProblem(at: path, creating: true) { throw ConfigurationError(problem) }
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) {
                do {
                    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                } catch {
                    let reason = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)?.localizedDescription ?? error.localizedDescription
                    throw ConfigurationError("cannot create the database's directory \(directory): \(reason)")
                }
            }
            // SQLite gives its -wal and -shm files the database file's mode: a new database
            // is created 0600 first, so none of them is readable by other users.
            if !FileManager.default.fileExists(atPath: path) {
                let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
                if descriptor >= 0 { close(descriptor) } else if errno != EEXIST {
                    throw ConfigurationError("cannot create the database file \(path): \(String(cString: strerror(errno)))")
                } else if let problem = Self.danglingLinkProblem(at: path) {
                    throw ConfigurationError(problem)
                }
            }
            try Self.checkSQLiteFiles(at: path, logger: logger)
            return try SQLiteStore(path: path, busyTimeout: connectionWait)
        case .postgres(let url):
            return try await PostgresStore.connect(url: url, poolSize: poolSize, connectionWait: connectionWait, statementTimeout: statementTimeout, logger: logger)
        }
    }

    /// The refusal of a `path` that is a symbolic link to a file that does not exist: SQLite
    /// would create the target with the default mode (readable by others), out of reach of the
    /// 0600 a new database file is made with. Nil for anything else.
    static func danglingLinkProblem(at path: String) -> String? {
        guard (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) != nil, !FileManager.default.fileExists(atPath: path) else { return nil }
        let target = endOfLinks(from: path)
        let quoted = "'" + target.replacingOccurrences(of: "'", with: "'\\''") + "'"
        return "the database path \(path) is a symbolic link to \(target), which does not exist: create that file first (mode 0600, for example `install -m 600 /dev/null \(quoted)`), or name the file itself"
    }

    /// Where the symbolic links from `path` lead, as an absolute path: each link's relative
    /// target is taken from the link's own directory, and at most 40 links are followed (a
    /// loop ends there).
    static func endOfLinks(from path: String) -> String {
        var current = path.hasPrefix("/") ? path : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path)
        for _ in 0..<40 {
            guard let next = try? FileManager.default.destinationOfSymbolicLink(atPath: current) else { break }
            current = next.hasPrefix("/") ? next : ((current as NSString).deletingLastPathComponent as NSString).appendingPathComponent(next)
        }
        return current
    }

    /// A store failure in one line for an operator: the server's message for PostgreSQL
    /// (postgres-nio's own text hides it), else the error's description.
    public static func reason(_ error: any Error) -> String {
        // SQLite's own message, without the statement GRDB appends (a migration's is long).
        if let error = error as? DatabaseError { return error.message ?? "SQLite error \(error.resultCode.rawValue)" }
        return PostgresStore.reason(error)
    }

    /// Applies `store`'s pending migrations as `serve` and `pushprov migrate` do: a PostgreSQL
    /// migration waits at most ``migrationLockTimeout`` for each table lock, and giving up is
    /// a ``ConfigurationError`` of one line.
    package func migrate(_ store: any TMPStore) async throws -> [String] {
        do {
            if let postgres = store as? PostgresStore {
                return try await postgres.migrate(lockTimeout: migrationLockTimeout)
            }
            return try await store.migrate()
        } catch let timeout as PostgresStore.MigrationLockTimeout {
            throw ConfigurationError(timeout.description)
        }
    }

    /// Opens the store and brings its schema up to date: applies pending migrations when
    /// `migrate` is true, and otherwise refuses a schema with pending migrations, saying
    /// `pendingAdvice` (what to do about them).
    ///
    /// - Returns: The store and the names of the migrations this call applied.
    /// What to do with a database a newer version migrated (migrations this one does not know).
    public enum NewerSchema: Sendable {
        /// Refuse it: for what writes to it on its own terms (migrating, pruning, re-encrypting).
        case refuse
        /// Log a warning and go on: for serving during a rolling deployment, where instances of
        /// the previous version keep running, and restarting, while the new one has migrated.
        case warn
    }

    /// The refusal (or, serving, the warning) for a database with `unknown` migrations.
    func newerSchemaMessage(_ unknown: [String]) -> String {
        "database \(self) has migrations this version of pushprov does not know (\(unknown.joined(separator: ", "))): a newer version migrated it"
    }

    public func openMigratedStore(migrate: Bool, newerSchema: NewerSchema = .refuse, logger: Logger, pendingAdvice: String = "run `pushprov migrate --database …` first, or start without --no-migrate") async throws -> (store: any TMPStore, applied: [String]) {
        // A SQLite database that will be refused is refused before the store opens it: opening
        // it would already write to it (switch it to WAL, give an empty file a header), and a
        // missing one would be created.
        if !migrate, case .sqlite(let path) = location {
            if let problem = Self.sqliteAccessProblem(at: path, creating: false) { throw ConfigurationError(problem) }
            if FileManager.default.fileExists(atPath: path) { try Self.checkSQLiteFiles(at: path, logger: logger) }
            if let pending = Self.pendingSQLiteMigrations(at: path), !pending.isEmpty {
                throw ConfigurationError("database \(self) lacks migrations \(pending.joined(separator: ", ")); \(pendingAdvice)")
            }
            if newerSchema == .refuse, let unknown = Self.unknownSQLiteMigrations(at: path), !unknown.isEmpty {
                throw ConfigurationError("\(newerSchemaMessage(unknown)); run that version (or a later one), never an older one, on it")
            }
        }
        let store = try await openStore(logger: logger)
        do {
            // A schema a newer version migrated may have tables or columns this code does not
            // read or write as they now are: neither served nor maintained by this version.
            let unknown = try await store.unknownMigrations()
            if !unknown.isEmpty {
                switch newerSchema {
                case .refuse:
                    throw ConfigurationError("\(newerSchemaMessage(unknown)); run that version (or a later one), never an older one, on it")
                case .warn:
                    logger.warning("\(newerSchemaMessage(unknown)); serving it as it is (a rolling deployment), but replace this instance with that version (or a later one) soon: this one may not read or write the newer schema correctly")
                }
            }
            if migrate {
                return (store, try await self.migrate(store))
            }
            let pending = try await store.pendingMigrations()
            guard pending.isEmpty else {
                throw ConfigurationError("database \(self) lacks migrations \(pending.joined(separator: ", ")); \(pendingAdvice)")
            }
            return (store, [])
        } catch let error as ConfigurationError {
            await store.close()
            throw error
        } catch is CancellationError {
            await store.close()
            throw CancellationError()
        } catch {
            // Any other failure (the database refusing to create the migrations table, say) as
            // one line saying which database and the server's reason: PostgreSQL's client
            // describes its errors only generically.
            await store.close()
            throw ConfigurationError("database \(self): \(Self.reason(error))")
        }
    }
}

extension DatabaseConfiguration {
    /// The migrations applied to the SQLite database at `path` that this version does not know,
    /// read without writing to it; nil when there is no file or it cannot be read that way.
    static func unknownSQLiteMigrations(at path: String) -> [String]? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let migrator = SQLiteStore.migrator
        var configuration = Configuration()
        configuration.readonly = true
        guard let queue = try? DatabaseQueue(path: path, configuration: configuration) else { return nil }
        defer { try? queue.close() }
        return try? queue.read { db in try migrator.appliedIdentifiers(db).subtracting(migrator.migrations).sorted() }
    }

    /// The migrations the SQLite database at `path` lacks, read without writing to it: all of
    /// them when there is no file. Nil when it cannot be read that way (a read-only connection
    /// cannot open a WAL database whose `-shm` is missing, say): the store then tells.
    static func pendingSQLiteMigrations(at path: String) -> [String]? {
        let migrator = SQLiteStore.migrator
        guard FileManager.default.fileExists(atPath: path) else { return migrator.migrations }
        var configuration = Configuration()
        configuration.readonly = true
        guard let queue = try? DatabaseQueue(path: path, configuration: configuration) else { return nil }
        defer { try? queue.close() }
        return try? queue.read { db in
            let applied = try migrator.appliedIdentifiers(db)
            return migrator.migrations.filter { !applied.contains($0) }
        }
    }
}
