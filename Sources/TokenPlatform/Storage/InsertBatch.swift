import NIOConcurrencyHelpers
import PostgresNIO

/// Group commit for independent inserts into a database reached over the network
/// (PostgreSQL's provisioning attempts).
///
/// Each `signed-cards` call records one attempt row. Alone, each row is a statement, a round
/// trip and a commit that waits for the server's WAL flush, holding one of the pool's few
/// connections all the while: with the attempt's insert left out, the same server answered
/// about twice the calls per second. Here the rows that arrive while an insert is in flight
/// wait for it and then go to the database together, in one statement (one round trip, one
/// commit, one flush):
///
/// - a caller returns only once the statement holding its row has committed, so an answer is
///   never sent for a row that could still be lost (durability unchanged);
/// - a caller that finds nothing in flight inserts its row at once, with nothing to wait for.
///   Rows that arrive meanwhile are inserted by one detached task, a batch at a time, until
///   none is waiting;
/// - waiting in the queue counts as waiting for a connection: a row still queued when
///   ``queueWait`` (the store's `--database-wait`) has passed is not inserted, and its caller
///   gets ``DatabaseUnavailable`` (503), as a call that found no connection within its wait
///   does; a batch's statement gets what is left of its oldest row's wait, and when that runs
///   out (nothing was sent) the rows whose own wait lasts go back to the front of the queue.
///   So a call's time in the store stays bounded as before: one wait, then one statement.
///   (Rows inserted one by one after their batch was refused for one of them each get a wait
///   of their own: that is rare, and their batch did get a connection in time.)
/// - a batch that fails for an outage (``DatabaseUnavailable/isUnavailable(_:)``) fails its
///   own rows; the rows queued behind it try in turn, each within its own wait, as calls that
///   were not batched would (one lost connection is not the whole pool's outage);
/// - a batch refused for one of its rows (``isRowRefusal``: an integrity constraint, such as a
///   key already recorded) is inserted again row by row, so only that row's caller gets the
///   error; an outage meanwhile fails the rows not yet inserted. Any other error (a missing
///   table or privilege, a server fault) fails the batch's callers with it;
/// - at most ``maximumBatch`` rows go into one statement; more wait for the next;
/// - a caller's cancellation is not heeded: its row goes in or fails within the bounds above,
///   as a statement already sent would. (A cancelled statement would lose the store's bound
///   on a connection gone silent, and hold up every row queued behind it.)
///
/// Only rows that depend on nothing else belong here; writes that read and decide keep their
/// own transaction.
final class InsertBatch<Row: Sendable>: Sendable {
    /// Inserts rows in one statement (one transaction), its wait for a connection counted from
    /// the instant given (when its oldest row began waiting).
    typealias Insert = @Sendable (_ rows: [Row], _ waitingSince: ContinuousClock.Instant) async throws -> Void

    private struct Waiting {
        let row: Row
        let insert: Insert
        let queuedAt: ContinuousClock.Instant
        /// Resumed with `true` when the caller is to insert its row itself after all (the
        /// insert in flight ended between its two looks), `false` once its row committed.
        let continuation: CheckedContinuation<Bool, any Error>
    }

    private struct State {
        var queue: [Waiting] = []
        var inFlight = false
        var batches = 0
        var largestBatch = 0
    }

    /// The most rows inserted by one statement.
    let maximumBatch: Int
    /// How long a row may wait in the queue before it fails as ``DatabaseUnavailable``.
    let queueWait: Duration
    /// Whether an error refuses one row of a statement rather than the statement itself.
    let isRowRefusal: @Sendable (any Error) -> Bool
    private let state = NIOLockedValueBox(State())

    /// The time rows are queued and expire by (tests move it by hand).
    private let now: @Sendable () -> ContinuousClock.Instant
    /// Run between a caller's two looks at the insert in flight (tests end that insert there).
    private let betweenLooks: (@Sendable () async -> Void)?

    /// Batches of at most `maximumBatch` rows, each waiting at most `queueWait` for its turn.
    init(
        maximumBatch: Int = 256,
        queueWait: Duration,
        isRowRefusal: @escaping @Sendable (any Error) -> Bool = InsertBatch.isIntegrityViolation,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        betweenLooks: (@Sendable () async -> Void)? = nil
    ) {
        precondition(maximumBatch > 0, "a batch holds at least one row")
        self.maximumBatch = maximumBatch
        self.queueWait = queueWait
        self.isRowRefusal = isRowRefusal
        self.now = now
        self.betweenLooks = betweenLooks
    }

    /// PostgreSQL's refusal of a row (SQLSTATE class 23: a unique key, a foreign key, a check,
    /// a value that may not be null).
    static func isIntegrityViolation(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, error.code == .server, let state = error.serverInfo?[.sqlState] else { return false }
        return state.hasPrefix("23")
    }

