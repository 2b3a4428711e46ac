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
            // A unique key another transaction took first (23505), every time.
            attempts.withValue { $0 = 0 }
            let keyRace = await #expect(throws: DatabaseUnavailable.self) {
                try await store.transaction { connection in
                    attempts.withValue { $0 += 1 }
                    try await connection.query("CREATE TEMPORARY TABLE IF NOT EXISTS race (id int PRIMARY KEY)", logger: PostgresTestDatabase.logger)
                    try await connection.query("INSERT INTO race VALUES (1), (1)", logger: PostgresTestDatabase.logger)
                }
            }
            #expect(attempts.current == PostgresStore.maximumAttempts)
            #expect(keyRace?.reason.contains("lost its race") == true)
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
