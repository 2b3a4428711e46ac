import Foundation
import GRDB
import HTTPTypes
import Logging
import PostgresNIO
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import Testing
@testable import TokenPlatform

@Suite("A database that cannot serve is answered 503 database_unavailable, promptly, with nothing stored", .timeLimit(.minutes(3)))
struct DatabaseOutageTests {
    /// A card of another PAN than ``APIClient/putCard`` puts.
    static let secondCard = #"{"userId":"alice","primaryAccountNumber":"5555555555554444","expiration":"12/29","cardholderName":"Alice","network":"MASTERCARD","productTitle":"Gold"}"#

    /// Runs `body` with a platform on a new SQLite file whose busy timeout is 200 ms, then
    /// removes the file.
    func withSQLiteFile(policy: ActivationPolicy = .inApp, _ body: (TestPlatform, SQLiteStore, String) async throws -> Void) async throws {
        try await withSQLiteStore(busyTimeout: .milliseconds(200)) { store, path in
            try await body(try TestPlatform(policy: policy, store: store, secrets: .init()), store, path)
        }
    }

    /// Runs `body` with a migrated store on a new SQLite file with `busyTimeout`, then removes
    /// the file.
    func withSQLiteStore(busyTimeout: Duration, _ body: (SQLiteStore, String) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outage-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("tmp.sqlite").path
        let store = try SQLiteStore(path: path, busyTimeout: busyTimeout)
        try await store.migrate()
        try await body(store, path)
    }

