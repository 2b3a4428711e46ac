import GRDB
import NIOConcurrencyHelpers

/// Group commit for small, independent SQLite writes.
///
/// Every write transaction on the store's file database ends with a sync of the write-ahead
/// log (its writer runs with `synchronous = FULL`), and costs a BEGIN, a COMMIT and a round
/// trip to GRDB's writer queue. Under load most of the
/// writer's time went there: `signed-cards` records one attempt row per call, each in its own
/// transaction. Here writes that arrive while a transaction is being committed wait for it,
/// then go together into the next transaction, sharing its sync:
///
/// - a caller resumes only after the transaction holding its write has committed, so an
///   answer is never sent for a write that could still be lost (durability unchanged);
/// - a write that throws fails alone: its caller gets the error and the others in the batch
///   commit. Writes rarely fail, so a batch first runs without savepoints; only when one of its
///   writes throws is the transaction rolled back and the batch run again with a savepoint
///   around each write. A write's body may therefore run more than once, and must do nothing
///   but its database statements;
/// - if the commit itself fails, every caller in the batch gets that error;
/// - with one caller at a time nothing waits: the first write starts a transaction at once;
/// - a write not taken into a transaction within the queue wait, when a write has failed
///   since for a lock another process holds, fails without running.
///
/// Only writes that do not depend on each other belong here (inserts of new rows); writes
/// that read and decide keep their own transaction through `DatabaseWriter.write`. Both run
/// on the same writer queue, so they are serialized with each other as before.
package final class GroupCommit: Sendable {
    /// One queued write: runs it inside the batch (inside its own savepoint when the flag is
    /// set) and returns whether it succeeded and how to answer its caller once the batch's fate
    /// is known (`nil` = committed, else the commit's error).
    private typealias Item = @Sendable (Database, _ isolated: Bool) -> (succeeded: Bool, answer: @Sendable ((any Error)?) -> Void)

    /// A queued write, how to fail it unrun, and when it was queued.
    private typealias Queued = (run: Item, fail: @Sendable (any Error) -> Void, queuedAt: ContinuousClock.Instant)

    private struct State {
        var queue: [Queued] = []
        var draining = false
    }

    /// The most writes committed in one transaction; more wait for the next one.
    package static let maximumBatch = 512

    private let writer: any DatabaseWriter
    /// The longest a write may wait to be taken into a transaction once a write queued after it
    /// found the database locked; nil for no limit.
    private let queueWait: Duration?
    /// When a write on `writer` last failed for a lock another process held.
    private let busy: WriterBusyRecord
    private let state = NIOLockedValueBox(State())

    /// Group commit on `writer`. A write still waiting to be taken into a transaction
    /// `queueWait` after it was queued, when a write has failed for a lock another process
    /// held since (``WriterBusyRecord``), fails (``DatabaseUnavailable``) without running.
    package init(writer: any DatabaseWriter, queueWait: Duration? = nil, busy: WriterBusyRecord = WriterBusyRecord()) {
        self.writer = writer
        self.queueWait = queueWait
        self.busy = busy
    }

    /// Writes queued and not yet taken into a transaction (diagnostics and tests).
    package var pendingWrites: Int { state.withLockedValue { $0.queue.count } }

    /// Runs `body` in a transaction shared with other writes, returning once it has committed.
    package func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let run: Item = { db, isolated in
                let result: Result<T, any Error> = Result {
                    guard isolated else { return try body(db) }
                    var value: T?
                    try db.inSavepoint {
                        value = try body(db)
                        return .commit
                    }
                    guard let value else { throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "savepoint body did not run") }
                    return value
                }
                let succeeded = if case .success = result { true } else { false }
                return (succeeded, { commitError in
                    if let commitError { continuation.resume(throwing: commitError) } else { continuation.resume(with: result) }
                })
            }
            let queuedAt = ContinuousClock.now
            let startDraining = state.withLockedValue { state in
                state.queue.append((run, { continuation.resume(throwing: $0) }, queuedAt))
                guard !state.draining else { return false }
                state.draining = true
                return true
            }
            if startDraining { drain() }
        }
    }

    /// Commits the waiting writes, a batch per turn on the writer queue, until none is waiting.
    ///
    /// Each batch takes a turn of its own: the next goes to the back of the writer's queue, so
    /// a write queued there meanwhile through `DatabaseWriter.write` (a card's status change)
    /// is not held behind a steady stream of these.
    private func drain() {
        writer.asyncWriteWithoutTransaction { db in
            var batch = self.state.withLockedValue { state in
                let batch = Array(state.queue.prefix(Self.maximumBatch))
                state.queue.removeFirst(batch.count)
                if batch.isEmpty { state.draining = false }
                return batch
            }
            if batch.isEmpty { return }
            defer { self.drain() }
            // Writes that waited past the limit while a lock another process holds made a write
            // fail busy since they were queued fail without running.
            if let queueWait = self.queueWait {
                let now = ContinuousClock.now
                let busy = self.busy
                // Judged once per write: a busy failure noted meanwhile must not split the two.
                var onTime: [Queued] = []
                var late: [@Sendable (any Error) -> Void] = []
                for item in batch {
                    if now - item.queuedAt > queueWait, busy.failed(since: item.queuedAt) { late.append(item.fail) } else { onTime.append(item) }
                }
                if !late.isEmpty {
                    batch = onTime
                    for fail in late { fail(DatabaseUnavailable.writerBusy(queueWait)) }
                    if batch.isEmpty { return }
                }
            }
            var answers: [@Sendable ((any Error)?) -> Void] = []
            answers.reserveCapacity(batch.count)
            do {
                var needsSavepoints = false
                try db.inTransaction {
                    var allSucceeded = true
                    for item in batch {
                        let outcome = item.run(db, false)
                        allSucceeded = allSucceeded && outcome.succeeded
                        answers.append(outcome.answer)
                    }
                    if allSucceeded { return .commit }
                    // A lone write that failed is simply rolled back. In a batch, the failed
                    // write may have stopped halfway: undo all and run each in a savepoint.
                    needsSavepoints = batch.count > 1
                    return .rollback
                }
                if needsSavepoints {
                    answers.removeAll(keepingCapacity: true)
                    try db.inTransaction {
                        for item in batch { answers.append(item.run(db, true).answer) }
                        return .commit
                    }
                }
                for answer in answers { answer(nil) }
            } catch {
                // BEGIN or COMMIT failed: nothing in this batch was stored.
                self.busy.note(error)
                for item in batch { item.fail(error) }
            }
        }
    }
}

/// When a write on one SQLite writer last failed because another process held the database's
/// lock past the busy timeout: writes queued before that are then known to wait for a lock
/// still held, and need not each wait out the timeout again.
package final class WriterBusyRecord: Sendable {
    private let last = NIOLockedValueBox<ContinuousClock.Instant?>(nil)

    package init() {}

    /// Notes `error` if it is SQLite's busy (a lock held past the busy timeout).
    package func note(_ error: any Error) {
        guard let error = error as? DatabaseError, error.resultCode == .SQLITE_BUSY else { return }
        let now = ContinuousClock.now
        last.withLockedValue { $0 = now }
    }

    /// Whether a write failed busy after `instant`.
    package func failed(since instant: ContinuousClock.Instant) -> Bool {
        last.withLockedValue { $0.map { $0 > instant } ?? false }
    }
}
