import Foundation
import PostgresNIO
import SDKTestSupport
import Testing
@testable import TokenPlatform

/// A transaction that keeps losing its race is retried, and past the last attempt it is
/// reported as the database being unavailable for now (503, worth retrying), not as a bug.
@Suite("PostgreSQL contention", .enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(3)))
struct PostgresContentionTests {
    @Test func aTransactionThatKeepsLosingItsRaceIsUnavailableNotABug() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let store = try await PostgresStore.connect(url: url, poolSize: 2, schema: schema, logger: PostgresTestDatabase.logger)
            let attempts = Locked(0)
            // A row another transaction changed between two reads, every time.
            let readRace = await #expect(throws: DatabaseUnavailable.self) {
                try await store.transaction { _ in
                    attempts.withValue { $0 += 1 }
                    throw PostgresStore.LostRace()
                }
            }
            #expect(attempts.current == PostgresStore.maximumAttempts)
            #expect(readRace.map { DatabaseUnavailable.isUnavailable($0) } == true)
            #expect(readRace?.reason.contains("lost its race") == true)
            // A deadlock every time (40P01, raised here as the server would).
            attempts.withValue { $0 = 0 }
            await #expect(throws: DatabaseUnavailable.self) {
                try await store.transaction { connection in
                    attempts.withValue { $0 += 1 }
                    try await connection.query("DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = 'deadlock_detected'; END $$", logger: PostgresTestDatabase.logger)
                }
            }
            #expect(attempts.current == PostgresStore.maximumAttempts)
            // A unique key taken every time (23505) is retried, then stays what it is: more
            // likely a bug than a race lost eight times.
            attempts.withValue { $0 = 0 }
            let keyTaken = await #expect(throws: PSQLError.self) {
                try await store.transaction { connection in
                    attempts.withValue { $0 += 1 }
                    try await connection.query("CREATE TEMPORARY TABLE IF NOT EXISTS race (id int PRIMARY KEY)", logger: PostgresTestDatabase.logger)
                    try await connection.query("INSERT INTO race VALUES (1), (1)", logger: PostgresTestDatabase.logger)
                }
            }
            #expect(attempts.current == PostgresStore.maximumAttempts)
            #expect(keyTaken?.serverInfo?[.sqlState] == "23505")
            // Another failure is not retried, and stays what it is.
            attempts.withValue { $0 = 0 }
            await #expect(throws: PSQLError.self) {
                try await store.transaction { connection in
                    attempts.withValue { $0 += 1 }
                    try await connection.query("SELECT 1 / 0", logger: PostgresTestDatabase.logger)
                }
            }
            #expect(attempts.current == 1)
            await store.close()
        }
    }
}

/// PostgreSQL's pruning looks at a bounded range of blocks per batch, so no statement runs
/// into the statement timeout on a large table; a pass still reaches every old row, past
/// ranges holding only young ones, and counts them the same way.
@Suite("PostgreSQL pruning ranges", .enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(3)))
struct PostgresPruningRangeTests {
    static func day(_ days: Double) -> Date { TMPStoreContractTests.now.addingTimeInterval(days * 86_400) }

    @Test func aPassOfOneBlockRangesReachesEveryOldRowPastYoungOnes() async throws {
        try await StoreFactory.postgres.withStore { store in
            var postgres = try #require(store as? PostgresStore)
            postgres.historyScanBlocks = 1
            // Stored in this order: old rows, a run of young ones over several blocks, old again.
            let runs: [(count: Int, day: Double, name: String)] = [(150, -500, "old-a"), (400, 0, "young"), (60, -450, "old-b")]
            // One statement a run (610 calls of the store's would weigh on every suite running
            // beside this one).
            for run in runs {
                let at = Self.day(run.day)
                _ = try await postgres.transaction { connection in
                    try await connection.run(
                        """
                        INSERT INTO provisioning_attempt (activation_data_id, external_card_id, user_id, device_type, nonce_hash, leaf_fingerprint, created_at, expires_at)
                        SELECT \(run.name) || '-' || (n - 1), 'c1', 'alice', 'PHONE', 'nh', 'ab', \(at), \(at.addingTimeInterval(600)) FROM generate_series(1, \(run.count)) AS n
                        """,
                        logger: PostgresTestDatabase.logger
                    )
                }
            }
            let blocks = try await postgres.transaction { connection in
                try await connection.all("SELECT pg_relation_size('provisioning_attempt'::regclass) / current_setting('block_size')::bigint", logger: PostgresTestDatabase.logger).first?.decode(Int.self) ?? 0
            }
            try #require(blocks >= 4, "the rows span several blocks (\(blocks))")
            let cutoff = Self.day(-400)
            #expect(try await postgres.historyCount(.provisioningAttempts, before: cutoff) == 210)
            let totals = try await HistoryPruning(store: postgres, batchSize: 25).prune(before: cutoff)
            #expect(totals[.provisioningAttempts] == 210)
            #expect(try await postgres.historyCount(.provisioningAttempts, before: cutoff) == 0)
            #expect(try await postgres.historyCount(.provisioningAttempts, before: Self.day(1)) == 400, "the young rows stay")
            #expect(try await postgres.provisioningAttempt(activationDataId: "old-b-59") == nil)
            #expect(try await postgres.provisioningAttempt(activationDataId: "young-399") != nil)
        }
    }
}
