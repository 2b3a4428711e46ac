import Foundation

/// A clock that stands still until the test moves it, so timeouts and budgets are tested
/// without waiting and without timing assertions.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual clock: the time moved since it was made.
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable {
        /// Time since the clock was made.
        public var offset: Duration

        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// The time from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        /// Whether `lhs` comes first.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [UUID: Sleeper] = [:]
        var cancelled: Set<UUID> = []
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var requested: [Duration] = []
    }

    private let state = Locked(State())

    /// A clock at offset zero.
    public init() {}

    /// The current instant; moves only through `advance`.
    public var now: Instant { state.withValue { $0.now } }
    /// Zero: the clock moves exactly as far as told.
    public var minimumResolution: Duration { .zero }

    /// Every duration a caller asked to sleep, in order (deadline minus the time of asking).
    public var requestedSleeps: [Duration] { state.withValue { $0.requested } }

    /// How many callers are asleep.
    public var sleeperCount: Int { state.withValue { $0.sleepers.count } }

    /// Suspends until the test moves the clock to `deadline` (at once if it is there); throws when cancelled.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Action { case resume, cancel, wait([CheckedContinuation<Void, Never>]) }
                let action: Action = state.withValue { state in
                    state.requested.append(state.now.duration(to: deadline))
                    if state.cancelled.remove(id) != nil { return .cancel }
                    if deadline <= state.now { return .resume }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    let count = state.sleepers.count
                    let ready = state.waiters.filter { $0.count <= count }.map(\.continuation)
                    state.waiters.removeAll { $0.count <= count }
                    return .wait(ready)
                }
                switch action {
                case .resume: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                case .wait(let ready): ready.forEach { $0.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withValue { state in
                if let sleeper = state.sleepers.removeValue(forKey: id) { return Optional(sleeper) }
                state.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration` and wakes everyone whose deadline has come.
    public func advance(by duration: Duration) {
        let due = state.withValue { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.map(\.continuation)
        }
        due.forEach { $0.resume() }
    }

    /// Moves time to the earliest sleeper's deadline and wakes it (and any due with it).
    public func advanceToNextDeadline() {
        let step = state.withValue { state in state.sleepers.values.map(\.deadline).min().map { state.now.duration(to: $0) } }
        if let step { advance(by: step) }
    }

    /// Returns once at least `count` callers are asleep.
    public func waitForSleepers(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withValue { state in
                if state.sleepers.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
