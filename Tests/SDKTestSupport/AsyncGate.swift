/// A gate tasks wait at until the test opens it; opening is permanent.
public final class AsyncGate: Sendable {
    private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>], arrived: Int, arrivalWaiters: [(Int, CheckedContinuation<Void, Never>)])>((false, [], 0, []))

    /// A closed gate.
    public init() {}

    /// Waits until the gate is open.
    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (isOpen, arrivals) = state.withValue { state in
                state.arrived += 1
                let arrived = state.arrived
                let ready = state.arrivalWaiters.filter { $0.0 <= arrived }.map(\.1)
                state.arrivalWaiters.removeAll { $0.0 <= arrived }
                if !state.open { state.waiters.append(continuation) }
                return (state.open, ready)
            }
            arrivals.forEach { $0.resume() }
            if isOpen { continuation.resume() }
        }
    }

    /// Returns once `count` tasks have arrived at the gate (opened or not).
    public func waitForArrivals(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withValue { state in
                if state.arrived >= count { return true }
                state.arrivalWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// How many tasks have arrived at the gate so far.
    public var arrivals: Int { state.withValue { $0.arrived } }

    /// Opens the gate and releases every waiter.
    public func open() {
        let waiters = state.withValue { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        waiters.forEach { $0.resume() }
    }
}
