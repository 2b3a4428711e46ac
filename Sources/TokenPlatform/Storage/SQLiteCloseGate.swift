import NIOConcurrencyHelpers

/// What lets a call into a ``SQLiteStore`` reach its connections: every call passes it
/// (``enter()`` … ``leave()``), and ``SQLiteStore/close()`` shuts it, so a call that races the
/// close either finishes before the connections close or is refused with
/// ``DatabaseUnavailable``, never run on a closed connection.
final class SQLiteCloseGate: Sendable {
    private enum Phase {
        case open
        /// Refusing new calls; `drained` resumes the closer once the running calls are done.
        case closing(drained: CheckedContinuation<Bool, Never>?)
        case closed
    }

    private struct State {
        var phase = Phase.open
        var running = 0
        /// Later ``beginClosing()`` calls, waiting for the first to finish.
        var waitingForClose: [CheckedContinuation<Bool, Never>] = []
    }

    private let state = NIOLockedValueBox(State())

    /// Admits a call, or refuses it once closing has begun.
    func enter() throws(DatabaseUnavailable) {
        let admitted = state.withLockedValue { state in
            guard case .open = state.phase else { return false }
            state.running += 1
            return true
        }
        guard admitted else { throw DatabaseUnavailable("the SQLite database is closed (the server is stopping)") }
    }

    /// Ends a call ``enter()`` admitted.
    func leave() {
        let drained: CheckedContinuation<Bool, Never>? = state.withLockedValue { state in
            state.running -= 1
            guard state.running == 0, case .closing(let drained?) = state.phase else { return nil }
            state.phase = .closing(drained: nil)
            return drained
        }
        drained?.resume(returning: true)
    }

    /// Shuts the gate and waits for the calls already admitted. Returns true to the first
    /// caller, which then closes the connections and calls ``finishClosing()``; a later caller
    /// waits until that is done and gets false.
    func beginClosing() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let now: Bool? = state.withLockedValue { state in
                switch state.phase {
                case .open:
                    if state.running == 0 {
                        state.phase = .closing(drained: nil)
                        return true
                    }
                    state.phase = .closing(drained: continuation)
                    return nil
                case .closing:
                    state.waitingForClose.append(continuation)
                    return nil
                case .closed:
                    return false
                }
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// Marks the connections closed and releases the later ``beginClosing()`` callers.
    func finishClosing() {
        let waiting = state.withLockedValue { state in
            state.phase = .closed
            defer { state.waitingForClose = [] }
            return state.waitingForClose
        }
        for continuation in waiting { continuation.resume(returning: false) }
    }
}