    /// Runs `body` with a migrated store on a fresh schema of the test server, reached through
    /// an ``OutageProxy`` the body can cut or silence (a connection wait of 2 s), then closes
    /// both and drops the schema.
    func withProxiedStore(
        poolSize: Int,
        statementTimeout: Duration = DatabaseConfiguration.defaultStatementTimeout,
        logger: Logger = PostgresTestDatabase.logger,
        _ body: (PostgresStore, OutageProxy) async throws -> Void
    ) async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let proxy = try await OutageProxy.start(to: url.host, port: url.port)
            let proxied = url.through(proxy)
            let store: PostgresStore
            do {
                store = try await PostgresStore.connect(url: proxied, poolSize: poolSize, connectionWait: .seconds(2), statementTimeout: statementTimeout, schema: schema, logger: logger)
            } catch {
                await proxy.stop()
                throw error
            }
            do {
                // The pool's first connect can outlast the 2 s wait on a loaded machine (the
                // whole suite starting at once): the migration is tried again then.
                for attempt in 1...5 {
                    do {
                        try await store.migrate()
                        break
                    } catch is DatabaseUnavailable where attempt < 5 {}
                }
                try await body(store, proxy)
            } catch {
                await store.close()
                await proxy.stop()
                throw error
            }
            await store.close()
            await proxy.stop()
        }
    }

    /// While another process holds the lock, writes queued behind one that waits out its busy
    /// timeout do not each wait for theirs in turn: once their own wait has passed in the
    /// queue they fail without beginning a transaction — transactions of their own and group
    /// commits alike — and nothing is stored.
    @Test func writesQueuedBehindALockedWriteFailOnceTheirWaitHasPassed() async throws {
        try await withSQLiteStore(busyTimeout: .milliseconds(300)) { store, path in
            let other = try SQLiteWriteLock(path: path)
            defer { other.release() }
            let errors = try await withThrowingTaskGroup(of: (any Error)?.self) { group in
                for index in 0..<3 {
                    group.addTask {
                        do {
                            _ = try await store.takeTokenCommandLease(reference: "T\(index)", holder: "test", for: .seconds(30))
                            return nil
                        } catch { return error }
                    }
                    group.addTask {
                        do {
                            try await store.recordProvisioningAttempt(ProvisioningAttempt(
                                activationDataId: "a\(index)", externalCardId: "c1", userId: "alice", deviceType: .phone, nonceHash: "n\(index)",
                                leafFingerprint: "f", createdAt: Date(), expiresAt: Date().addingTimeInterval(600)
                            ))
                            return nil
                        } catch { return error }
                    }
                }
                return try await group.reduce(into: [(any Error)?]()) { $0.append($1) }
            }
            other.release()
            #expect(errors.allSatisfy { $0.map(DatabaseUnavailable.isUnavailable) == true }, "\(errors)")
            // The writer took one transaction, or one batch, at a time; each waited out the busy
            // timeout. The writes asked for meanwhile had waited longer than that by their turn.
            let late = errors.compactMap { $0 as? DatabaseUnavailable }.filter { $0.reason.hasPrefix("the database's writer did not take the write within 0.3 s") }
            #expect(!late.isEmpty, "\(errors)")
            // Nothing was stored: no lease stands in another holder's way.
            #expect(try await store.takeTokenCommandLease(reference: "T0", holder: "other", for: .seconds(30)))
            #expect(try await store.provisioningAttempt(activationDataId: "a0") == nil)
        }
    }

    @Test func aWriteBlockedByAnotherProcessesLockIsAnswered503AndStoresNothing() async throws {
        try await withSQLiteFile { platform, store, path in
            try await platform.run { api in
                try await api.putCard("c1", user: "alice")
                // Another process (a second instance, `pushprov prune`, a backup) holds the write lock.
                let other = try SQLiteWriteLock(path: path)
                defer { other.release() }

                let put = try await api.send(.put, "/lifecycle/cards/c2", as: .issuer, raw: Data(Self.secondCard.utf8))
                #expect(put.status == .serviceUnavailable, "\(put.text)")
                #expect(put.error?.code == "database_unavailable")
                #expect(put.error?.message == "the database is unavailable; try again shortly")
                let sealed = try await api.signCard("c1", user: "alice")
                #expect(sealed.status == .serviceUnavailable, "\(sealed.text)")
                #expect(sealed.error?.code == "database_unavailable")
                // Reads do not wait for the writer (WAL): the card is still served.
                #expect(try await api.send(.get, "/lifecycle/cards/c1", as: .issuer).status == .ok)
                #expect(try await api.send(.get, "/health").status == .ok)

                other.release()
                #expect(try await store.card(externalCardId: "c2") == nil)
                // Read through a connection of its own that waits for the lock like the store's
                // (the store's writer may be checkpointing just then, on a loaded machine).
                var patient = Configuration()
                patient.busyMode = .timeout(10)
                #expect(try await DatabaseQueue(path: path, configuration: patient).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM provisioning_attempt") } == 0)
                let again = try await api.send(.put, "/lifecycle/cards/c2", as: .issuer, raw: Data(Self.secondCard.utf8))
                #expect(again.status == .created, "\(again.text)")
                #expect(try await api.signCard("c1", user: "alice").status == .ok)
            }
            #expect(platform.logs.current.filter { $0.contains("database unavailable") }.count == 1)
            #expect(platform.logs.current.contains { $0.contains("database unavailable") && $0.contains("database is locked") }, "\(platform.logs.current)")
            #expect(!platform.logs.current.contains { $0.contains("4111111111111111") || $0.contains("5555555555554444") })
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(3)))
    func aPostgreSQLOutageIsAnswered503WithinTheWaitAndServiceResumesAfterIt() async throws {
        try await withProxiedStore(poolSize: 2) { store, proxy in
            let platform = try TestPlatform(store: store, secrets: .init())
            try await platform.run { api in
                try await api.putCard("c1", user: "alice")
                await proxy.cut()

                // Without the wait's bound, postgres-nio's pool holds each of these for
                // a minute before its circuit breaker fails them.
                let started = ContinuousClock.now
                let health = try await api.send(.get, "/health")
                #expect(health.status == .serviceUnavailable, "\(health.text)")
                let live = try await api.send(.get, "/health/live")
                #expect(live.status == .ok, "\(live.text)")
                #expect(live.text == #"{"status":"ok"}"#)
                let put = try await api.send(.put, "/lifecycle/cards/c2", as: .issuer, raw: Data(Self.secondCard.utf8))
                #expect(put.status == .serviceUnavailable, "\(put.text)")
                #expect(put.error?.code == "database_unavailable")
                let sealed = try await api.signCard("c1", user: "alice")
                #expect(sealed.status == .serviceUnavailable, "\(sealed.text)")
                let decision = try await api.send(.post, "/tsp/tokenization-decisions", as: .tsp, json: TokenizationDecisionRequest(
                    requestId: "r1", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"), activationData: nil, deviceType: .phone
                ))
                #expect(decision.status == .serviceUnavailable, "\(decision.text)")
                #expect(ContinuousClock.now - started < .seconds(30), "four requests of a 2 s wait took \(ContinuousClock.now - started)")

                proxy.restore()
                // The pool reconnects after its back-off (100 ms growing by a quarter
                // per failed connect).
                var reply = put
                for _ in 0..<60 where reply.status != .created {
                    try await Task.sleep(for: .milliseconds(250))
                    reply = try await api.send(.put, "/lifecycle/cards/c2", as: .issuer, raw: Data(Self.secondCard.utf8))
                }
                #expect(reply.status == .created, "\(reply.text)")
                #expect(try await api.signCard("c1", user: "alice").status == .ok)
                #expect(try await api.send(.get, "/health").status == .ok)
            }
            #expect(!platform.logs.current.contains { $0.contains("4111111111111111") || $0.contains("5555555555554444") })
        }
    }

    @Test func aCommandTheTokenServiceConfirmedButTheDatabaseCouldNotRecordIsTheDatabases503() async throws {
        try await withSQLiteFile(policy: .immediate) { platform, _, path in
            let lock = Locked<SQLiteWriteLock?>(nil)
            defer { lock.current?.release() }
            try await platform.run { api in
                try await api.putCard("c1", user: "alice")
                try await api.provision("c1", user: "alice", token: "T1")
                #expect(try await api.tokenStatus("T1") == .active)
                // While the token service suspends the token, another process takes the write lock.
                platform.connector.meanwhile.withValue { $0 = { command, _ in
                    if command == "suspend" { lock.withValue { $0 = try? SQLiteWriteLock(path: path) } }
                } }
                let reply = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
                lock.current?.release()
                #expect(lock.current != nil)
                #expect(reply.status == .serviceUnavailable, "\(reply.text)")
                #expect(reply.error?.code == "database_unavailable", "\(reply.text)")
                #expect(platform.connector.commands.current == ["suspend T1"])
                #expect(try await api.tokenStatus("T1") == .active)
            }
            #expect(platform.logs.current.contains { $0.contains("the token service confirmed a command but the database could not record it") }, "\(platform.logs.current)")
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun))
    func aPoolBusyPastTheWaitRunsNothingAndALongStatementIsNotCutShort() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let store = try await PostgresStore.connect(url: url, poolSize: 1, connectionWait: .seconds(1), schema: schema, logger: PostgresTestDatabase.logger)
            defer { Task { await store.close() } }
            // A statement longer than the wait holds the pool's only connection (once it has
            // one: on a loaded machine opening it can take a while, so it may try again).
            // The holder keeps it, after the statement, until the second call has given up,
            // however slowly a loaded machine runs either.
            let holding = Locked(false)
            let release = AsyncGate()
            let long = Task {
                for attempt in 1...5 {
                    do {
                        return try await store.withConnection { connection in
                            holding.withValue { $0 = true }
                            let count = try await connection.query("SELECT pg_sleep(3)", logger: PostgresTestDatabase.logger).collect().count
                            await release.wait()
                            return count
                        }
                    } catch is DatabaseUnavailable where attempt < 5 {}
                }
                return 0
            }
            for _ in 0..<600 where !holding.current { try await Task.sleep(for: .milliseconds(50)) }
            try #require(holding.current)
            let ran = Locked(false)
            let error = await #expect(throws: DatabaseUnavailable.self) {
                try await store.withConnection { _ in ran.withValue { $0 = true } }
            }
            release.open()
            #expect(error?.reason == "no database connection within 1 s")
            #expect(try await long.value == 1)
            // The queued request was withdrawn: once the connection is free it does not run.
            try await Task.sleep(for: .milliseconds(200))
            #expect(!ran.current)
            #expect(try await store.withConnection { _ in 7 } == 7)
            // A statement the server refuses after the lease is the statement's error, not an outage.
            let refused = await #expect(throws: (any Error).self) {
                try await store.withConnection { connection in try await connection.query("SELECT 1/0", logger: PostgresTestDatabase.logger).collect().count }
            }
            #expect(!DatabaseUnavailable.isUnavailable(try #require(refused)))
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun))
    func aConnectionTheServerTerminatesCountsAsUnavailable() async throws {
        let url = try #require(PostgresTestDatabase.url)
        let error = await #expect(throws: (any Error).self) {
            try await PostgresTestDatabase.withConnection(url) { connection in
                _ = try await connection.query("SELECT pg_terminate_backend(pg_backend_pid())", logger: PostgresTestDatabase.logger).collect()
            }
        }
        let caught = try #require(error)
        #expect(DatabaseUnavailable.isUnavailable(caught), "\(String(reflecting: caught))")
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(3)))
    func aStatementOnASilentConnectionIsAnswered503AfterTheStatementTimeoutAndANewConnectionServes() async throws {
        let storeLogs = Locked<[String]>([])
        try await withProxiedStore(poolSize: 1, statementTimeout: .seconds(1), logger: TestTMP.logger("test.postgres", into: storeLogs)) { store, proxy in
            let platform = try TestPlatform(store: store, secrets: .init())
            try await platform.run { api in
                try await api.putCard("c1", user: "alice")
                // The network between TMP and PostgreSQL starts dropping every packet: the
                // pool's connection stays open and nothing answers on it.
                proxy.silence()
                // Without the bound the request would wait for TCP to give up (minutes, and
                // a task stuck there ignores cancellation): after 30 s the proxy closes its
                // connections instead, so the request ends and the checks below fail.
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(30))
                    await proxy.cut()
                }
                let started = ContinuousClock.now
                let read = try await api.send(.get, "/lifecycle/cards/c1", as: .issuer)
                let waited = ContinuousClock.now - started
                watchdog.cancel()
                #expect(read.status == .serviceUnavailable, "\(read.text)")
                #expect(read.error?.code == "database_unavailable")
                // The timeout and its second of grace.
                #expect(waited >= .seconds(2), "answered after \(waited)")
                #expect(waited < .seconds(30), "answered after \(waited)")
                let sealed = try await api.signCard("c1", user: "alice")
                #expect(sealed.status == .serviceUnavailable, "\(sealed.text)")

                proxy.restore()
                // The silent connection was closed; the pool opens another.
                var reply = read
                for _ in 0..<60 where reply.status != .ok {
                    try await Task.sleep(for: .milliseconds(250))
                    reply = try await api.send(.get, "/lifecycle/cards/c1", as: .issuer)
                }
                #expect(reply.status == .ok, "\(reply.text)")
                #expect(try await api.signCard("c1", user: "alice").status == .ok)
            }
            #expect(platform.logs.current.contains { $0.contains("database unavailable") && $0.contains("the database did not answer within 2 s; its connection was closed") }, "\(platform.logs.current)")
            #expect(storeLogs.current.contains { $0.hasPrefix("warning ") && $0.contains("closing a database connection that has not answered") }, "\(storeLogs.current)")
            #expect(!platform.logs.current.contains { $0.contains("4111111111111111") })
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(3)))
    func aTransactionWhoseNetworkGoesSilentMidwayEndsWith503AndWritesNothingToTheClosedConnection() async throws {
        try await withProxiedStore(poolSize: 1, statementTimeout: .seconds(1)) { store, proxy in
            let started = ContinuousClock.now
            let error = await #expect(throws: (any Error).self) {
                try await store.transaction { connection in
                    _ = try await connection.all("SELECT 1", logger: PostgresTestDatabase.logger)
                    // The network goes silent between two statements of the transaction.
                    proxy.silence()
                    return try await connection.all("SELECT 2", logger: PostgresTestDatabase.logger).count
                }
            }
            // The second statement fails when the connection closes — TMP's close at the limit,
            // or PostgreSQL's end of the idle transaction, whichever comes first — and the
            // ROLLBACK that follows is not written to the closed connection (the driver would
            // never answer it, and the call would wait forever).
            #expect(DatabaseUnavailable.isUnavailable(try #require(error)), "\(String(reflecting: error))")
            #expect(ContinuousClock.now - started < .seconds(30))
            proxy.restore()
            var count: Int?
            for _ in 0..<60 where count == nil {
                count = try? await store.withConnection { connection in try await connection.all("SELECT 3", logger: PostgresTestDatabase.logger).count }
                if count == nil { try await Task.sleep(for: .milliseconds(250)) }
            }
            #expect(count == 1)
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(3)))
    func aCallCancelledWhileItsStatementWaitsOnASilentNetworkIsStillClosedAtItsLimit() async throws {
        let storeLogs = Locked<[String]>([])
        try await withProxiedStore(poolSize: 1, statementTimeout: .seconds(1), logger: TestTMP.logger("test.postgres", into: storeLogs)) { store, proxy in
            #expect(try await store.withConnection { connection in try await connection.all("SELECT 1", logger: PostgresTestDatabase.logger).count } == 1)
            proxy.silence()
            let leased = Locked(false)
            let call = Task {
                try await store.withConnection { connection in
                    leased.withValue { $0 = true }
                    return try await connection.all("SELECT 2", logger: PostgresTestDatabase.logger).count
                }
            }
            for _ in 0..<2_000 where !leased.current { try await Task.sleep(for: .milliseconds(1)) }
            try #require(leased.current, "the call got its connection")
            let started = ContinuousClock.now
            // The caller gives up (a client that went away); its statement still waits on the
            // silent network and holds the pool's only connection.
            call.cancel()
            // Unbounded, the call would wait for TCP to give up, minutes later: after 30 s
            // the proxy closes its connections instead, so the call ends and the checks fail.
            let watchdog = Task {
                try await Task.sleep(for: .seconds(30))
                await proxy.cut()
            }
            let outcome = await call.result
            let waited = ContinuousClock.now - started
            watchdog.cancel()
            #expect(throws: (any Error).self) { try outcome.get() }
            #expect(waited < .seconds(20), "the cancelled call ended after \(waited)")
            #expect(storeLogs.current.contains { $0.contains("closing a database connection that has not answered") && $0.contains(#""caller": cancelled"#) }, "\(storeLogs.current)")
            proxy.restore()
            // The pool's connection was closed and replaced: the store serves again.
            var count: Int?
            for _ in 0..<60 where count == nil {
                count = try? await store.withConnection { connection in try await connection.all("SELECT 3", logger: PostgresTestDatabase.logger).count }
                if count == nil { try await Task.sleep(for: .milliseconds(250)) }
            }
            #expect(count == 1)
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(2)))
    func aStatementRunningPastTheTimeoutIsCancelledByTheServerAndMigrationsAreNotBounded() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let store = try await PostgresStore.connect(url: url, poolSize: 2, statementTimeout: .seconds(1), silenceGrace: .seconds(5), schema: schema, logger: PostgresTestDatabase.logger)
            defer { Task { await store.close() } }
            // The server's statement_timeout ends it (SQLSTATE 57014), well before the store would
            // close the connection (5 s later, so a loaded machine cannot reverse the two).
            let error = await #expect(throws: PSQLError.self) {
                try await store.withConnection { connection in try await connection.all("SELECT pg_sleep(5)", logger: PostgresTestDatabase.logger).count }
            }
            #expect(error?.serverInfo?[.sqlState] == "57014")
            #expect(DatabaseUnavailable.isUnavailable(try #require(error)))
            let inTransaction = await #expect(throws: PSQLError.self) {
                try await store.transaction { connection in try await connection.all("SELECT pg_sleep(5)", logger: PostgresTestDatabase.logger).count }
            }
            #expect(inTransaction?.serverInfo?[.sqlState] == "57014")
            // The connection is still usable after the server's cancel.
            #expect(try await store.withConnection { connection in try await connection.all("SELECT 1", logger: PostgresTestDatabase.logger).count } == 1)
            // Migrations run unbounded, on the server and in the client: a migration may
            // rewrite a large table, or wait for another instance's migrations.
            #expect(try await store.transaction(bounded: false) { connection in try await connection.all("SELECT pg_sleep(6.5)", logger: PostgresTestDatabase.logger).count } == 1)
            // ... and only that transaction: SET LOCAL ended with it.
            let after = await #expect(throws: PSQLError.self) {
                try await store.withConnection { connection in try await connection.all("SELECT pg_sleep(5)", logger: PostgresTestDatabase.logger).count }
            }
            #expect(after?.serverInfo?[.sqlState] == "57014")
            try await store.migrate()
            #expect(try await store.pendingMigrations().isEmpty)
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(2)))
    func aCardStatusChangeWaitingOnARowLockPastTheTimeoutIsAnswered503AndChangesNothing() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            let store = try await PostgresStore.connect(url: url, poolSize: 2, statementTimeout: .seconds(1), silenceGrace: .seconds(5), schema: schema, logger: PostgresTestDatabase.logger)
            defer { Task { await store.close() } }
            try await store.migrate()
            let platform = try TestPlatform(store: store, secrets: .init())
            try await platform.run { api in
                try await api.putCard("c1", user: "alice")
                // Another session (a batch job, an operator's psql) holds the card's row lock
                // in a transaction it does not end.
                try await PostgresTestDatabase.withConnection(url) { other in
                    _ = try await other.query("BEGIN", logger: PostgresTestDatabase.logger)
                    _ = try await other.all("SELECT status FROM \(unescaped: schema).card WHERE external_card_id = 'c1' FOR UPDATE", logger: PostgresTestDatabase.logger)
                    let blocked = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
                    #expect(blocked.status == .serviceUnavailable, "\(blocked.text)")
                    #expect(blocked.error?.code == "database_unavailable")
                    _ = try await other.query("ROLLBACK", logger: PostgresTestDatabase.logger)
                }
                #expect(try await store.card(externalCardId: "c1")?.status == .active)
                let again = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
                #expect(again.status == .ok, "\(again.text)")
                #expect(try await store.card(externalCardId: "c1")?.status == .blocked)
            }
            #expect(platform.logs.current.contains { $0.contains("database unavailable") && $0.contains("canceling statement due to statement timeout") }, "\(platform.logs.current)")
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun))
    func aRefusedStatementIsNotAnOutage() async throws {
        let url = try #require(PostgresTestDatabase.url)
        let error = await #expect(throws: (any Error).self) {
            try await PostgresTestDatabase.withConnection(url) { connection in
                _ = try await connection.query("SELECT 1/0", logger: PostgresTestDatabase.logger).collect()
            }
        }
        #expect(!DatabaseUnavailable.isUnavailable(try #require(error)))
    }

    @Test(arguments: [
        (ResultCode.SQLITE_BUSY, true), (.SQLITE_LOCKED, true), (.SQLITE_IOERR, true), (.SQLITE_IOERR_FSYNC, true), (.SQLITE_FULL, true),
        (.SQLITE_CANTOPEN, true), (.SQLITE_BUSY_SNAPSHOT, true),
        (.SQLITE_CONSTRAINT, false), (.SQLITE_CORRUPT, false), (.SQLITE_NOTADB, false), (.SQLITE_ERROR, false), (.SQLITE_MISUSE, false),
    ])
    func sqliteErrorsThatMeanTheDatabaseCannotServeNow(code: ResultCode, unavailable: Bool) {
        #expect(DatabaseUnavailable.isUnavailable(DatabaseError(resultCode: code)) == unavailable)
    }

    @Test func otherErrorsAreNotOutages() {
        #expect(DatabaseUnavailable.isUnavailable(DatabaseUnavailable("no database connection within 5 s")))
        #expect(!DatabaseUnavailable.isUnavailable(URLError(.timedOut)))
        #expect(!DatabaseUnavailable.isUnavailable(CancellationError()))
        #expect(!DatabaseUnavailable.isUnavailable(TMPError.conflict("card_blocked", "blocked")))
    }

    @Test func theOutageWarningIsThrottledAndCountsWhatItHeldBack() {
        let throttle = WarningThrottle(interval: .seconds(10))
        let start = ContinuousClock.now
        #expect(throttle.admit(now: start) == 0)
        #expect(throttle.admit(now: start + .seconds(1)) == nil)
        #expect(throttle.admit(now: start + .seconds(9)) == nil)
        #expect(throttle.admit(now: start + .seconds(10)) == 2)
        #expect(throttle.admit(now: start + .seconds(11)) == nil)
        #expect(throttle.admit(now: start + .seconds(25)) == 1)
    }

    @Test func aHealthCheckWhosePingFailsLogsOneWarningWithTheDriversReason() async throws {
        let store = FaultyStore(base: try await TestTMP.memoryStore())
        let platform = try TestPlatform(store: store, secrets: .init())
        try await platform.run { api in
            store.failure.withValue { $0 = DatabaseError(resultCode: .SQLITE_IOERR, message: "disk I/O error", sql: "SELECT 1 -- 4111111111111111", arguments: ["4111111111111111"], publicStatementArguments: true) }
            for _ in 0..<3 {
                let health = try await api.send(.get, "/health")
                #expect(health.status == .serviceUnavailable)
                #expect(try health.decode([String: String].self) == ["status": "unavailable", "database": "unreachable"])
            }
            store.failure.withValue { $0 = nil }
            #expect(try await api.send(.get, "/health").status == .ok)
        }
        let warnings = platform.logs.current.filter { $0.hasPrefix("warning ") && $0.contains("health check") }
        #expect(warnings.count == 1, "\(platform.logs.current)")
        #expect(warnings.first?.contains("disk I/O error") == true, "\(warnings)")
        #expect(!platform.logs.current.contains { $0.contains("SELECT") || $0.contains("4111111111111111") }, "\(platform.logs.current)")
    }
}

