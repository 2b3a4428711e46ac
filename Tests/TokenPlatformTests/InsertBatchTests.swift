import Foundation
import PostgresNIO
import ProvisioningModels
import SDKTestSupport
import Testing
@testable import TokenPlatform

/// Group commit of independent inserts (PostgreSQL's provisioning attempts): rows that arrive
/// while an insert is in flight share the next statement, each caller returns once its own
/// statement committed, a refused row fails alone, an outage fails its batch and everyone
/// queued behind it at once, and a row queued past the wait fails as an outage would.
@Suite(.timeLimit(.minutes(3))) struct InsertBatchTests {
    /// A row the database refuses (an integrity constraint).
    struct Refused: Error, Equatable {}
    /// A statement the database refuses whatever its rows (a missing table).
    struct Broken: Error, Equatable {}

    /// An insert that records each statement's rows; the statements numbered in `held` (from 0)
    /// wait at their gate until the test opens it; `failure` decides each statement's fate.
    final class Database: Sendable {
        let held: [Int: AsyncGate]
        let statements = Locked<[[String]]>([])
        /// When each statement's wait for a connection began, as the batch passed it.
        let waits = Locked<[ContinuousClock.Instant]>([])
        let failure: @Sendable (_ index: Int, _ rows: [String]) -> (any Error)?

        init(holding held: Set<Int> = [0], failure: @escaping @Sendable (_ index: Int, _ rows: [String]) -> (any Error)? = { _, _ in nil }) {
            self.held = Dictionary(uniqueKeysWithValues: held.map { ($0, AsyncGate()) })
            self.failure = failure
        }

        var gate: AsyncGate { held[0]! }

        var insert: InsertBatch<String>.Insert {
            { [self] rows, waitingSince in
                waits.withValue { $0.append(waitingSince) }
                let index = statements.withValue { statements in
                    statements.append(rows)
                    return statements.count - 1
                }
                if let gate = held[index] { await gate.wait() }
                if let error = failure(index, rows) { throw error }
            }
        }
    }

    func batch(maximum: Int = 256, queueWait: Duration = .seconds(600)) -> InsertBatch<String> {
        InsertBatch<String>(maximumBatch: maximum, queueWait: queueWait, isRowRefusal: { $0 is Refused })
    }

    /// Queues `rows` behind the statement in flight and returns their tasks once all of them wait.
    func enqueue(_ rows: [String], in batch: InsertBatch<String>, database: Database) async throws -> [String: Task<Void, any Error>] {
        let insert = database.insert
        let before = batch.waitingRows
        var tasks: [String: Task<Void, any Error>] = [:]
        for row in rows {
            tasks[row] = Task { try await batch.insert(row, with: insert) }
        }
        // Bounded by iterations, not by time: a loaded machine only makes it take longer.
        for _ in 0..<10_000 where batch.waitingRows < before + rows.count { try await Task.sleep(for: .milliseconds(1)) }
        try #require(batch.waitingRows == before + rows.count)
        return tasks
    }

    /// Starts a first insert that is held in flight, then `rows` behind it.
    func queue(_ rows: [String], behind first: String, in batch: InsertBatch<String>, database: Database) async throws -> (first: Task<Void, any Error>, rest: [String: Task<Void, any Error>]) {
        let insert = database.insert
        let firstTask = Task { try await batch.insert(first, with: insert) }
        await database.gate.waitForArrivals(1)
        return (firstTask, try await enqueue(rows, in: batch, database: database))
    }

    @Test func rowsArrivingDuringAnInsertShareTheNextStatementAndReturnOnlyOnceItCommitted() async throws {
        let database = Database()
        let batch = batch()
        let (first, rest) = try await queue(["b", "c", "d", "e"], behind: "a", in: batch, database: database)
        // Nothing is answered while the statement before theirs is in flight.
        #expect(database.statements.current == [["a"]])
        database.gate.open()
        try await first.value
        for task in rest.values { try await task.value }
        let statements = database.statements.current
        #expect(statements.count == 2)
        #expect(statements.first == ["a"])
        #expect(Set(statements.last ?? []) == ["b", "c", "d", "e"] && statements.last?.count == 4)
        #expect(batch.statistics.batches == 2 && batch.statistics.largestBatch == 4)
        #expect(batch.waitingRows == 0)
    }

    @Test func aCallerWhoseFirstLookFoundAnInsertThatEndedBeforeItsSecondInsertsItsOwnRow() async throws {
        let database = Database()
        let insert = database.insert
        // Between the second caller's two looks the first insert commits and, with nobody
        // queued, leaves nothing in flight: a caller that queued then would wait for a batch
        // that no insert will ever start.
        let ended = AsyncGate()
        let batch = InsertBatch<String>(queueWait: .seconds(600), isRowRefusal: { $0 is Refused }, betweenLooks: {
            database.gate.open()
            await ended.wait()
        })
        let first = Task { try await batch.insert("a", with: insert) }
        await database.gate.waitForArrivals(1)
        let secondDone = Locked(false)
        let second = Task {
            try await batch.insert("b", with: insert)
            secondDone.withValue { $0 = true }
        }
        try await first.value
        for _ in 0..<10_000 where batch.isInFlight { try await Task.sleep(for: .milliseconds(1)) }
        try #require(!batch.isInFlight)
        ended.open()
        // Bounded: without its second look the call would wait forever.
        for _ in 0..<10_000 where !secondDone.current { try await Task.sleep(for: .milliseconds(1)) }
        try #require(secondDone.current, "the second caller inserted its row")
        try await second.value
        #expect(database.statements.current == [["a"], ["b"]])
        #expect(batch.statistics.batches == 2 && batch.waitingRows == 0 && !batch.isInFlight)
    }

    @Test func aRowTheDatabaseRefusesFailsAloneAndTheOthersAreInsertedOneByOne() async throws {
        let database = Database { _, rows in rows.contains("bad") ? Refused() : nil }
        let batch = batch()
        let (first, rest) = try await queue(["b", "bad", "c"], behind: "a", in: batch, database: database)
        database.gate.open()
        try await first.value
        try await #require(rest["b"]).value
        try await #require(rest["c"]).value
        await #expect(throws: Refused.self) { try await #require(rest["bad"]).value }
        // The batch's statement, refused, then each of its rows alone.
        let statements = database.statements.current
        #expect(statements.count == 5)
        #expect(Set(statements[1]) == ["b", "bad", "c"])
        #expect(Set(statements[2...].map { $0.joined() }) == ["b", "bad", "c"])
        #expect(statements[2...].allSatisfy { $0.count == 1 })
    }

    @Test func aStatementRefusedWhateverItsRowsFailsItsBatchWithoutTryingEachRow() async throws {
        let database = Database { index, _ in index > 0 ? Broken() : nil }
        let batch = batch()
        let (first, rest) = try await queue(["b", "c", "d"], behind: "a", in: batch, database: database)
        database.gate.open()
        try await first.value
        for task in rest.values {
            await #expect(throws: Broken.self) { try await task.value }
        }
        #expect(database.statements.current.count == 2)
    }

    @Test func anOutageFailsTheRowsOfItsStatementAndTheRowsBehindTryInTurn() async throws {
        // The first insert and the batch behind it meet an outage; rows queued behind that
        // batch are not failed with it: they try, each within its own wait, and go in.
        let database = Database(holding: [0, 1]) { index, _ in index < 2 ? DatabaseUnavailable("connection lost") : nil }
        let batch = batch()
        let (first, rest) = try await queue(["b", "c"], behind: "a", in: batch, database: database)
        database.gate.open()
        await #expect(throws: DatabaseUnavailable.self) { try await first.value }
        let second = try #require(database.held[1])
        await second.waitForArrivals(1)
        let behind = try await enqueue(["d", "e"], in: batch, database: database)
        second.open()
        for task in rest.values {
            await #expect(throws: DatabaseUnavailable.self) { try await task.value }
        }
        for task in behind.values { try await task.value }
        #expect(database.statements.current.map(Set.init) == [["a"], ["b", "c"], ["d", "e"]])
        #expect(batch.waitingRows == 0)
    }

    @Test func aBatchWhoseWaitForAConnectionRanOutSendsItsRowsWithTimeLeftAgain() async throws {
        // Nothing was sent: rows whose own wait lasts go back to the front of the queue. (Here
        // no row's wait is over; in the store the oldest row's always is, and it fails.)
        let database = Database { index, _ in index == 1 ? DatabaseUnavailable.waitRanOut(.seconds(5)) : nil }
        let batch = batch()
        let (first, rest) = try await queue(["b", "c"], behind: "a", in: batch, database: database)
        database.gate.open()
        try await first.value
        for task in rest.values { try await task.value }
        #expect(database.statements.current.map(Set.init) == [["a"], ["b", "c"], ["b", "c"]])
    }

    @Test func aCallersCancellationDoesNotReachItsStatement() async throws {
        let cancelledInside = Locked<Bool?>(nil)
        let gate = AsyncGate()
        let batch = batch()
        let first = Task {
            try await batch.insert("a") { _, _ in
                await gate.wait()
                cancelledInside.withValue { $0 = Task.isCancelled }
            }
        }
        await gate.waitForArrivals(1)
        first.cancel()
        gate.open()
        try await first.value
        #expect(cancelledInside.current == false)
    }

    @Test func anOutageWhileRowsAreInsertedOneByOneEndsThatToo() async throws {
        // The batch is refused for a row; then the first row alone goes in and the second
        // meets an outage: the rest fail with it, without a statement each.
        let database = Database { index, _ in
            switch index {
            case 1: Refused()
            case 3: DatabaseUnavailable("connection lost")
            default: nil
            }
        }
        let batch = batch()
        let (first, queuedFirst) = try await queue(["b"], behind: "a", in: batch, database: database)
        let rest = try await enqueue(["c", "d", "e"], in: batch, database: database)
        database.gate.open()
        try await first.value
        // b, queued first, is the batch's first row and goes in alone; the outage meets the
        // second row, and neither it nor the two after it get a statement of their own.
        try await #require(queuedFirst["b"]).value
        for task in rest.values {
            await #expect(throws: DatabaseUnavailable.self) { try await task.value }
        }
        let statements = database.statements.current
        #expect(statements.count == 4)
        #expect(statements[1].first == "b" && Set(statements[1]) == ["b", "c", "d", "e"])
        #expect(statements[2] == ["b"] && statements[3].count == 1)
    }

    @Test func aRowQueuedPastTheWaitFailsAsAnOutageWithoutAStatement() async throws {
        let database = Database()
        let batch = batch(queueWait: .zero)
        let (first, rest) = try await queue(["b", "c"], behind: "a", in: batch, database: database)
        database.gate.open()
        try await first.value
        for task in rest.values {
            let error = await #expect(throws: DatabaseUnavailable.self) { try await task.value }
            #expect(error?.reason == "no database connection within 0 s")
        }
        #expect(database.statements.current == [["a"]])
        // The queue is empty and nothing is in flight: the next caller goes first.
        try await batch.insert("f", with: database.insert)
        #expect(database.statements.current.last == ["f"])
        #expect(batch.statistics.batches == 2)
    }

    @Test func onlyTheRowsQueuedPastTheWaitFailAndTheOthersGoIn() async throws {
        // The batch's clock, moved by hand: b queues at 0 s and c at 3 s; at 6 s, when the
        // statement in flight ends, b has waited past the 5 s wait and c has not.
        let base = ContinuousClock.now
        let moved = Locked<Duration>(.zero)
        let database = Database()
        let batch = InsertBatch<String>(queueWait: .seconds(5), isRowRefusal: { $0 is Refused }, now: { base + moved.current })
        let (first, early) = try await queue(["b"], behind: "a", in: batch, database: database)
        moved.withValue { $0 = .seconds(3) }
        let late = try await enqueue(["c"], in: batch, database: database)
        moved.withValue { $0 = .seconds(6) }
        database.gate.open()
        try await first.value
        await #expect(throws: DatabaseUnavailable.self) { try await #require(early["b"]).value }
        try await #require(late["c"]).value
        #expect(database.statements.current == [["a"], ["c"]])
    }

    @Test func aBatchWaitsForItsConnectionOnlyWhatIsLeftOfItsOldestRowsWait() async throws {
        let database = Database()
        let batch = batch()
        let beforeFirst = ContinuousClock.now
        let first = Task { try await batch.insert("a", with: database.insert) }
        await database.gate.waitForArrivals(1)
        let beforeQueue = ContinuousClock.now
        let rest = try await enqueue(["b", "c"], in: batch, database: database)
        let afterQueue = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(20))
        database.gate.open()
        try await first.value
        for task in rest.values { try await task.value }
        let waits = database.waits.current
        try #require(waits.count == 2)
        // The first caller's wait began with its call; the batch's when its first row queued,
        // not when its statement started.
        #expect(waits[0] >= beforeFirst && waits[0] <= beforeQueue)
        #expect(waits[1] >= beforeQueue && waits[1] <= afterQueue)
    }

    @Test func aStatementHoldsAtMostTheMaximum() async throws {
        let database = Database()
        let batch = batch(maximum: 2)
        let (first, rest) = try await queue(["b", "c", "d", "e", "f"], behind: "a", in: batch, database: database)
        database.gate.open()
        try await first.value
        for task in rest.values { try await task.value }
        #expect(database.statements.current.map(\.count) == [1, 2, 2, 1])
        #expect(Set(database.statements.current.joined()) == ["a", "b", "c", "d", "e", "f"])
    }

    @TaskLocal static var caller: String?

    @Test func aCallerAloneInsertsInItsOwnTaskAndABatchRunsApartFromEveryCaller() async throws {
        let seenBy = Locked<[String: String]>([:])
        let gate = AsyncGate()
        let batch = batch()
        let insert: InsertBatch<String>.Insert = { rows, _ in
            for row in rows { seenBy.withValue { $0[row] = Self.caller ?? "none" } }
            if rows == ["held"] { await gate.wait() }
        }
        // One call at a time: the insert runs in a task of its own that keeps the caller's
        // task-local values (a request's logger), and that the caller's cancellation does not
        // reach (aCallersCancellationDoesNotReachItsStatement).
        try await Self.$caller.withValue("alone") { try await batch.insert("one", with: insert) }
        try await Self.$caller.withValue("alone too") { try await batch.insert("two", with: insert) }
        #expect(seenBy.current["one"] == "alone" && seenBy.current["two"] == "alone too")
        // Rows that waited are inserted apart from every caller's task-local values.
        let held = Task { try await Self.$caller.withValue("first") { try await batch.insert("held", with: insert) } }
        await gate.waitForArrivals(1)
        let queued = Task { try await Self.$caller.withValue("queued") { try await batch.insert("queued", with: insert) } }
        for _ in 0..<10_000 where batch.waitingRows < 1 { try await Task.sleep(for: .milliseconds(1)) }
        try #require(batch.waitingRows == 1)
        gate.open()
        try await held.value
        try await queued.value
        #expect(seenBy.current["held"] == "first")
        #expect(seenBy.current["queued"] == "none")
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun))
    func onPostgreSQLAStatementGetsOnlyWhatIsLeftOfItsRowsWait() async throws {
        try await PostgresTestDatabase.withSchema { url, schema in
            // One connection, held; a wait of 30 s, of which the batch's rows have spent it all.
            let store = try await PostgresStore.connect(url: url, poolSize: 1, connectionWait: .seconds(30), schema: schema, logger: PostgresTestDatabase.logger)
            do {
                try await store.migrate()
                let gate = AsyncGate()
                let holder = Task { try await store.withConnection { _ in await gate.wait() } }
                await gate.waitForArrivals(1)
                let now = Date(timeIntervalSince1970: 1_800_000_000)
                let attempt = ProvisioningAttempt(activationDataId: "jti-late", externalCardId: "c1", userId: "alice", deviceType: .phone, nonceHash: "n", leafFingerprint: "f", createdAt: now, expiresAt: now + 600)
                let started = ContinuousClock.now
                let error = await #expect(throws: DatabaseUnavailable.self) {
                    try await store.insertAttempts([attempt], waitingSince: started - .seconds(30))
                }
                // It gave up at once (not after a wait of its own: 30 s), having sent nothing.
                #expect(ContinuousClock.now - started < .seconds(15))
                #expect(error?.waitRanOut == true)
                gate.open()
                try await holder.value
                #expect(try await store.provisioningAttempt(activationDataId: "jti-late") == nil)
            } catch {
                await store.close()
                throw error
            }
            await store.close()
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun))
    func onPostgreSQLABatchWithARepeatedActivationIdStoresEveryOtherAttempt() async throws {
        try await PostgresTestDatabase.withStores(1) { stores in
            let store = stores[0]
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            func attempt(_ id: String, device: DeviceType = .phone) -> ProvisioningAttempt {
                ProvisioningAttempt(activationDataId: id, externalCardId: "card-\(id)", userId: "alice", deviceType: device, nonceHash: "nonce-\(id)", leafFingerprint: String(repeating: "ab", count: 32), createdAt: now, expiresAt: now + 600)
            }
            try await store.recordProvisioningAttempt(attempt("jti-0"))
            // The store's own statement, with the first one held so the rest form one batch.
            let gate = AsyncGate()
            let insert: InsertBatch<ProvisioningAttempt>.Insert = { rows, waitingSince in
                if rows.map(\.activationDataId) == ["jti-held"] { await gate.wait() }
                try await store.insertAttempts(rows, waitingSince: waitingSince)
            }
            let held = Task { try await store.attempts.insert(attempt("jti-held"), with: insert) }
            await gate.waitForArrivals(1)
            let ids = (1...20).map { "jti-\($0)" } + ["jti-0"]
            var tasks: [String: Task<Void, any Error>] = [:]
            for id in ids {
                tasks[id] = Task { try await store.attempts.insert(attempt(id, device: .watch), with: insert) }
            }
            for _ in 0..<10_000 where store.attempts.waitingRows < ids.count { try await Task.sleep(for: .milliseconds(1)) }
            try #require(store.attempts.waitingRows == ids.count)
            gate.open()
            try await held.value
            for id in ids where id != "jti-0" { try await #require(tasks[id]).value }
            await #expect(throws: PSQLError.self) { try await #require(tasks["jti-0"]).value }
            #expect(store.attempts.statistics.largestBatch == ids.count)
            // Every other attempt is stored whole, and the first jti-0 unchanged.
            for id in ids where id != "jti-0" {
                #expect(try await store.provisioningAttempt(activationDataId: id) == attempt(id, device: .watch))
            }
            #expect(try await store.provisioningAttempt(activationDataId: "jti-0") == attempt("jti-0"))
            #expect(try await store.provisioningAttempt(activationDataId: "jti-held") == attempt("jti-held"))
        }
    }
}
