import Foundation
import Logging
import PostgresNIO
import SDKTestSupport
import TMPTestSupport
import Testing
@testable import TokenPlatform

/// The PostgreSQL store replaces a pool still waiting out its back-off once the database
/// answers a connection of the store's own, and leaves a pool that is only busy alone.
@Suite("A connection pool stuck in its back-off is replaced once the database answers")
struct PoolRenewalTests {
    /// Runs `body` with a store on a fresh, migrated schema of the test server whose first
    /// pool connects through an ``OutageProxy`` that is cut (a pool that cannot connect, and
    /// whose back-off postgres-nio would keep growing), while the store's own probes and any
    /// renewed pool reach the server directly. The store's log lines go to `logs`.
    func withStuckFirstPool(
        connectionWait: Duration,
        logs: Locked<[String]>,
        _ body: (PostgresStore) async throws -> Void
    ) async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let migrating = try await PostgresStore.connect(url: url, schema: schema, logger: PostgresTestDatabase.logger)
            do { try await migrating.migrate() } catch {
                await migrating.close()
                throw error
            }
            await migrating.close()
            let proxy = try await OutageProxy.start(to: url.host, port: url.port)
            await proxy.cut()
            var down = url
            down.host = "127.0.0.1"
            down.port = proxy.port
            let store: PostgresStore
            do {
                store = try await PostgresStore.connect(
                    url: url, connectionWait: connectionWait, statementTimeout: .seconds(10), silenceGrace: PostgresStore.silenceGrace,
                    schema: schema, probeInterval: .milliseconds(200), firstPool: down, logger: TestTMP.logger("test.postgres", into: logs)
                )
            } catch {
                await proxy.stop()
                throw error
            }
            do { try await body(store) } catch {
                await store.close()
                await proxy.stop()
                throw error
            }
            await store.close()
            await proxy.stop()
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(1)))
    func aPoolThatCannotConnectIsReplacedOnceTheDatabaseAnswersAndServiceResumes() async throws {
        let logs = Locked<[String]>([])
        try await withStuckFirstPool(connectionWait: .seconds(1), logs: logs) { store in
            let platform = try TestPlatform(store: store, secrets: .init())
            try await platform.run { api in
                // The first pool cannot connect: the wait runs out, and the store starts probing.
                let health = try await api.send(.get, "/health")
                #expect(health.status == .serviceUnavailable, "\(health.text)")
                // Without the renewal the pool would stay down for good here.
                var put = health
                for _ in 0..<40 where put.status != .created {
                    put = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, raw: Data(DatabaseOutageTests.secondCard.utf8))
                    if put.status != .created { try await Task.sleep(for: .milliseconds(100)) }
                }
                #expect(put.status == .created, "\(put.text)")
                #expect(try await api.send(.get, "/health").status == .ok)
                #expect(try await api.send(.get, "/lifecycle/cards/c1", as: .issuer).status == .ok)
            }
            #expect(store.pool.renewals == 1)
            #expect(logs.current.contains { $0.hasPrefix("warning ") && $0.contains("replaced the pool") }, "\(logs.current)")
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(1)))
    func aCallWaitingInThePoolThatIsReplacedMovesToTheNewOneWithinItsWait() async throws {
        let logs = Locked<[String]>([])
        try await withStuckFirstPool(connectionWait: .seconds(3), logs: logs) { store in
            // The first call's wait runs out at 3 s and starts the renewal; the second, queued
            // in the first pool since 1.5 s, is served by the new pool before its own wait ends.
            let first = Task { try await store.ping() }
            try await Task.sleep(for: .milliseconds(1500))
            let started = ContinuousClock.now
            let second = Task { try await store.ping() }
            await #expect(throws: DatabaseUnavailable.self) { try await first.value }
            try await second.value
            #expect(ContinuousClock.now - started < .seconds(3))
            #expect(store.pool.renewals == 1)
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(1)))
    func aPoolThatIsOnlyBusyIsNotReplaced() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let logs = Locked<[String]>([])
            let store = try await PostgresStore.connect(
                url: url, poolSize: 1, connectionWait: .seconds(2), statementTimeout: .seconds(10), silenceGrace: PostgresStore.silenceGrace,
                schema: schema, probeInterval: .milliseconds(50), logger: TestTMP.logger("test.postgres", into: logs)
            )
            do {
                // The pool's one connection is opened first, so the holder below is lent it
                // at once however busy the machine is.
                try await store.ping()
                let gate = AsyncGate()
                let holderEnded = Locked(false)
                // The only connection is held by a call that waits on the test.
                let holder = Task {
                    defer { holderEnded.withValue { $0 = true } }
                    try await store.withConnection { connection in
                        try await connection.run("SELECT 1", logger: PostgresTestDatabase.logger)
                        await gate.wait()
                    }
                }
                // The holder has the connection (if it failed instead, the test fails rather
                // than waiting for an arrival that never comes).
                while gate.arrivals == 0, !holderEnded.current { try await Task.sleep(for: .milliseconds(10)) }
                var failure: String?
                if gate.arrivals == 0 { failure = "\(await holder.result)" }
                try #require(failure == nil, "the holder got no connection: \(failure ?? "")")
                // A second call finds no connection within its wait: the pool is busy, not failing.
                await #expect(throws: DatabaseUnavailable.self) { try await store.ping() }
                await #expect(throws: DatabaseUnavailable.self) { try await store.ping() }
                try await Task.sleep(for: .milliseconds(300))
                gate.open()
                try await holder.value
                try await store.ping()
                #expect(store.pool.renewals == 0)
                #expect(!logs.current.contains { $0.contains("replaced the pool") }, "\(logs.current)")
            } catch {
                await store.close()
                throw error
            }
            await store.close()
        }
    }
}
