import Foundation
import Logging
import NIOCore
import PostgresNIO
import Testing
@testable import TokenPlatform

/// postgres-nio drops a statement written to a connection whose handlers have left the
/// pipeline (one event-loop turn after it closed) without ever answering it. The store checks
/// and writes in one turn of the connection's event loop, so no statement is ever written
/// there and every call ends.
@Suite(
    "A statement is never written to a connection that has closed",
    .enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun),
    .timeLimit(.minutes(2))
)
struct ClosedConnectionStatementTests {
    @Test func aConnectionClosedInTheTurnOfTheWriteRefusesTheStatement() async throws {
        let url = try #require(PostgresTestDatabase.url)
        try await PostgresTestDatabase.withConnection(url) { connection in
            // The close lands in the very turn of the event loop that would write the statement
            // (as a server's reset read in that turn would).
            let answer = PostgresConnection.submit("SELECT 1", on: connection, logger: PostgresTestDatabase.logger) { connection in
                let _: EventLoopFuture<Void> = connection.close()
                return !connection.isClosed
            }
            // Written anyway, postgres-nio's handler (still in the pipeline this turn) would
            // fail it as PSQLError.clientClosedConnection; one turn later it would be dropped.
            let error = await #expect(throws: DatabaseUnavailable.self) { try await answer.get() }
            #expect(error?.description.contains("the database connection was closed") == true, "\(String(describing: error))")
        }
    }

    @Test func aStatementOnAnOpenConnectionIsAnsweredWithItsRows() async throws {
        let url = try #require(PostgresTestDatabase.url)
        let rows = try await PostgresTestDatabase.withConnection(url) { connection in
            try await connection.run("SELECT generate_series(1, 3)", logger: PostgresTestDatabase.logger).map { try $0.decode(Int.self) }
        }
        #expect(rows == [1, 2, 3])
    }

    @Test func statementsRacingTheirConnectionsCloseAllEnd() async throws {
        let url = try #require(PostgresTestDatabase.url)
        var refused = 0
        for round in 0..<40 {
            let outcomes = try await PostgresTestDatabase.withConnection(url) { connection in
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<4 {
                        group.addTask {
                            // Statements back to back until the close stops them: each one
                            // ends, answered or refused, and none is left waiting.
                            var failures = 0
                            for _ in 0..<200 {
                                do { _ = try await connection.run("SELECT 1", logger: PostgresTestDatabase.logger) } catch {
                                    #expect(DatabaseUnavailable.isUnavailable(error), "\(String(reflecting: error))")
                                    failures += 1
                                    break
                                }
                            }
                            return failures
                        }
                    }
                    try await Task.sleep(for: .microseconds(200 * (round % 10)))
                    let _: EventLoopFuture<Void> = connection.close()
                    return try await group.reduce(0, +)
                }
            }
            refused += outcomes
        }
        // Most rounds close the connection while statements are still being written.
        #expect(refused > 0)
    }

    @Test func aMigrationsTransactionLiftsTheStatementTimeoutButNotTheIdleOne() async throws {
        try await PostgresTestDatabase.withStores(1) { stores in
            let (statement, idle) = try await stores[0].transaction(bounded: false) { connection in
                let statement = try await connection.run("SHOW statement_timeout", logger: PostgresTestDatabase.logger).first?.decode(String.self)
                let idle = try await connection.run("SHOW idle_in_transaction_session_timeout", logger: PostgresTestDatabase.logger).first?.decode(String.self)
                return (statement, idle)
            }
            #expect(statement == "0")
            // A migrator that stops while holding its locks is ended by the server.
            #expect(idle == "1min")
            #expect(PostgresStore.unboundedIdleTimeout(.seconds(5)) == .seconds(60))
            #expect(PostgresStore.unboundedIdleTimeout(.seconds(90)) == .seconds(90))
        }
    }
}
