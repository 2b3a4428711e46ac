import Foundation
import GRDB
import Logging
import SDKTestSupport
import TMPTestSupport
import Testing
@testable import TokenPlatform

@Suite("Database configuration")
struct DatabaseConfigurationTests {
    static let secret = "s3cr#t:p@ss/word"
    static var encodedSecret: String { secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }

    @Test func aPostgresURLIsParsedAndNeverShowsItsPassword() throws {
        let url = try PostgresURL(parsing: "postgresql://tmp%40issuer:\(Self.encodedSecret)@db.internal:6543/pushprov?sslmode=require")
        #expect(url == PostgresURL(host: "db.internal", port: 6543, username: "tmp@issuer", password: Self.secret, database: "pushprov", tls: .require))
        #expect(url.description == "postgres://tmp%40issuer@db.internal:6543/pushprov?sslmode=require")
        var dumped = ""
        dump(url, to: &dumped)
        for shown in [url.description, String(reflecting: url), "\(url)", dumped, DatabaseConfiguration(location: .postgres(url)).description] {
            #expect(!shown.contains("s3cr") && !shown.contains(Self.encodedSecret), "\(shown)")
        }
        let defaults = try PostgresURL(parsing: "postgres://tmp@localhost/pushprov")
        #expect(defaults.port == 5432 && defaults.password == nil && defaults.tls == .prefer)
        #expect(try PostgresURL(parsing: "postgres://u:p@[::1]:5433/d").host == "::1")
    }

    @Test(arguments: [
        ("postgres://", "no host"),
        ("postgres://user:\(secret)@host/db", "not a valid URL"),
        ("postgres://user:pw@host:99999/db", "port must be from 1 to 65535"),
        ("postgres://user:pw@host:54x/db", "not a valid URL"),
        ("postgres://host:5432/db", "no user name"),
        ("postgres://user:pw@host:5432", "needs one database name"),
        ("postgres://user:pw@host:5432/a/b", "needs one database name"),
        ("postgres://user:pw@host/db?sslmode=allow", "sslmode must be one of disable, prefer, require, verify-ca, verify-full"),
        ("postgres://user:pw@host/db?application_name=x", "parameter application_name is not supported; only sslmode and sslrootcert are"),
        ("postgres://user:pw@host/db?sslrootcert=/ca.pem", "sslrootcert needs sslmode=require, verify-ca or verify-full (with sslmode=prefer the server's certificate is not checked)"),
        ("postgres://user:pw@host/db?sslmode=disable&sslrootcert=/ca.pem", "sslrootcert needs sslmode=require, verify-ca or verify-full"),
        ("postgres://user:pw@host/db?sslmode=require&sslrootcert=", "sslrootcert needs the path of a PEM file"),
        ("postgres://user:pw@host/db?sslmode=require&sslmode=disable", "parameter sslmode is given more than once"),
        ("postgres://user:pw@host/db?sslmode=verify-ca", "sslmode=verify-ca needs sslrootcert=<PEM file of your CA>"),
    ])
    func aMalformedURLSaysWhatIsWrongWithoutThePassword(text: String, expected: String) {
        let error = #expect(throws: ConfigurationError.self) { try DatabaseConfiguration(parsing: text) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
        #expect(error?.message.contains("s3cr") == false)
    }

    @Test func theVerifyingModesAndARootCertificateFileAreParsedAndShown() throws {
        let full = try PostgresURL(parsing: "postgres://u:pw@db.internal/pushprov?sslmode=verify-full&sslrootcert=/etc/ssl/private%20ca.pem")
        #expect(full.tls == .verifyFull && full.tls.verifiesServer)
        #expect(full.rootCertificatesPath == "/etc/ssl/private ca.pem")
        #expect(full.description == "postgres://u@db.internal:5432/pushprov?sslmode=verify-full&sslrootcert=/etc/ssl/private%20ca.pem")
        // What the description shows parses back to the same URL, password aside.
        #expect(try PostgresURL(parsing: full.description) == PostgresURL(host: "db.internal", username: "u", password: nil, database: "pushprov", tls: .verifyFull, rootCertificatesPath: "/etc/ssl/private ca.pem"))
        #expect(try PostgresURL(parsing: "postgres://u@h/d?sslmode=verify-ca&sslrootcert=/ca.pem").tls == .verifyCA)
        #expect(try PostgresURL(parsing: "postgres://u@h/d?sslmode=require").tls.verifiesServer)
        #expect(try !PostgresURL(parsing: "postgres://u@h/d").tls.verifiesServer)
        #expect(try !PostgresURL(parsing: "postgres://u@h/d?sslmode=disable").tls.verifiesServer)
    }