    /// Rows waiting for the insert in flight (diagnostics and tests).
    var waitingRows: Int { state.withLockedValue { $0.queue.count } }
    /// Whether an insert is in flight (tests).
    var isInFlight: Bool { state.withLockedValue { $0.inFlight } }
    /// Statements run so far, and the most rows one of them held (tests).
    var statistics: (batches: Int, largestBatch: Int) { state.withLockedValue { ($0.batches, $0.largestBatch) } }

    /// Inserts `row` through `insert`, together with the rows of other callers that wait
    /// meanwhile, and returns once it has committed; throws the error of the statement that
    /// held it, its own statement's when the batch was inserted row by row, or
    /// ``DatabaseUnavailable`` when it waited past ``queueWait``.
    ///
    /// A batch is inserted by the `insert` of its first row: every caller passes the same
    /// statement (the store's), given per call so that the batch holds no reference to its store.
    func insert(_ row: Row, with insert: @escaping Insert) async throws {
        let called = now()
        var first = state.withLockedValue { state in Self.goFirst(&state) }
        if !first {
            if let betweenLooks { await betweenLooks() }
            first = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
                let goesFirst = state.withLockedValue { state -> Bool in
                    // The insert in flight may have ended since the first look.
                    if Self.goFirst(&state) { return true }
                    state.queue.append(Waiting(row: row, insert: insert, queuedAt: called, continuation: continuation))
                    return false
                }
                if goesFirst { continuation.resume(returning: true) }
            }
        }
        guard first else { return }
        defer { handOver() }
        // In a task of its own, which the caller's cancellation does not reach (it keeps the
        // caller's task-local values: its request's logger).
        try await Task { try await insert([row], called) }.value
    }

    /// Takes the turn when nothing is in flight.
    private static func goFirst(_ state: inout State) -> Bool {
        guard !state.inFlight else { return false }
        state.inFlight = true
        state.batches += 1
        state.largestBatch = max(state.largestBatch, 1)
        return true
    }

    /// After the caller's own insert: the rows that came meanwhile go to a detached task, or,
    /// with none, the next caller goes first.
    private func handOver() {
        let batch = takeBatch()
        guard !batch.isEmpty else { return }
        Task.detached { [self] in
            // Apart from any caller's task (and its task-local values: a request's logger, a
            // service's graceful shutdown).
            var batch = batch
            while !batch.isEmpty {
                await commit(batch)
                batch = takeBatch()
            }
        }
    }

    /// The next batch, counted; empty (and nothing in flight any more) when nobody waits.
    /// Rows that waited past ``queueWait`` fail here, without a statement.
    private func takeBatch() -> [Waiting] {
        let deadline = now() - queueWait
        let (batch, expired): ([Waiting], [Waiting]) = state.withLockedValue { state in
            let expired = state.queue.filter { $0.queuedAt <= deadline }
            if !expired.isEmpty { state.queue.removeAll { $0.queuedAt <= deadline } }
            guard !state.queue.isEmpty else {
                state.inFlight = false
                return ([], expired)
            }
            let count = min(state.queue.count, maximumBatch)
            let batch = Array(state.queue.prefix(count))
            state.queue.removeFirst(count)
            state.batches += 1
            state.largestBatch = max(state.largestBatch, count)
            return (batch, expired)
        }
        if !expired.isEmpty {
            let error = DatabaseUnavailable("no database connection within \(queueWait.formattedSeconds)")
            for waiting in expired { waiting.continuation.resume(throwing: error) }
        }
        return batch
    }

    private func commit(_ batch: [Waiting]) async {
        do {
            try await batch[0].insert(batch.map(\.row), batch.map(\.queuedAt).min() ?? now())
            for waiting in batch { waiting.continuation.resume(returning: false) }
        } catch where batch.count > 1 && isRowRefusal(error) {
            for (index, waiting) in batch.enumerated() {
                do {
                    try await waiting.insert([waiting.row], now())
                    waiting.continuation.resume(returning: false)
                } catch where DatabaseUnavailable.isUnavailable(error) {
                    for rest in batch[index...] { rest.continuation.resume(throwing: error) }
                    return
                } catch {
                    waiting.continuation.resume(throwing: error)
                }
            }
        } catch let error as DatabaseUnavailable where error.waitRanOut {
            // Nothing was sent. The oldest row's wait is over; rows with time left try again.
            let deadline = now() - queueWait
            let retry = batch.filter { $0.queuedAt > deadline }
            for waiting in batch where waiting.queuedAt <= deadline { waiting.continuation.resume(throwing: error) }
            if !retry.isEmpty { state.withLockedValue { $0.queue.insert(contentsOf: retry, at: 0) } }
        } catch {
            for waiting in batch { waiting.continuation.resume(throwing: error) }
        }
    }
}