/// Another connection holding a SQLite file's write lock, as another process would, until
/// ``release()``.
final class SQLiteWriteLock: Sendable {
    private let release_ = DispatchSemaphore(value: 0)
    private let ended = DispatchSemaphore(value: 0)
    private let released = Locked(false)

    /// Takes the lock (waiting up to 10 s for it), or throws.
    init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        let locked = DispatchSemaphore(value: 0)
        let failure = Locked<(any Error)?>(nil)
        let (release, ended) = (release_, ended)
        DispatchQueue.global().async {
            do {
                try queue.inDatabase { db in
                    try db.execute(sql: "BEGIN IMMEDIATE")
                    locked.signal()
                    // Held at most a minute, should a test fail before it releases.
                    _ = release.wait(timeout: .now() + 60)
                    try db.execute(sql: "ROLLBACK")
                }
            } catch {
                failure.withValue { $0 = error }
                locked.signal()
            }
            ended.signal()
        }
        guard locked.wait(timeout: .now() + 15) == .success else { throw TestFailure("the write lock was not taken within 15 s") }
        if let error = failure.current { throw error }
    }

    /// Releases the lock and waits (up to 15 s) until it is; later calls do nothing.
    func release() {
        let first = released.withValue { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        release_.signal()
        _ = ended.wait(timeout: .now() + 15)
    }
}