    @Test func anythingButAURLIsASQLitePath() throws {
        #expect(try DatabaseConfiguration(parsing: "/var/lib/pushprov/tmp.sqlite").location == .sqlite(path: "/var/lib/pushprov/tmp.sqlite"))
        #expect(try DatabaseConfiguration(parsing: "relative.sqlite").description == "relative.sqlite")
        #expect(throws: ConfigurationError.self) { try DatabaseConfiguration(parsing: "") }
        #expect(try DatabaseConfiguration(parsing: "data:old/tmp.sqlite").location == .sqlite(path: "data:old/tmp.sqlite"))
    }

    @Test(arguments: [
        (" postgres://u:\(secret)@host/db", "database must not begin or end with spaces or line breaks"),
        ("postgres://u:\(secret)@host/db\n", "database must not begin or end with spaces or line breaks"),
        ("postgress://u:\(secret)@host/db", "database URL scheme postgress is not supported; use postgres:// or postgresql://, or a SQLite file path"),
        ("jdbc:postgresql://u:\(secret)@host/db", "database URL scheme jdbc is not supported; use postgres:// or postgresql://, or a SQLite file path"),
        ("mysql:u:\(secret)@host", "database URL scheme mysql is not supported; use postgres:// or postgresql://, or a SQLite file path"),
        ("postgres//u:\(secret)@db:5432/p", "database looks like a mistyped PostgreSQL URL; write postgres://user:password@host:5432/database, or give a SQLite file path"),
        ("postgres ://u:\(secret)@db/p", "database looks like a mistyped PostgreSQL URL; write postgres://user:password@host:5432/database, or give a SQLite file path"),
        ("//u:\(secret)@db/p", "database looks like a mistyped PostgreSQL URL; write postgres://user:password@host:5432/database, or give a SQLite file path"),
    ])
    func aPaddedOrForeignURLIsNotTakenForAFileName(text: String, expected: String) {
        let error = #expect(throws: ConfigurationError.self) { try DatabaseConfiguration(parsing: text) }
        #expect(error?.message == expected)
    }

