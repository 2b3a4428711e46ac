import Foundation
import PostgresNIO
import ProvisioningModels
import Testing
import TokenPlatform

/// What only PostgreSQL has: a server to connect to, migrations shared by instances, tables to
/// inspect. The storage contract itself runs in `TMPStoreContractTests`.
@Suite("PostgreSQL store", .enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(3)))
struct PostgresStoreTests {
    @Test func migrationsAreNamedRecordedAndAppliedOnceWhenInstancesStartTogether() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            var stores: [PostgresStore] = []
            for _ in 0..<3 {
                stores.append(try await PostgresStore.connect(url: url, poolSize: 2, connectionWait: PostgresTestDatabase.connectionWait, schema: schema, logger: PostgresTestDatabase.logger))
            }
            #expect(try await stores[0].pendingMigrations() == ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10"])
            let applied = try await withThrowingTaskGroup(of: [String].self) { group in
                for store in stores { group.addTask { try await store.migrate() } }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(applied == ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10"])
            for store in stores {
                #expect(try await store.pendingMigrations().isEmpty)
                await store.close()
            }
            let recorded = try await PostgresTestDatabase.withConnection(url) { connection in
                try await connection.query("SELECT name FROM \(unescaped: schema).pushprov_migrations", logger: PostgresTestDatabase.logger).collect().map { try $0.decode(String.self) }
            }
            #expect(recorded == ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10"])
        }
    }

