import Foundation
import Logging
import PostgresNIO
import SDKTestSupport
import Testing
@testable import TokenPlatform

/// A connection that closed while idle in the pool (the server restarted, a proxy dropped it)
/// can be lent before the pool learns of the close: the call leases another within its wait
/// instead of answering 503.
@Suite(
    "A connection lent already closed is given back and another leased",
    .enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun),
    .timeLimit(.minutes(1))
)
struct LentClosedConnectionTests {
    /// A store on a fresh schema whose lent connections are judged by `isUsable`.
    func withStore(connectionWait: Duration, isUsable: @escaping @Sendable (PostgresConnection) -> Bool, _ body: (PostgresStore) async throws -> Void) async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let store = try await PostgresStore.connect(
                url: url, poolSize: 2, connectionWait: connectionWait, statementTimeout: .seconds(10), silenceGrace: PostgresStore.silenceGrace,
                schema: schema, isUsable: isUsable, logger: PostgresTestDatabase.logger
            )
            do { try await body(store) } catch {
                await store.close()
                throw error
            }
            await store.close()
        }
    }

    /// A store whose pool has opened its connection (on a loaded machine that can take longer
    /// than one wait, so it is retried) and from then on judges every connection lent closed,
    /// counting them in `asked`: each call is lent one at once, each time, and refuses it.
    func withStoreRefusingEveryLendOnceOpen(connectionWait: Duration, asked: Locked<Int>, _ body: (PostgresStore) async throws -> Void) async throws {
        let refusing = Locked(false)
        try await withStore(connectionWait: connectionWait) { _ in
            guard refusing.current else { return true }
            asked.withValue { $0 += 1 }
            return false
        } _: { store in
            var opened = false
            for _ in 0..<60 where !opened {
                do {
                    try await store.ping()
                    opened = true
                } catch is DatabaseUnavailable {}
            }
            try #require(opened)
            refusing.withValue { $0 = true }
            try await body(store)
        }
    }

    @Test func theCallIsServedOnTheNextConnectionLent() async throws {
        let asked = Locked(0)
        // The first connection lent counts as closed, as if its server had gone away while it
        // was idle and the pool had not noticed yet when it lent it.
        try await withStore(connectionWait: .seconds(30)) { connection in
            asked.withValue { $0 += 1 }
            return asked.current > 1 && !connection.isClosed
        } _: { store in
            let ran = try await store.withConnection { connection in
                try await connection.run("SELECT 1", logger: PostgresTestDatabase.logger).count
            }
            #expect(ran == 1)
            #expect(asked.current == 2, "the call leased once more")
        }
    }

    @Test func whenEveryConnectionLentIsClosedTheCallFailsAtTheEndOfItsWaitHavingRunNothing() async throws {
        let asked = Locked(0)
        try await withStoreRefusingEveryLendOnceOpen(connectionWait: .seconds(1), asked: asked) { store in
            let ran = Locked(false)
            let started = ContinuousClock.now
            await #expect(throws: DatabaseUnavailable.self) {
                try await store.withConnection { _ in ran.withValue { $0 = true } }
            }
            #expect(!ran.current, "no body ran on a connection judged closed")
            #expect(asked.current >= 2, "it leased again until its wait ran out")
            #expect(ContinuousClock.now - started >= .seconds(1), "not before the wait ran out")
        }
    }

    @Test func aCallCancelledWhileLeasingAgainEndsAsCancelled() async throws {
        let asked = Locked(0)
        try await withStoreRefusingEveryLendOnceOpen(connectionWait: .seconds(30), asked: asked) { store in
            let call = Task { try await store.withConnection { _ in true } }
            for _ in 0..<10_000 where asked.current < 3 { try await Task.sleep(for: .milliseconds(1)) }
            try #require(asked.current >= 3, "the call was leasing again")
            call.cancel()
            let outcome = await call.result
            #expect(throws: CancellationError.self) { try outcome.get() }
        }
    }
}
