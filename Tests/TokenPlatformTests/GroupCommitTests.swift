import Dispatch
import Foundation
import GRDB
import SDKTestSupport
import Testing
import TokenPlatform

/// Group commit: writes that queue up while the writer is busy share one transaction, each
/// caller resumes only after its write committed, and one failing write fails only itself.
@Suite struct GroupCommitTests {
    /// A file database (WAL) with a table of numbered rows and a commit counter.
    struct Fixture {
        let directory: URL
        let pool: DatabasePool
        let commits = CommitCounter()
        let group: GroupCommit

        init(queueWait: Duration? = nil, busy: WriterBusyRecord = WriterBusyRecord()) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("group-commit-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var configuration = Configuration()
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA foreign_keys = ON") }
            pool = try DatabasePool(path: directory.appendingPathComponent("db.sqlite").path, configuration: configuration)
            try pool.write { db in
                try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY, label TEXT NOT NULL)")
                try db.execute(sql: "CREATE TABLE parent (id INTEGER PRIMARY KEY)")
                try db.execute(sql: "CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
            }
            pool.add(transactionObserver: commits, extent: .observerLifetime)
            group = GroupCommit(writer: pool, queueWait: queueWait, busy: busy)
        }

        func insert(_ id: Int) async throws -> Int {
            try await group.write { db in
                try db.execute(sql: "INSERT INTO item (id, label) VALUES (?, ?)", arguments: [id, "item \(id)"])
                return id
            }
        }

        func count(_ table: String) throws -> Int {
            try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? -1 }
        }

        /// Holds the writer queue busy until the returned gate opens, so writes queue up.
        func holdWriter() -> DispatchSemaphore {
            let gate = DispatchSemaphore(value: 0)
            pool.asyncWriteWithoutTransaction { _ in gate.wait() }
            return gate
        }

        /// Waits (briefly, polling) until `count` writes are queued.
        func waitForQueued(_ count: Int) async throws {
            for _ in 0..<5_000 where group.pendingWrites < count { try await Task.sleep(for: .milliseconds(1)) }
            try #require(group.pendingWrites == count)
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// Counts commits and rollbacks of the observed database.
    final class CommitCounter: TransactionObserver, @unchecked Sendable {
        private let lock = NSLock()
        private var committed = 0
        private var rolledBack = 0
        var commits: Int { lock.withLock { committed } }
        var rollbacks: Int { lock.withLock { rolledBack } }
        func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { true }
        func databaseDidChange(with event: DatabaseEvent) {}
        func databaseDidCommit(_ db: Database) { lock.withLock { committed += 1 } }
        func databaseDidRollback(_ db: Database) { lock.withLock { rolledBack += 1 } }
    }

    /// A write that waited past the queue wait behind slow writes is taken all the same; one
    /// queued before a write failed busy (a lock another process holds) fails unrun.
    @Test func aLateWriteFailsOnlyOnceALockFailedAWriteSinceItWasQueued() async throws {
        let busy = WriterBusyRecord()
        let fixture = try Fixture(queueWait: .milliseconds(20), busy: busy)
        defer { fixture.remove() }
        var gate = fixture.holdWriter()
        let first = Task { try await fixture.insert(1) }
        try await fixture.waitForQueued(1)
        try await Task.sleep(for: .milliseconds(60))
        gate.signal()
        #expect(try await first.value == 1)

        gate = fixture.holdWriter()
        let second = Task { try await fixture.insert(2) }
        try await fixture.waitForQueued(1)
        try await Task.sleep(for: .milliseconds(60))
        busy.note(DatabaseError(resultCode: .SQLITE_BUSY, message: "database is locked"))
        gate.signal()
        let refused = await #expect(throws: DatabaseUnavailable.self) { try await second.value }
        #expect(refused?.reason.hasPrefix("the database's writer did not take the write within 0.02 s") == true, "\(String(describing: refused))")
        #expect(try fixture.count("item") == 1)
        // Once taken, later writes go ahead again (the failure came before they were queued).
        #expect(try await fixture.insert(3) == 3)
    }

    @Test func aLoneWriteCommitsAtOnce() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        #expect(try await fixture.insert(1) == 1)
        #expect(try fixture.count("item") == 1)
        #expect(fixture.commits.commits == 1)
    }