    @Test func aNewSQLiteDatabaseAndItsLogAreReadableByTheOwnerOnly() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-dbmode-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("tmp.sqlite").path
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let opened = try await DatabaseConfiguration(parsing: path).openMigratedStore(migrate: true, logger: logger)
        defer { Task { await opened.store.close() } }
        for file in [path, path + "-wal", path + "-shm"] {
            let mode = try #require(FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
            #expect(mode & 0o077 == 0, "\(file) has mode \(String(mode, radix: 8))")
        }
    }

    /// A failure of the database itself while it is migrated (here a table a migration would
    /// create is there already, made by something else) is one line naming the database and
    /// the reason, not the client library's generic description.
    @Test func aMigrationTheDatabaseRefusesIsOneLineWithItsReason() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-dbrefuse-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("other.sqlite").path
        let other = try DatabaseQueue(path: path)
        try await other.write { try $0.execute(sql: "CREATE TABLE card (something_else TEXT)") }
        try other.close()
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let refusal = await #expect(throws: ConfigurationError.self) { _ = try await DatabaseConfiguration(parsing: path).openMigratedStore(migrate: true, logger: logger) }
        #expect(refusal?.message.hasPrefix("database \(path): ") == true, "\(refusal?.message ?? "")")
        #expect(refusal?.message.contains("already exists") == true, "\(refusal?.message ?? "")")
        // One line: SQLite's message, not the migration's statement after it.
        #expect(refusal?.message.contains("\n") == false && refusal?.message.contains("CREATE") == false, "\(refusal?.message ?? "")")
    }

    @Test func aSymbolicLinkToAMissingDatabaseFileIsRefusedAndNothingIsCreated() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-dblink-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("tmp.sqlite").path
        let target = directory.appendingPathComponent("elsewhere.sqlite").path
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let error = await #expect(throws: ConfigurationError.self) {
            _ = try await DatabaseConfiguration(parsing: path).openMigratedStore(migrate: true, logger: logger)
        }
        #expect(error?.message.hasPrefix("the database path \(path) is a symbolic link to \(target), which does not exist") == true)
        #expect(error?.message.contains("install -m 600 /dev/null '\(target)'") == true)
        #expect(!FileManager.default.fileExists(atPath: target))

        // A relative link names its target from the link's directory, and a chain of links
        // names the file at its end.
        let relative = directory.appendingPathComponent("relative.sqlite").path
        try FileManager.default.createSymbolicLink(atPath: relative, withDestinationPath: "elsewhere.sqlite")
        let chained = directory.appendingPathComponent("chained.sqlite").path
        try FileManager.default.createSymbolicLink(atPath: chained, withDestinationPath: "relative.sqlite")
        for link in [relative, chained] {
            let error = await #expect(throws: ConfigurationError.self) {
                _ = try await DatabaseConfiguration(parsing: link).openMigratedStore(migrate: true, logger: logger)
            }
            #expect(error?.message.hasPrefix("the database path \(link) is a symbolic link to \(target), which does not exist") == true, "\(error?.message ?? "")")
        }
        #expect(!FileManager.default.fileExists(atPath: target))

        // Once the target exists (made 0600 by the operator), the link is followed.
        #expect(FileManager.default.createFile(atPath: target, contents: nil, attributes: [.posixPermissions: 0o600]))
        let opened = try await DatabaseConfiguration(parsing: path).openMigratedStore(migrate: true, logger: logger)
        await opened.store.close()
        #expect(try (FileManager.default.attributesOfItem(atPath: target)[.size] as? Int ?? 0) > 0)
    }

    @Test func thePoolSizeComesFromFlagOrEnvironmentAndIsBounded() throws {
        var settings = ServerSettings()
        settings.database = "postgres://u@h/d"
        #expect(try settings.resolveDatabase(environment: [:]).poolSize == DatabaseConfiguration.defaultPoolSize)
        #expect(try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE_POOL_SIZE": "32"]).poolSize == 32)
        settings.databasePoolSize = 4
        #expect(try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE_POOL_SIZE": "32"]).poolSize == 4)
        for bad in [0, 201] {
            settings.databasePoolSize = bad
            let error = #expect(throws: ConfigurationError.self) { try settings.resolveDatabase(environment: [:]) }
            #expect(error?.message == "database pool size must be a number from 1 to 200 (got \(bad))")
        }
        settings.databasePoolSize = nil
        #expect(throws: ConfigurationError.self) { try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE_POOL_SIZE": "many"]) }
    }

    @Test func theDatabaseWaitComesFromFlagOrEnvironmentAndIsBounded() throws {
        var settings = ServerSettings()
        settings.database = "postgres://u@h/d"
        #expect(try settings.resolveDatabase(environment: [:]).connectionWait == .seconds(5))
        #expect(try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE_WAIT": "2.5"]).connectionWait == .milliseconds(2500))
        settings.databaseWait = "1"
        #expect(try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE_WAIT": "2.5"]).connectionWait == .seconds(1))
        for bad in ["0", "0.5", "61", "-1", "soon", "nan", ""] {
            settings.databaseWait = bad
            let error = #expect(throws: ConfigurationError.self) { try settings.resolveDatabase(environment: [:]) }
            #expect(error?.message == "database wait must be a number of seconds from 1 to 60 (got \(bad))")
        }
        settings.databaseWait = nil
        settings.database = "/srv/tmp.sqlite"
        #expect(try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE_WAIT": "60"]).connectionWait == .seconds(60))
    }

    @Test func theStatementTimeoutComesFromFlagOrEnvironmentAndIsBounded() throws {
        var settings = ServerSettings()
        settings.database = "postgres://u@h/d"
        #expect(try settings.resolveDatabase(environment: [:]).statementTimeout == .seconds(10))
        #expect(try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE_STATEMENT_TIMEOUT": "2.5"]).statementTimeout == .milliseconds(2500))
        settings.databaseStatementTimeout = "300"
        #expect(try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE_STATEMENT_TIMEOUT": "2.5"]).statementTimeout == .seconds(300))
        for bad in ["0", "0.5", "301", "-1", "soon", "nan", "inf", ""] {
            settings.databaseStatementTimeout = bad
            let error = #expect(throws: ConfigurationError.self) { try settings.resolveDatabase(environment: [:]) }
            #expect(error?.message == "database statement timeout must be a number of seconds from 1 to 300 (got \(bad))")
        }
        settings.databaseStatementTimeout = nil
        // The wait and the timeout are separate settings.
        let both = try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE_WAIT": "3", "PUSHPROV_DATABASE_STATEMENT_TIMEOUT": "20"])
        #expect(both.connectionWait == .seconds(3))
        #expect(both.statementTimeout == .seconds(20))
    }

    @Test func aDurationInWholeMillisecondsIsNeverZero() {
        #expect(Duration.seconds(10).wholeMilliseconds == 10_000)
        #expect(Duration.milliseconds(2500).wholeMilliseconds == 2500)
        #expect(Duration.microseconds(1500).wholeMilliseconds == 1)
        // PostgreSQL reads 0 as "no limit".
        #expect(Duration.microseconds(10).wholeMilliseconds == 1)
    }

    @Test func theDatabaseSettingFallsBackToTheEnvironmentThenTheDataDirectory() throws {
        var settings = ServerSettings()
        settings.dataDirectory = "/srv/tmp"
        #expect(try settings.resolveDatabase(environment: [:]).location == .sqlite(path: "/srv/tmp/pushprov.sqlite"))
        let fromEnvironment = try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE": "postgres://tmp:\(Self.encodedSecret)@db/pushprov"])
        #expect(fromEnvironment.description == "postgres://tmp@db:5432/pushprov")
        settings.database = "/other.sqlite"
        #expect(try settings.resolveDatabase(environment: ["PUSHPROV_DATABASE": "postgres://tmp@db/pushprov"]).location == .sqlite(path: "/other.sqlite"))
    }

    @Test func theStartupLineShowsThePostgresDatabaseWithoutPassword() throws {
        var settings = ServerSettings()
        let dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-dbconfig-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        settings.dataDirectory = dataDirectory
        settings.database = "postgres://tmp:\(Self.encodedSecret)@db.internal:5432/pushprov"
        settings.migrate = false
        let configuration = try settings.resolve(environment: [:])
        #expect(configuration.startupLine.contains("database postgres://tmp@db.internal:5432/pushprov · mode embedded"))
        #expect(!configuration.startupLine.contains("s3cr"))
        #expect(configuration.migrateOnStart == false)
    }

    @Test func openingWithoutMigratingRefusesAnOutdatedSchemaAndMigratingReportsWhatRan() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-dbconfig-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("new/tmp.sqlite").path
        let database = try DatabaseConfiguration(parsing: path)
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let refusal = await #expect(throws: ConfigurationError.self) { _ = try await database.openMigratedStore(migrate: false, logger: logger) }
        #expect(refusal?.message == "database \(path) lacks migrations v1, v2, v3, v4, v5, v6, v7, v8, v9, v10; run `pushprov migrate --database …` first, or start without --no-migrate")
        // Refused without being created.
        #expect(!FileManager.default.fileExists(atPath: path))
        // An empty file (what `install -m 600 /dev/null` makes) is refused without a byte
        // written to it: opening the store would have given it a header and a -wal.
        let emptyPath = folder.appendingPathComponent("empty.sqlite").path
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: emptyPath, contents: nil, attributes: [.posixPermissions: 0o600]))
        await #expect(throws: ConfigurationError.self) { _ = try await DatabaseConfiguration(parsing: emptyPath).openMigratedStore(migrate: false, logger: logger) }
        #expect((try FileManager.default.attributesOfItem(atPath: emptyPath)[.size] as? Int) == 0)
        #expect(!FileManager.default.fileExists(atPath: emptyPath + "-wal"))
        let first = try await database.openMigratedStore(migrate: true, logger: logger)
        #expect(first.applied == ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10"])
        await first.store.close()
        let second = try await database.openMigratedStore(migrate: false, logger: logger)
        #expect(second.applied.isEmpty)
        #expect(try await second.store.migrate().isEmpty)
    }

    /// A database a newer version migrated is refused, migrating or not, and left as it was.
    @Test func aDatabaseANewerVersionMigratedIsRefused() async throws {
        let file = TemporarySQLiteFile("pushprov-newer")
        defer { file.remove() }
        let database = try DatabaseConfiguration(parsing: file.path)
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let first = try await database.openMigratedStore(migrate: true, logger: logger)
        #expect(try await first.store.unknownMigrations().isEmpty)
        await first.store.close()
        let queue = try DatabaseQueue(path: file.path)
        try await queue.write { db in try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99'), ('v100')") }
        try queue.close()
        for migrate in [true, false] {
            let refusal = await #expect(throws: ConfigurationError.self) { _ = try await database.openMigratedStore(migrate: migrate, logger: logger) }
            #expect(refusal?.message == "database \(file.path) has migrations this version of pushprov does not know (v100, v99): a newer version migrated it; run that version (or a later one), never an older one, on it")
        }
        // Serving (a rolling deployment) goes on, with a warning naming them.
        let warnings = Locked<[String]>([])
        let recording = TestTMP.logger("test", into: warnings)
        for migrate in [true, false] {
            let served = try await database.openMigratedStore(migrate: migrate, newerSchema: .warn, logger: recording)
            await served.store.close()
        }
        #expect(warnings.current.filter { $0.contains("has migrations this version of pushprov does not know (v100, v99): a newer version migrated it; serving it as it is") }.count == 2, "\(warnings.current)")
        let store = try SQLiteStore(path: file.path)
        #expect(try await store.unknownMigrations() == ["v100", "v99"])
        #expect(try await store.pendingMigrations().isEmpty)
        await store.close()
    }
}

