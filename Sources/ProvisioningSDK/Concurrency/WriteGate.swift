/// Lets work that may outlive its caller's answer write only until the caller closes the
/// gate; closing waits for a write under way. A Wallet extension closes one before it answers
/// Wallet: once answered, iOS may suspend it at any moment, and ends a process suspended while
/// it holds a lock on a file in the shared container.
final class WriteGate: Sendable {
    private let closed = Locked(false)

    /// Runs `body` unless the gate is closed (nil then). The gate stays open while it runs.
    func ifOpen<T>(_ body: () throws -> T) rethrows -> T? {
        try closed.withLock { closed in closed ? nil : try body() }
    }

    /// Closes the gate, after a `body` under way has returned.
    func close() {
        closed.withLock { $0 = true }
    }
}
