/// Runs work against a time budget and always answers within it.
public enum Deadline {
    /// How a deadline-bounded operation ended.
    public enum Outcome<Value: Sendable>: Sendable {
        /// The operation finished in time, with its value or its error.
        case finished(Result<Value, any Error>)
        /// The budget ran out first; the operation was cancelled and its late result is dropped.
        case timedOut
        /// The calling task was cancelled first; the operation was cancelled too.
        case cancelled
    }

    /// Runs `operation` until it finishes, `budget` passes on `clock`, or the calling task is
    /// cancelled — whichever comes first — and returns at that moment.
    ///
    /// Unlike a task group, this never waits for a slow operation to notice its cancellation:
    /// an operation that ignores cancellation keeps running in the background, and whatever
    /// it produces later is discarded.
    public static func run<Value: Sendable>(
        within budget: Duration,
        clock: any Clock<Duration>,
        operation: @escaping @Sendable () async throws -> Value
    ) async -> Outcome<Value> {
        let race = Race<Outcome<Value>>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                race.arm(continuation)
                let work = Task {
                    do {
                        race.resolve(.finished(.success(try await operation())))
                    } catch {
                        race.resolve(.finished(.failure(error)))
                    }
                }
                let timer = Task {
                    do {
                        try await clock.sleep(for: budget)
                        race.resolve(.timedOut)
                    } catch {
                        // Cancelled: someone else has already resolved the race.
                    }
                }
                race.onResolve {
                    work.cancel()
                    timer.cancel()
                }
            }
        } onCancel: {
            race.resolve(.cancelled)
        }
    }
}

/// A one-shot rendezvous: the first `resolve` resumes the continuation (now, or as soon as
/// it is armed) and runs the clean-up; later resolves are ignored.
private final class Race<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, Never>?
        var result: Value?
        var resolved = false
        var cleanup: (@Sendable () -> Void)?
    }

    private let state = Locked(State())

    func arm(_ continuation: CheckedContinuation<Value, Never>) {
        let ready: Value? = state.withLock { state in
            if let result = state.result { return result }
            state.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(returning: ready) }
    }

    func onResolve(_ cleanup: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state in
            if state.resolved { return true }
            state.cleanup = cleanup
            return false
        }
        if runNow { cleanup() }
    }

    func resolve(_ value: Value) {
        let (continuation, cleanup): (CheckedContinuation<Value, Never>?, (@Sendable () -> Void)?) = state.withLock { state in
            guard !state.resolved else { return (nil, nil) }
            state.resolved = true
            defer { state.continuation = nil; state.cleanup = nil }
            if state.continuation == nil { state.result = value }
            return (state.continuation, state.cleanup)
        }
        continuation?.resume(returning: value)
        cleanup?()
    }
}