/// A SQLite file migrated up to `migration` and filled by `seed` (rows written the way that
/// version wrote them); the body gets a store on it, closed afterwards.
func withSQLiteDatabase(at migration: String, seed: @escaping @Sendable (Database) throws -> Void, _ body: (SQLiteStore) async throws -> Void) async throws {
    let file = TemporarySQLiteFile("pushprov-\(migration)")
    defer { file.remove() }
    let queue = try DatabaseQueue(path: file.path)
    try SQLiteStore.migrator.migrate(queue, upTo: migration)
    try await queue.write(seed)
    try queue.close()
    let store = try SQLiteStore(path: file.path)
    try await body(store)
    await store.close()
}

@Suite("SQLite migration v2")
struct SQLiteSealAuditMigrationTests {
    @Test func sealAuditRowsWrittenBeforeV2AppearOnceInTheTrailAfterIt() async throws {
        // A database at v1 with one seal written the v1 way: attempt row plus audit row.
        try await withSQLiteDatabase(at: "v1", seed: { db in
            try db.execute(sql: "INSERT INTO provisioning_attempt VALUES ('jti-1', 'c1', 'alice', 'PHONE', 'nh', 'abababababababababab', '2026-01-01 10:00:00.000', '2026-01-01 10:10:00.000')")
            try db.execute(sql: "INSERT INTO audit_event (at, actor, action, subject, detail) VALUES ('2026-01-01 10:00:00.000', 'user:alice', 'card.seal', 'card:c1', 'sealed for PHONE; leaf abababababababab')")
            try db.execute(sql: "INSERT INTO audit_event (at, actor, action, subject, detail) VALUES ('2026-01-01 11:00:00.000', 'issuer', 'card.status', 'card:c1', 'ACTIVE -> BLOCKED')")
        }) { store in
            let applied = try await store.migrate()
            #expect(applied == ["v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10"])
            let trail = try await store.auditEntries(subject: "card:c1")
            #expect(trail.map(\.action) == ["card.seal", "card.status"])
            #expect(trail.first?.detail == "sealed for PHONE; leaf abababababababab")
            #expect(trail.first?.actor == "user:alice")
        }
    }
}