    @Test func writesQueuedBehindABusyWriterShareOneTransaction() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let gate = fixture.holdWriter()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for id in 1...50 { group.addTask { try await fixture.insert(id) } }
            try await fixture.waitForQueued(50)
            #expect(try fixture.count("item") == 0)
            gate.signal()
            var answered: Set<Int> = []
            for try await id in group { answered.insert(id) }
            #expect(answered == Set(1...50))
        }
        #expect(try fixture.count("item") == 50)
        #expect(fixture.commits.commits == 1)
    }

    @Test func aBatchIsCappedAndTheRestCommitsNext() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let total = GroupCommit.maximumBatch + 10
        let gate = fixture.holdWriter()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for id in 1...total { group.addTask { try await fixture.insert(id) } }
            try await fixture.waitForQueued(total)
            gate.signal()
            for try await _ in group {}
        }
        #expect(try fixture.count("item") == total)
        #expect(fixture.commits.commits == 2)
    }

    @Test func anOrdinaryWriteQueuedMeanwhileRunsBetweenBatchesNotAfterAllOfThem() async throws {
        // Under a steady stream of grouped writes, a write through the writer's own queue (a
        // card's status change) must not wait for the stream to stop.
        let fixture = try Fixture()
        defer { fixture.remove() }
        let total = GroupCommit.maximumBatch + 10
        let gate = fixture.holdWriter()
        let seen = Locked<Int?>(nil)
        try await withThrowingTaskGroup(of: Int.self) { group in
            for id in 1...total { group.addTask { try await fixture.insert(id) } }
            try await fixture.waitForQueued(total)
            // Queued now (synchronously) behind the held writer, after the group's first turn.
            let ran = DispatchSemaphore(value: 0)
            fixture.pool.asyncWriteWithoutTransaction { db in
                seen.withValue { $0 = try? Int.fetchOne(db, sql: "SELECT count(*) FROM item") }
                ran.signal()
            }
            gate.signal()
            for try await _ in group {}
            #expect(ran.wait(timeout: .now() + 10) == .success)
        }
        #expect(seen.withValue { $0 } == GroupCommit.maximumBatch, "it ran after the first batch, before the second")
        #expect(try fixture.count("item") == total)
    }

    @Test func aFailingWriteFailsAloneAndTheOthersCommit() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        _ = try await fixture.insert(5)
        let gate = fixture.holdWriter()
        let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            // Id 5 exists already: that insert violates the primary key.
            for id in 1...10 { group.addTask { do { _ = try await fixture.insert(id); return (id, true) } catch { return (id, false) } } }
            try await fixture.waitForQueued(10)
            gate.signal()
            var results: [Int: Bool] = [:]
            for try await (id, stored) in group { results[id] = stored }
            return results
        }
        #expect(results.filter { !$0.value }.map(\.key) == [5])
        #expect(try fixture.count("item") == 10)
        #expect(fixture.commits.commits == 2)
    }

    @Test func aWriteThatFailsHalfwayLeavesNoneOfItsStatements() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        _ = try await fixture.insert(5)
        let gate = fixture.holdWriter()
        let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            group.addTask { ("before", (try? await fixture.insert(1)) != nil) }
            group.addTask {
                // Its first insert succeeds, its second violates the primary key.
                do {
                    try await fixture.group.write { (db: Database) throws -> Void in
                        try db.execute(sql: "INSERT INTO item (id, label) VALUES (100, 'half')")
                        try db.execute(sql: "INSERT INTO item (id, label) VALUES (5, 'duplicate')")
                    }
                    return ("halfway", true)
                } catch {
                    return ("halfway", false)
                }
            }
            group.addTask { ("after", (try? await fixture.insert(2)) != nil) }
            try await fixture.waitForQueued(3)
            gate.signal()
            var outcomes: [String: Bool] = [:]
            for try await (name, stored) in group { outcomes[name] = stored }
            return outcomes
        }
        #expect(outcomes == ["before": true, "halfway": false, "after": true])
        let ids = try await fixture.pool.read { db in try Int.fetchAll(db, sql: "SELECT id FROM item ORDER BY id") }
        #expect(ids == [1, 2, 5])
        // The batch ran first without savepoints, was rolled back, and committed once with them.
        #expect(fixture.commits.rollbacks == 1)
        #expect(fixture.commits.commits == 2)
    }

    @Test func aLoneWriteThatFailsHalfwayIsRolledBackWhole() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        _ = try await fixture.insert(5)
        await #expect(throws: DatabaseError.self) {
            try await fixture.group.write { (db: Database) throws -> Void in
                try db.execute(sql: "INSERT INTO item (id, label) VALUES (100, 'half')")
                try db.execute(sql: "INSERT INTO item (id, label) VALUES (5, 'duplicate')")
            }
        }
        let ids = try await fixture.pool.read { db in try Int.fetchAll(db, sql: "SELECT id FROM item ORDER BY id") }
        #expect(ids == [5])
        #expect(fixture.commits.rollbacks == 1)
        #expect(try await fixture.insert(6) == 6)
    }

    @Test func aFailedCommitFailsEveryWriteOfTheBatchAndStoresNothing() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let gate = fixture.holdWriter()
        let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { (try? await fixture.insert(1)) != nil }
            group.addTask {
                // A deferred foreign key is checked at COMMIT: this makes the commit fail.
                (try? await fixture.group.write { (db: Database) throws -> Void in try db.execute(sql: "INSERT INTO child (id, parent_id) VALUES (1, 42)") }) != nil
            }
            try await fixture.waitForQueued(2)
            gate.signal()
            var outcomes: [Bool] = []
            for try await stored in group { outcomes.append(stored) }
            return outcomes
        }
        #expect(outcomes == [false, false])
        #expect(try fixture.count("item") == 0)
        #expect(try fixture.count("child") == 0)
        #expect(fixture.commits.commits == 0)
        // The writer is not stuck: the next write commits.
        #expect(try await fixture.insert(2) == 2)
        #expect(try fixture.count("item") == 1)
    }

    @Test func manyConcurrentWritersAllCommitExactlyOnce() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for id in 1...400 { group.addTask { try await fixture.insert(id) } }
            var sum = 0
            for try await id in group { sum += id }
            #expect(sum == 400 * 401 / 2)
        }
        #expect(try fixture.count("item") == 400)
        #expect(fixture.commits.commits >= 1 && fixture.commits.commits <= 400)
        #expect(fixture.group.pendingWrites == 0)
    }
}
