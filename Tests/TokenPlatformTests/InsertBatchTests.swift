import Foundation
import PostgresNIO
import ProvisioningModels
import SDKTestSupport
import Testing
@testable import TokenPlatform

/// Group commit of independent inserts (PostgreSQL's provisioning attempts): rows that arrive
/// while an insert is in flight share the next statement, each caller returns once its own
/// statement committed, a refused row fails alone, an outage fails its batch at once.
@Suite struct InsertBatchTests {
    struct Refused: Error, Equatable {}

    /// An insert that records each statement's rows; the first statement waits at `gate`.
    final class Database: Sendable {
        let gate = AsyncGate()
        let statements = Locked<[[String]]>([])
        let failure: @Sendable ([String]) -> (any Error)?

        init(failure: @escaping @Sendable ([String]) -> (any Error)? = { _ in nil }) {
            self.failure = failure
        }

        var insert: InsertBatch<String>.Insert {
            { [self] rows in
                let isFirst = statements.withValue { statements in
                    statements.append(rows)
                    return statements.count == 1
                }
                if isFirst { await gate.wait() }
                if let error = failure(rows) { throw error }
            }
        }
    }

    /// Starts a first insert that is held in flight, then `rows` behind it, and returns their
    /// tasks once all of them wait.
    func queue(_ rows: [String], behind first: String, in batch: InsertBatch<String>, database: Database) async throws -> (first: Task<Void, any Error>, rest: [String: Task<Void, any Error>]) {
        let insert = database.insert
        let firstTask = Task { try await batch.insert(first, with: insert) }
        await database.gate.waitForArrivals(1)
        var tasks: [String: Task<Void, any Error>] = [:]
        for row in rows {
            tasks[row] = Task { try await batch.insert(row, with: insert) }
        }
        // Bounded by iterations, not by time: a loaded machine only makes it take longer.
        for _ in 0..<10_000 where batch.waitingRows < rows.count { try await Task.sleep(for: .milliseconds(1)) }
        try #require(batch.waitingRows == rows.count)
        return (firstTask, tasks)
    }

    @Test func rowsArrivingDuringAnInsertShareTheNextStatementAndReturnOnlyOnceItCommitted() async throws {
        let database = Database()
        let batch = InsertBatch<String>()
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

    @Test func aRowTheDatabaseRefusesFailsAloneAndTheOthersAreInsertedOneByOne() async throws {
        let database = Database { rows in rows.contains("bad") ? Refused() : nil }
        let batch = InsertBatch<String>()
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

    @Test func anOutageFailsTheWholeBatchWithoutTryingEachRow() async throws {
        let database = Database { rows in rows.count > 1 ? DatabaseUnavailable("connection lost") : nil }
        let batch = InsertBatch<String>()
        let (first, rest) = try await queue(["b", "c", "d"], behind: "a", in: batch, database: database)
        database.gate.open()
        try await first.value
        for task in rest.values {
            await #expect(throws: DatabaseUnavailable.self) { try await task.value }
        }
        #expect(database.statements.current.count == 2)
        // The next caller, alone, is inserted at once.
        try await batch.insert("f", with: database.insert)
        #expect(database.statements.current.last == ["f"])
    }

    @Test func aStatementHoldsAtMostTheMaximum() async throws {
        let database = Database()
        let batch = InsertBatch<String>(maximumBatch: 2)
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
        let batch = InsertBatch<String>()
        let insert: InsertBatch<String>.Insert = { rows in
            for row in rows { seenBy.withValue { $0[row] = Self.caller ?? "none" } }
            if rows == ["held"] { await gate.wait() }
        }
        // One call at a time: the insert runs in the caller's task (no task is started).
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
            let insert: InsertBatch<ProvisioningAttempt>.Insert = { rows in
                if rows.map(\.activationDataId) == ["jti-held"] { await gate.wait() }
                try await store.insertAttempts(rows)
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