    /// A migration a newer version applied is reported as unknown.
    @Test func migrationsANewerVersionAppliedAreReported() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let store = try await PostgresStore.connect(url: url, poolSize: 2, connectionWait: PostgresTestDatabase.connectionWait, schema: schema, logger: PostgresTestDatabase.logger)
            #expect(try await store.unknownMigrations().isEmpty)
            try await store.migrate()
            #expect(try await store.unknownMigrations().isEmpty)
            try await PostgresTestDatabase.execute(url, "INSERT INTO \(unescaped: schema).pushprov_migrations (name) VALUES ('v99')")
            #expect(try await store.unknownMigrations() == ["v99"])
            #expect(try await store.pendingMigrations().isEmpty)
            await store.close()
        }
    }

    @Test func aMigrationBlockedByALongTransactionGivesUpWithoutChangingAnything() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            // The server's own connection wait: the time bound below is about the migration.
            let store = try await PostgresStore.connect(url: url, poolSize: 2, schema: schema, logger: PostgresTestDatabase.logger)
            #expect(try await store.migrate(lockTimeout: .seconds(5), upTo: "v3") == ["v1", "v2", "v3"])
            // Another session reads the token table in a transaction it keeps open: v4's
            // ALTER TABLE needs the table to itself.
            let error = try await PostgresTestDatabase.withConnection(url) { other in
                try await other.query("BEGIN", logger: PostgresTestDatabase.logger)
                _ = try await other.query("SELECT count(*) FROM \(unescaped: schema).token", logger: PostgresTestDatabase.logger).collect()
                let started = ContinuousClock.now
                let error = await #expect(throws: PostgresStore.MigrationLockTimeout.self) { try await store.migrate(lockTimeout: .milliseconds(300)) }
                #expect(ContinuousClock.now - started < .seconds(30), "gave up instead of waiting for the other session")
                try await other.query("ROLLBACK", logger: PostgresTestDatabase.logger)
                return error
            }
            #expect(error?.migration == "v4")
            #expect(error?.description.contains("no migration was applied") == true)
            #expect(try await store.pendingMigrations() == Array(PostgresStore.migrationNames.dropFirst(3)))
            // `serve` and `pushprov migrate` (through the database configuration) say it in one line.
            var configuration = DatabaseConfiguration(location: .postgres(url))
            configuration.migrationLockTimeout = .milliseconds(300)
            let line = try await PostgresTestDatabase.withConnection(url) { other in
                try await other.query("BEGIN", logger: PostgresTestDatabase.logger)
                _ = try await other.query("SELECT count(*) FROM \(unescaped: schema).token", logger: PostgresTestDatabase.logger).collect()
                let refusal = await #expect(throws: ConfigurationError.self) { _ = try await configuration.migrate(store) }
                try await other.query("ROLLBACK", logger: PostgresTestDatabase.logger)
                return refusal?.message
            }
            #expect(line?.hasPrefix("migration v4 waited 0.3 s for a table lock") == true, "\(line ?? "")")
            // Once that session has ended, the same call applies the rest.
            #expect(try await store.migrate(lockTimeout: .milliseconds(300)) == Array(PostgresStore.migrationNames.dropFirst(3)))
            await store.close()
        }
    }

    @Test func eventIdsBeforeV6StayDuplicatesForTheirTokenAndDecisionsBeforeItAreNotRepeatedForRetries() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let store = try await PostgresStore.connect(url: url, poolSize: 2, connectionWait: PostgresTestDatabase.connectionWait, schema: schema, logger: PostgresTestDatabase.logger)
            #expect(try await store.migrate(lockTimeout: .seconds(5), upTo: "v5").last == "v5")
            _ = try await store.putCard(try TMPStoreContractTests.card("c1"), audit: TMPStoreContractTests.audit("card:c1"))
            // Rows written the v5 way: no event type, no activation data id.
            try await PostgresTestDatabase.withConnection(url) { connection in
                let logger = PostgresTestDatabase.logger
                let token = TMPStoreContractTests.token("T1")
                try await connection.query(
                    """
                    INSERT INTO \(unescaped: schema).token (token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status, authorization_path, created_at, updated_at)
                    VALUES ('T1', 'c1', 'PUR-c1', 'alice', 'PHONE', 'INACTIVE', 'YELLOW', \(token.createdAt), \(token.updatedAt))
                    """,
                    logger: logger
                )
                try await connection.query("INSERT INTO \(unescaped: schema).token_event (event_id, token_unique_reference, received_at) VALUES ('e1', 'T1', now())", logger: logger)
                try await connection.query(
                    """
                    INSERT INTO \(unescaped: schema).tokenization_decision (request_id, pan_unique_reference, device_type, decision, reason, decided_at)
                    VALUES ('r1', 'PUR-c1', 'PHONE', 'APPROVED', 'activation_data_valid', now())
                    """,
                    logger: logger
                )
            }
            #expect(try await store.migrate() == ["v6", "v7", "v8", "v9", "v10"])
            let again = try await store.applyTokenEvent(eventId: "e1", event: .activated, tokenReference: "T1", audit: TMPStoreContractTests.audit("token:T1")) { _, _ in
                .update(status: .active, suspendedBy: nil, tokenLast4: nil)
            }
            #expect(again == .duplicate(TMPStoreContractTests.token("T1")))
            let other = try await TMPStoreContractTests.insert(store, TMPStoreContractTests.token("T2"), event: "e1")
            #expect(other == .eventIdReused(tokenReference: "T1", event: nil))
            #expect(try await store.tokenizationDecision(requestId: "r1")?.activationDataId == nil)
            #expect(try await store.tokenizationDecision(requestId: "r1", usingUp: "ad-1") == nil)
            await store.close()
        }
    }

    @Test func aWrongPasswordIsAClearErrorThatNeverShowsIt() async throws {
        var url = try #require(PostgresTestDatabase.url)
        url.password = "not-the-password-7x"
        let error = await #expect(throws: ConfigurationError.self) {
            _ = try await PostgresStore.connect(url: url, logger: PostgresTestDatabase.logger)
        }
        let message = try #require(error?.message)
        #expect(message.contains("cannot connect to database postgres://\(url.username)@\(url.host):\(url.port)/\(url.database)"))
        #expect(message.contains("password authentication failed"), "\(message)")
        #expect(!message.contains("not-the-password-7x"))
    }

    @Test func aMissingDatabaseOrClosedPortIsAClearError() async throws {
        var missing = try #require(PostgresTestDatabase.url)
        missing.database = "pushprov_no_such_database"
        let noDatabase = await #expect(throws: ConfigurationError.self) {
            _ = try await PostgresStore.connect(url: missing, logger: PostgresTestDatabase.logger)
        }
        #expect(noDatabase?.message.contains("does not exist") == true, "\(noDatabase?.message ?? "")")
        var closed = try #require(PostgresTestDatabase.url)
        closed.port = 1
        let refused = await #expect(throws: ConfigurationError.self) {
            _ = try await PostgresStore.connect(url: closed, logger: PostgresTestDatabase.logger)
        }
        #expect(refused?.message.hasPrefix("cannot connect to database postgres://") == true)
    }

    @Test func noTableHoldsAPANInClear() async throws {
        let pans = ["4111111111111111", "5555555555554444", "378282246310005"]
        try await PostgresTestDatabase.withSchema { url, schema in
            let store = try await PostgresStore.connect(url: url, poolSize: 2, connectionWait: PostgresTestDatabase.connectionWait, schema: schema, logger: PostgresTestDatabase.logger)
            try await store.migrate()
            let platform = try TestPlatform(policy: .immediate, store: store, secrets: try TestPlatform.Secrets())
            try await platform.run { api in
                for (index, pan) in pans.dropLast().enumerated() {
                    try await api.putCard("c\(index)", user: "alice", pan: pan)
                    try await api.provision("c\(index)", user: "alice", pan: pan, token: "T\(index)")
                }
                // Replacing a PAN stores the new one (encrypted) and deactivates the old tokens.
                try await api.putCard("c0", user: "alice", pan: pans[2])
            }
            await store.close()
            let dump = try await PostgresTestDatabase.withConnection(url) { connection in
                let tables = try await connection.query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = \(schema)", logger: PostgresTestDatabase.logger)
                    .collect().map { try $0.decode(String.self) }
                var rows: [String] = []
                for table in tables {
                    let text = try await connection.query("SELECT row_to_json(t)::text FROM \(unescaped: schema).\(unescaped: table) t", logger: PostgresTestDatabase.logger).collect()
                    rows += try text.map { try $0.decode(String.self) }
                }
                return rows
            }
            #expect(dump.count > 10, "the scan must see the rows the scenario wrote")
            #expect(dump.contains { $0.contains("\"encrypted_pan\"") }, "cards are stored")
            for pan in pans {
                #expect(!dump.contains { $0.contains(pan) }, "a table holds a PAN in clear")
            }
        }
    }
}