@Suite("SQLite migration v3")
struct SQLiteAtOddsMigrationTests {
    @Test func tokensAlreadyAtOddsWithTheirCardStartTheirClockAtTheUpgrade() async throws {
        // A database at v2: a blocked card with an active token (its suspension was never
        // confirmed), an inactive one, and an active card's active token.
        try await withSQLiteDatabase(at: "v2", seed: { db in
            for (card, status, hash) in [("c1", "BLOCKED", "h1"), ("c2", "ACTIVE", "h2")] {
                try db.execute(sql: """
                    INSERT INTO card VALUES (?, 'alice', 'v1.k.AAAA', ?, '1111', ?, '12/29', 'Alice', 'VISA', 'Gold', NULL, ?, '2026-01-01 10:00:00.000', '2026-01-01 10:00:00.000')
                    """, arguments: [card, hash, "PUR-\(card)", status])
            }
            for (token, card, status) in [("T1", "c1", "ACTIVE"), ("T2", "c1", "INACTIVE"), ("T3", "c2", "ACTIVE")] {
                try db.execute(sql: """
                    INSERT INTO token VALUES (?, ?, ?, 'alice', 'PHONE', ?, 'YELLOW', NULL, NULL, '2026-01-01 10:00:00.000', '2026-01-01 10:00:00.000')
                    """, arguments: [token, card, "PUR-\(card)", status])
            }
        }) { store in
            let before = Date()
            let applied = try await store.migrate()
            #expect(applied == ["v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10"])
            #expect(try await store.tokensAtOddsWithTheirCard(since: before.addingTimeInterval(-60), limit: 10).isEmpty)
            #expect(try await store.tokensAtOddsWithTheirCard(since: Date().addingTimeInterval(1), limit: 10).map(\.tokenUniqueReference) == ["T1"])
        }
    }
}

