import NIOConcurrencyHelpers

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
/// - a caller that finds nothing in flight inserts its row at once, in its own task: with one
///   call at a time nothing waits and no task is started. Rows that arrive meanwhile are
///   inserted by one detached task, a batch at a time, until none is waiting;
/// - a statement the database refuses for one of its rows (a duplicate key) is not a reason to
///   fail the others: the batch's rows are then inserted one by one, and only the refused row's
///   caller gets the error. An outage (``DatabaseUnavailable/isUnavailable(_:)``) fails the
///   whole batch at once, since each row alone would only wait out the same outage again;
/// - at most ``maximumBatch`` rows go into one statement; more wait for the next.
///
/// Only rows that depend on nothing else belong here; writes that read and decide keep their
/// own transaction.
final class InsertBatch<Row: Sendable>: Sendable {
    /// Inserts rows in one statement (one transaction).
    typealias Insert = @Sendable ([Row]) async throws -> Void

    private struct Waiting {
        let row: Row
        let insert: Insert
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var queue: [Waiting] = []
        var inFlight = false
        var batches = 0
        var largestBatch = 0
    }

    /// The most rows inserted by one statement.
    let maximumBatch: Int
    private let state = NIOLockedValueBox(State())

    /// Batches of at most `maximumBatch` rows.
    init(maximumBatch: Int = 256) {
        precondition(maximumBatch > 0, "a batch holds at least one row")
        self.maximumBatch = maximumBatch
    }

    /// Rows waiting for the insert in flight (diagnostics and tests).
    var waitingRows: Int { state.withLockedValue { $0.queue.count } }
    /// Statements run so far, and the most rows one of them held (tests).
    var statistics: (batches: Int, largestBatch: Int) { state.withLockedValue { ($0.batches, $0.largestBatch) } }

    /// Inserts `row` through `insert`, together with the rows of other callers that wait
    /// meanwhile, and returns once it has committed; throws the error of the statement that
    /// held it, or its own statement's when the batch was inserted row by row.
    ///
    /// A batch is inserted by the `insert` of its first row: every caller passes the same
    /// statement (the store's), given per call so that the batch holds no reference to its store.
    func insert(_ row: Row, with insert: @escaping Insert) async throws {
        let first = state.withLockedValue { state -> Bool in
            guard !state.inFlight else { return false }
            state.inFlight = true
            state.batches += 1
            state.largestBatch = max(state.largestBatch, 1)
            return true
        }
        guard first else {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let runsNow = state.withLockedValue { state -> Bool in
                    guard state.inFlight else {
                        // The insert in flight ended between the two looks: go first after all.
                        state.inFlight = true
                        state.batches += 1
                        state.largestBatch = max(state.largestBatch, 1)
                        return true
                    }
                    state.queue.append(Waiting(row: row, insert: insert, continuation: continuation))
                    return false
                }
                if runsNow { startDraining(with: [Waiting(row: row, insert: insert, continuation: continuation)]) }
            }
            return
        }
        defer { handOver() }
        try await insert([row])
    }

    /// After the caller's own insert: the rows that came meanwhile go to a detached task, or,
    /// with none, the next caller goes first.
    private func handOver() {
        let waiting = takeBatch()
        if !waiting.isEmpty { startDraining(with: waiting) }
    }

    /// The next batch, counted; empty (and nothing in flight any more) when nobody waits.
    private func takeBatch() -> [Waiting] {
        state.withLockedValue { state in
            guard !state.queue.isEmpty else {
                state.inFlight = false
                return []
            }
            let count = min(state.queue.count, maximumBatch)
            let batch = Array(state.queue.prefix(count))
            state.queue.removeFirst(count)
            state.batches += 1
            state.largestBatch = max(state.largestBatch, count)
            return batch
        }
    }

    /// Inserts `batch`, then every batch that forms meanwhile, apart from any caller's task
    /// (and its task-local values: a request's logger, a service's graceful shutdown).
    private func startDraining(with batch: [Waiting]) {
        Task.detached { [self] in
            var batch = batch
            while !batch.isEmpty {
                await commit(batch)
                batch = takeBatch()
            }
        }
    }

    private func commit(_ batch: [Waiting]) async {
        do {
            try await batch[0].insert(batch.map(\.row))
            for waiting in batch { waiting.continuation.resume() }
        } catch where batch.count > 1 && !DatabaseUnavailable.isUnavailable(error) {
            for waiting in batch {
                do {
                    try await waiting.insert([waiting.row])
                    waiting.continuation.resume()
                } catch {
                    waiting.continuation.resume(throwing: error)
                }
            }
        } catch {
            for waiting in batch { waiting.continuation.resume(throwing: error) }
        }
    }
}
