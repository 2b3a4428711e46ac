import NIOConcurrencyHelpers
import PostgresNIO

extension PostgresStore {
    /// One named schema step; its statements run in one transaction with the others pending.
    struct Migration: Sendable {
        var name: String
        var statements: [String]
    }

    /// The table recording applied migrations by name.
    static let migrationsTable = "pushprov_migrations"

    /// Advisory lock key held while migrating, so instances starting together migrate once
    /// ("pushprov" in ASCII).
    static let migrationLock: Int64 = 0x7075_7368_7072_6F76

    /// The schema, as named migrations applied in order: the same names and tables as
    /// ``SQLiteStore``'s. Identifiers use the "C" collation so ordering is bytewise, as in SQLite.
    static let migrations: [Migration] = [
        Migration(name: "v1", statements: [
            """
            CREATE TABLE card (
                external_card_id TEXT COLLATE "C" PRIMARY KEY,
                user_id TEXT COLLATE "C" NOT NULL,
                encrypted_pan TEXT NOT NULL,
                pan_lookup_hash TEXT NOT NULL UNIQUE,
                pan_last4 TEXT NOT NULL,
                pan_unique_reference TEXT COLLATE "C" NOT NULL UNIQUE,
                expiration TEXT NOT NULL,
                cardholder_name TEXT NOT NULL,
                network TEXT NOT NULL,
                product_title TEXT NOT NULL,
                art_id TEXT COLLATE "C",
                status TEXT NOT NULL CHECK (status IN ('ACTIVE', 'BLOCKED', 'CLOSED')),
                created_at TIMESTAMPTZ NOT NULL,
                updated_at TIMESTAMPTZ NOT NULL
            )
            """,
            "CREATE INDEX card_user ON card(user_id)",
            """
            CREATE TABLE token (
                token_unique_reference TEXT COLLATE "C" PRIMARY KEY,
                external_card_id TEXT COLLATE "C" NOT NULL REFERENCES card(external_card_id),
                pan_unique_reference TEXT COLLATE "C" NOT NULL,
                user_id TEXT COLLATE "C" NOT NULL,
                device_type TEXT NOT NULL CHECK (device_type IN ('PHONE', 'WATCH')),
                status TEXT NOT NULL CHECK (status IN ('ACTIVE', 'INACTIVE', 'SUSPENDED', 'DEACTIVATED')),
                authorization_path TEXT NOT NULL,
                suspended_by TEXT,
                token_last4 TEXT,
                created_at TIMESTAMPTZ NOT NULL,
                updated_at TIMESTAMPTZ NOT NULL
            )
            """,
            "CREATE INDEX token_card ON token(external_card_id)",
            "CREATE INDEX token_user ON token(user_id, token_unique_reference)",
            """
            CREATE TABLE token_event (
                event_id TEXT COLLATE "C" PRIMARY KEY,
                token_unique_reference TEXT COLLATE "C" NOT NULL,
                received_at TIMESTAMPTZ NOT NULL
            )
            """,
            """
            CREATE TABLE provisioning_attempt (
                activation_data_id TEXT COLLATE "C" PRIMARY KEY,
                external_card_id TEXT COLLATE "C" NOT NULL,
                user_id TEXT COLLATE "C" NOT NULL,
                device_type TEXT NOT NULL,
                nonce_hash TEXT NOT NULL,
                leaf_fingerprint TEXT NOT NULL,
                created_at TIMESTAMPTZ NOT NULL,
                expires_at TIMESTAMPTZ NOT NULL
            )
            """,
            """
            CREATE TABLE activation_data_use (
                activation_data_id TEXT COLLATE "C" PRIMARY KEY,
                used_at TIMESTAMPTZ NOT NULL
            )
            """,
            """
            CREATE TABLE tokenization_decision (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                request_id TEXT NOT NULL,
                pan_unique_reference TEXT COLLATE "C",
                device_type TEXT NOT NULL,
                decision TEXT NOT NULL,
                reason TEXT NOT NULL,
                decided_at TIMESTAMPTZ NOT NULL
            )
            """,
            "CREATE INDEX tokenization_decision_card ON tokenization_decision(pan_unique_reference, device_type, decided_at)",
            """
            CREATE TABLE card_art (
                art_id TEXT COLLATE "C" PRIMARY KEY,
                content_type TEXT NOT NULL,
                data BYTEA NOT NULL,
                updated_at TIMESTAMPTZ NOT NULL
            )
            """,
            """
            CREATE TABLE audit_event (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                at TIMESTAMPTZ NOT NULL,
                actor TEXT NOT NULL,
                action TEXT NOT NULL,
                subject TEXT COLLATE "C" NOT NULL,
                detail TEXT NOT NULL
            )
            """,
            "CREATE INDEX audit_subject ON audit_event(subject, id)",
        ]),
        // As SQLite's v2: a seal's audit entry is its provisioning attempt.
        Migration(name: "v2", statements: [
            "CREATE INDEX provisioning_attempt_card ON provisioning_attempt(external_card_id, created_at)",
            "DELETE FROM audit_event WHERE action = 'card.seal'",
        ]),
        // As SQLite's v3: since when each token has been at odds with its card's status.
        Migration(name: "v3", statements: [
            "ALTER TABLE token ADD COLUMN at_odds_since TIMESTAMPTZ",
            "CREATE INDEX token_at_odds ON token(at_odds_since) WHERE at_odds_since IS NOT NULL",
            "UPDATE token SET at_odds_since = now() WHERE \(AtOddsSQL.predicateBeforeV7)",
        ]),
        // As SQLite's v4: when the newest applied event of each token happened.
        Migration(name: "v4", statements: [
            "ALTER TABLE token ADD COLUMN last_event_ms BIGINT",
        ]),
        // As SQLite's v5: the pan-unique references cards had before their PAN was replaced, and
        // decisions by request id.
        Migration(name: "v5", statements: [
            """
            CREATE TABLE retired_pan_reference (
                pan_unique_reference TEXT COLLATE "C" PRIMARY KEY,
                external_card_id TEXT COLLATE "C" NOT NULL REFERENCES card(external_card_id),
                retired_at TIMESTAMPTZ NOT NULL
            )
            """,
            "CREATE INDEX tokenization_decision_request ON tokenization_decision(request_id, id)",
        ]),
        // As SQLite's v6: what each event id was used for, and the activation data each decision
        // used up.
        Migration(name: "v6", statements: [
            "ALTER TABLE token_event ADD COLUMN event TEXT",
            "ALTER TABLE tokenization_decision ADD COLUMN activation_data_id TEXT COLLATE \"C\"",
        ]),
        // As SQLite's v7: a command each token owes the token service that it has not confirmed.
        Migration(name: "v7", statements: [
            "ALTER TABLE token ADD COLUMN pending_command TEXT CHECK (pending_command IN ('SUSPEND', 'DEACTIVATE'))",
        ]),
        // As SQLite's v8: which instance's command for a token is in progress, until when.
        Migration(name: "v8", statements: [
            """
            CREATE TABLE token_command_lease (
                token_unique_reference TEXT COLLATE "C" PRIMARY KEY,
                holder TEXT NOT NULL,
                expires_at TIMESTAMPTZ NOT NULL
            )
            """,
        ]),
        // As SQLite's v9: when suspensions for the card's block were sent without their outcome
        // being recorded, the first and the last.
        Migration(name: "v9", statements: [
            "ALTER TABLE token ADD COLUMN block_suspension_first_sent_ms BIGINT",
            "ALTER TABLE token ADD COLUMN block_suspension_last_sent_ms BIGINT",
        ]),
        // As SQLite's v10: when each event said it happened.
        Migration(name: "v10", statements: [
            "ALTER TABLE token_event ADD COLUMN occurred_ms BIGINT",
        ]),
    ]

