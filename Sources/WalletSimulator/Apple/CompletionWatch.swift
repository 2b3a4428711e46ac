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
    }

    private let state = Mutex(State())
    /// When the call was made.
    let start = ContinuousClock.now

    /// The handler to give to issuer code.
    var handler: @Sendable (Value) -> Void {
        { [self] value in
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.calls += 1
                if state.budgetOver {
                    state.lateCalls += 1
                    return nil
                }
                guard state.calls == 1 else { return nil }
                state.answer = value
                state.answeredAt = .now
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Waits for the first answer, at most `budget`; nil when none came in time. Answers after
    /// that are counted as late and ignored, as Wallet ignores them.
    func wait(budget: Duration) async -> Value? {
        let deadline = start + budget
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

    /// How many times the handler was called in all.
    var calls: Int { state.withLock { $0.calls } }

    /// How many calls came after the budget.
    var lateCalls: Int { state.withLock { $0.lateCalls } }
}
