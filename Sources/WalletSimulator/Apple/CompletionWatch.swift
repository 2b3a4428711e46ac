// Used only by the simulated Wallet, which exists where PassKit does not; `Mutex` also needs
// macOS 15, above the package's macOS 14.
#if !canImport(PassKit)
import Foundation
import Synchronization

/// Watches a completion handler that Apple hands to issuer code: the first answer and when it
/// came, every later call (a crash in a real app), and answers after the budget (ignored by
/// Wallet).
final class CompletionWatch<Value: Sendable>: Sendable {
    private struct State {
        var answer: Value?
        var answeredAt: ContinuousClock.Instant?
        var calls = 0
        var lateCalls = 0
        var budgetOver = false
        var waiter: CheckedContinuation<Void, Never>?
        /// Where calls go once the caller has read ``calls``: a second call can come any time
        /// later (a late network answer after the issuer's own deadline answered).
        var laterCalls: (@Sendable (Int) -> Void)?
    }

    private let state = Mutex(State())
    /// When the call was made.
    let start = ContinuousClock.now
    /// When the answer is due; an answer after it is late however soon the waiter wakes.
    let deadline: ContinuousClock.Instant

    /// Watches a call made now that must be answered within `budget`.
    init(budget: Duration) {
        deadline = start + budget
    }

    /// The handler to give to issuer code.
    var handler: @Sendable (Value) -> Void {
        { [self] value in
            let now = ContinuousClock.now
            let (waiter, report, calls) = state.withLock { state -> (CheckedContinuation<Void, Never>?, (@Sendable (Int) -> Void)?, Int) in
                state.calls += 1
                let report = state.calls > 1 ? state.laterCalls : nil
                if state.budgetOver || now > deadline {
                    state.budgetOver = true
                    state.lateCalls += 1
                    return (nil, report, state.calls)
                }
                guard state.calls == 1 else { return (nil, report, state.calls) }
                state.answer = value
                state.answeredAt = now
                defer { state.waiter = nil }
                return (state.waiter, nil, state.calls)
            }
            waiter?.resume()
            report?(calls)
        }
    }

    /// Waits for the first answer, at most `budget`; nil when none came in time. Answers after
    /// that are counted as late and ignored, as Wallet ignores them.
    func wait() async -> Value? {
        let deadline = deadline
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                await withCheckedContinuation { continuation in
                    let answered = state.withLock { state -> Bool in
                        if state.calls > 0 || state.budgetOver { return true }
                        state.waiter = continuation
                        return false
                    }
                    if answered { continuation.resume() }
                }
            }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
            }
            await group.next()
            // Whichever came first, the other must end: close the budget and wake the waiter.
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if state.calls == 0 { state.budgetOver = true }
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
            group.cancelAll()
        }
        return state.withLock { state in
            if state.calls == 0 { state.budgetOver = true }
            return state.answer
        }
    }

    /// How long the first answer took; nil when there was none in time.
    var elapsed: Duration? {
        state.withLock { $0.answeredAt.map { $0 - start } }
    }

    /// From now on, hands every further call of a handler already called (its count of
    /// calls so far) to `report`: for a caller that has read ``calls`` as `seen` and
    /// returned. A call that came between that read and this is reported at once.
    func reportLaterCalls(after seen: Int, to report: @escaping @Sendable (Int) -> Void) {
        let missed = state.withLock { state -> Int? in
            state.laterCalls = report
            return state.calls > max(seen, 1) ? state.calls : nil
        }
        if let missed { report(missed) }
    }

    /// How many times the handler was called in all.
    var calls: Int { state.withLock { $0.calls } }

    /// How many calls came after the budget.
    var lateCalls: Int { state.withLock { $0.lateCalls } }
}
#endif