    /// The names of the schema's migrations, in order.
    public static var migrationNames: [String] { migrations.map(\.name) }

    /// How long a migration statement waits for a table lock by default.
    public static let defaultMigrationLockTimeout: Duration = .seconds(5)

    /// Applies the pending migrations, waiting at most ``defaultMigrationLockTimeout`` for
    /// each table lock; see ``migrate(lockTimeout:upTo:)``.
    @discardableResult
    public func migrate() async throws -> [String] {
        try await migrate(lockTimeout: Self.defaultMigrationLockTimeout)
    }

    /// Applies the pending migrations in one transaction under an advisory lock.
    ///
    /// Once it holds the advisory lock (instances starting together wait for each other
    /// there), each statement waits at most `lockTimeout` for the table locks it needs. A
    /// schema change such as `ALTER TABLE` needs its table to itself, and while it waits every
    /// other query on that table queues behind it, so a long transaction elsewhere would stall
    /// the live instances; instead the migration gives up, nothing is changed, and the error
    /// says so.
    @discardableResult
    public func migrate(lockTimeout: Duration) async throws -> [String] {
        try await migrate(lockTimeout: lockTimeout, upTo: nil)
    }

    /// ``migrate(lockTimeout:)`` stopping after the migration named `last` (tests of upgrades).
    @discardableResult
    package func migrate(lockTimeout: Duration, upTo last: String?) async throws -> [String] {
        precondition(lockTimeout > .zero, "the migration lock timeout must be positive")
        let milliseconds = lockTimeout.wholeMilliseconds
        let names = Self.migrations.map(\.name)
        let end = last.flatMap { names.firstIndex(of: $0) }.map { $0 + 1 } ?? names.count
        precondition(last == nil || names[end - 1] == last, "unknown migration \(last ?? "")")
        let current = NIOLockedValueBox<String?>(nil)
        do {
            // Unbounded by the statement timeout: instances starting together wait for each
            // other's migrations at the advisory lock, and a migration may rewrite a large table.
            return try await transaction(bounded: false) { connection in
                _ = try await connection.all("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
                try await connection.run(PostgresQuery(unsafeSQL: "SET LOCAL lock_timeout = \(milliseconds)"), logger: logger)
                try await connection.run("CREATE TABLE IF NOT EXISTS \(unescaped: Self.migrationsTable) (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())", logger: logger)
                let applied = try await Self.appliedMigrations(connection, logger: logger)
                var ran: [String] = []
                for migration in Self.migrations[..<end] where !applied.contains(migration.name) {
                    current.withLockedValue { $0 = migration.name }
                    for statement in migration.statements {
                        try await connection.run(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await connection.run("INSERT INTO \(unescaped: Self.migrationsTable) (name) VALUES (\(migration.name))", logger: logger)
                    ran.append(migration.name)
                }
                return ran
            }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55P03" {
            throw MigrationLockTimeout(migration: current.withLockedValue { $0 }, timeout: lockTimeout)
        }
    }

    /// A migration gave up waiting for a table lock; nothing was applied.
    public struct MigrationLockTimeout: Error, CustomStringConvertible {
        /// The migration that was waiting (nil: the migrations table itself, before any).
        public var migration: String?
        /// How long it waited.
        public var timeout: Duration

        /// One line for the operator.
        public var description: String {
            "\(migration.map { "migration \($0)" } ?? "reading the migrations table") waited \(timeout.formattedSeconds) for a table lock another session holds (a long transaction?) and gave up; no migration was applied. Run `pushprov migrate` again once that session ends"
        }
    }

    /// The migrations not applied yet (all of them on an empty database).
    public func pendingMigrations() async throws -> [String] {
        let applied = try await withConnection { connection in
            let exists = try await connection.run("SELECT to_regclass(\(Self.migrationsTable)) IS NOT NULL", logger: logger)
            guard try exists.first?.decode(Bool.self) == true else { return Set<String>() }
            return try await Self.appliedMigrations(connection, logger: logger)
        }
        return Self.migrations.map(\.name).filter { !applied.contains($0) }
    }

    /// Migrations applied to the database that this version does not know.
    public func unknownMigrations() async throws -> [String] {
        let applied = try await withConnection { connection in
            let exists = try await connection.run("SELECT to_regclass(\(Self.migrationsTable)) IS NOT NULL", logger: logger)
            guard try exists.first?.decode(Bool.self) == true else { return Set<String>() }
            return try await Self.appliedMigrations(connection, logger: logger)
        }
        return applied.subtracting(Self.migrations.map(\.name)).sorted()
    }

    private static func appliedMigrations(_ connection: PostgresConnection, logger: Logger) async throws -> Set<String> {
        var names = Set<String>()
        for row in try await connection.run("SELECT name FROM \(unescaped: migrationsTable)", logger: logger) {
            names.insert(try row.decode(String.self))
        }
        return names
    }
}