@Suite("SQLite migration v6")
struct SQLiteEventIdMigrationTests {
    @Test func eventIdsBeforeV6StayDuplicatesForTheirTokenAndDecisionsBeforeItAreNotRepeatedForRetries() async throws {
        // A database at v5: a token created by event e1, and request r1 approved on activation
        // data ad-1, both written the v5 way (no event type, no activation data id).
        try await withSQLiteDatabase(at: "v5", seed: { db in
            try db.execute(sql: """
                INSERT INTO card VALUES ('c1', 'alice', 'v1.k.AAAA', 'h1', '1111', 'PUR-c1', '12/29', 'Alice', 'VISA', 'Gold', NULL, 'ACTIVE', '2026-01-01 10:00:00.000', '2026-01-01 10:00:00.000')
                """)
            try db.execute(sql: """
                INSERT INTO token (token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status, authorization_path, created_at, updated_at)
                VALUES ('T1', 'c1', 'PUR-c1', 'alice', 'PHONE', 'INACTIVE', 'YELLOW', '2026-01-01 10:00:00.000', '2026-01-01 10:00:00.000')
                """)
            try db.execute(sql: "INSERT INTO token_event (event_id, token_unique_reference, received_at) VALUES ('e1', 'T1', '2026-01-01 10:00:00.000')")
            try db.execute(sql: """
                INSERT INTO tokenization_decision (request_id, pan_unique_reference, device_type, decision, reason, decided_at)
                VALUES ('r1', 'PUR-c1', 'PHONE', 'APPROVED', 'activation_data_valid', '2026-01-01 10:00:00.000')
                """)
        }) { store in
            #expect(try await store.migrate() == ["v6", "v7", "v8", "v9", "v10"])
            // e1's type is unknown: any event of T1 with that id is the duplicate it was before.
            let again = try await store.applyTokenEvent(eventId: "e1", event: .activated, tokenReference: "T1", audit: TMPStoreContractTests.audit("token:T1")) { _, _ in
                .update(status: .active, suspendedBy: nil, tokenLast4: nil)
            }
            guard case .duplicate(let token) = again else { Issue.record("expected a duplicate, got \(again)"); return }
            #expect(token?.status == .inactive)
            // Another token with it is refused, naming no event.
            let other = try await store.applyTokenEvent(eventId: "e1", event: .created, tokenReference: "T2", audit: TMPStoreContractTests.audit("token:T2")) { _, _ in
                .insert(TMPStoreContractTests.token("T2"))
            }
            #expect(other == .eventIdReused(tokenReference: "T1", event: nil))
            #expect(try await store.tokenizationDecision(requestId: "r1")?.activationDataId == nil)
            #expect(try await store.tokenizationDecision(requestId: "r1")?.decision == .approved)
            // Which activation data it used up is unknown, so a retry of r1 cannot be told from a
            // replay under r1's id: it is declined, as a replay is.
            #expect(try await store.tokenizationDecision(requestId: "r1", usingUp: "ad-1") == nil)
        }
    }
}

@Suite("SQLite migrations from several processes")
struct SQLiteConcurrentMigrationTests {
    @Test func twoStoresMigratingOneNewFileTogetherBothSucceedAndApplyEachMigrationOnce() async throws {
        // Two processes started together on one new database file (two connection pools here):
        // each reads which migrations are applied, then applies the rest one transaction at a
        // time, so the second can find a migration applied after it looked.
        for round in 0..<12 {
            let file = TemporarySQLiteFile("pushprov-race-\(round)")
            defer { file.remove() }
            let stores = [try SQLiteStore(path: file.path), try SQLiteStore(path: file.path)]
            let applied = try await withThrowingTaskGroup(of: [String].self) { group in
                for store in stores { group.addTask { try await store.migrate() } }
                return try await group.reduce(into: []) { $0.append(contentsOf: $1) }
            }
            #expect(Set(applied) == Set(SQLiteStore.migrator.migrations), "round \(round)")
            #expect(applied.count == SQLiteStore.migrator.migrations.count, "each migration reported by the store that applied it (round \(round)): \(applied)")
            for store in stores {
                #expect(try await store.pendingMigrations().isEmpty)
                await store.close()
            }
        }
    }
}
