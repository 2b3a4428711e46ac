import Foundation
import Logging
import ProvisioningModels

/// Runs the token service commands of one token one at a time in this process, each from the
/// moment it is decided to the moment TMP has recorded its outcome.
///
/// The token service applies commands in the order they reach it; TMP records them in the
/// order their answers come back. Without an order between the two, a customer-service
/// suspension overtaken by a card's block and unblock was recorded last (TMP: suspended by
/// customer service) while the token service had applied the unblock's resumption last (the
/// token pays), and nothing was at odds for the realignment to find. Holding each token's
/// commands in line makes the order they are sent the order they are recorded.
///
/// Different tokens' commands do not wait for each other's place (a card's status change
/// still sends its tokens' commands concurrently, though one waiting its turn holds one of the
/// change's concurrent slots). A command waits at most its `patience` for its turn in this
/// process, and as long again for another instance's lease; a cancelled one leaves the line at
/// once: either way it is refused with ``TurnNotReached``, sending nothing. A command given up at its time limit releases its place when the caller is
/// answered; ``TimeLimitedTokenServiceConnector`` holds back the token's next commands until
/// the abandoned one returns.
///
/// Across instances sharing a database, a place is also a ``Lease`` in the database
/// (``TMPStore/takeTokenCommandLease(reference:holder:for:)``), taken once the place in this
/// process is: another instance's command for the token waits for it (polling) as this
/// process's commands wait for the place. The holder renews its lease while its command runs
/// and gives it back when the command is recorded; a lease its instance never gave back (the
/// process stopped, or a command given up at its time limit still runs) expires after its
/// duration. For what slips past (a command that outlived its
/// lease), TMP keeps its corrections (``TokenCorrection``) and the realignment.
final class TokenCommandOrder: @unchecked Sendable {
    /// A place's counterpart in the database, for instances sharing it.
    struct Lease: Sendable {
        /// Where the leases are.
        var store: any TMPStore
        /// This instance.
        var holder: String
        /// How long a lease lasts unless given back or renewed; a holder renews it every third
        /// of that while its command runs.
        var duration: Duration
        /// Whether the token has a command given up at its time limit that has not returned
        /// (``TimeLimitedTokenServiceConnector``): its lease is then not given back but left
        /// to expire, so that no other instance's command overtakes the late one.
        var abandoned: @Sendable (String) -> Bool = { _ in false }
        /// Where a failure to ask for the lease is logged (the command then goes ahead without it).
        var logger: Logger = Logger(label: "pushprov.tmp")
    }

    /// The first wait before asking again for another instance's lease; each further wait is
    /// half as long again, up to ``longestLeasePoll``, with a random part, so that instances
    /// waiting for one token do not ask in step.
    static let firstLeasePoll: Duration = .milliseconds(20)
    /// The longest wait between two asks for another instance's lease.
    static let longestLeasePoll: Duration = .milliseconds(250)

    /// A command that did not get its turn: the ones before it took longer than its patience,
    /// or its caller was cancelled while it waited. Nothing was sent.
    struct TurnNotReached: Error, CustomStringConvertible {
        /// Whether the caller was cancelled (otherwise the patience ran out).
        var cancelled: Bool
        var description: String {
            cancelled ? "cancelled while waiting for an earlier command for the same token" : "an earlier command for the same token took longer than this one could wait"
        }
    }

    /// One token's place, as the current task holds it (keyed by this order too: two
    /// environments in one process keep two orders).
    private struct Place: Hashable {
        var order: ObjectIdentifier
        var token: [UInt8]
    }

    /// One command waiting its turn.
    private final class Waiter: @unchecked Sendable {
        // @unchecked: both are only touched while holding the order's lock.
        /// Set once the command is in the line; taken when it is told whether it has its turn.
        var continuation: CheckedContinuation<Bool, Never>?
        /// The command gave up (patience, cancellation) before it was in the line.
        var gaveUp = false
        /// Ends the wait when the patience runs out.
        var timer: Task<Void, Never>?
        init() {}
    }

    // @unchecked: `lines` is only touched while holding `lock`.
    private let lock = NSLock()
    /// Tokens with a command in progress, each with the commands waiting behind it, first
    /// come first. Keyed by the reference's bytes: references are the same only byte for byte.
    private var lines: [[UInt8]: [Waiter]] = [:]
    /// Commands waiting for another instance's lease.
    private var leaseWaiters = 0
    /// Whether commands are held in line at all (off only in tests that stand for two
    /// instances sharing one database, whose commands no process orders).
    let enabled: Bool

    /// The places the current task holds: a command run while its token's place is held (a
    /// correction a command's outcome calls for) goes ahead in the same place.
    @TaskLocal private static var held: Set<Place> = []

    init(enabled: Bool = true) {
        self.enabled = enabled
    }

    /// Whether a command for `reference` is in progress or waiting in this process.
    func isBusy(_ reference: String) -> Bool {
        guard enabled else { return false }
        return lock.withLock { lines[Array(reference.utf8)] != nil }
    }

    /// How many commands are waiting behind another command for the same token.
    var waiting: Int { lock.withLock { lines.values.reduce(leaseWaiters) { $0 + $1.count } } }

    /// Runs `body` outside any place the current task holds: work started from a command that
    /// may outlive it (the token service call, which runs as a task of its own) must not pass
    /// for it.
    static func outsideAnyPlace<T>(isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async rethrows -> T {
        try await $held.withValue([], operation: body)
    }

    /// Runs `body` once every command for `reference` that came before it has been recorded,
    /// waiting at most `patience` for that: for this process's earlier commands (measured on
    /// `clock`), then for `lease` (another instance's command; measured in real time).
    ///
    /// - Throws: ``TurnNotReached`` when the patience ran out or the caller was cancelled
    ///   first (`body` did not run); the store's error when the lease could not be asked for;
    ///   whatever `body` throws.
    func run<T>(
        _ reference: String, patience: Duration, clock: any Clock<Duration>, lease: Lease? = nil,
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async throws -> T {
        let place = Place(order: ObjectIdentifier(self), token: Array(reference.utf8))
        guard enabled, !Self.held.contains(place) else { return try await body() }
        try await takeTurn(place.token, patience: patience, clock: clock)
        defer { release(place.token) }
        let leased = if let lease { try await waitFor(lease, reference, patience: patience) } else { false }
        return try await holding(leased ? lease : nil, reference) {
            try await Self.$held.withValue(Self.held.union([place]), operation: body)
        }
    }

    /// Runs `body` while renewing `lease` (if any), then gives it back.
    private func holding<T>(_ lease: Lease?, _ reference: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
        guard let lease else { return try await body() }
        let renewal = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: lease.duration / 3)
                guard !Task.isCancelled else { break }
                _ = try? await lease.store.takeTokenCommandLease(reference: reference, holder: lease.holder, for: lease.duration)
            }
        }
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        renewal.cancel()
        // A renewal under way ends before the lease is given back (it would take it again).
        await renewal.value
        await giveBack(lease, reference)
        return try result.get()
    }

    /// Takes `lease` for `reference`, asking again (``firstLeasePoll``, growing to
    /// ``longestLeasePoll``) while another instance holds it, for at most `patience` in real
    /// time.
    ///
    /// - Returns: Whether the lease was taken: false when the database could not be asked
    ///   (logged), and the command goes ahead without it, as it would without other instances.
    /// - Throws: ``TurnNotReached`` when the patience ran out or the caller was cancelled.
    private func waitFor(_ lease: Lease, _ reference: String, patience: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + patience
        var counted = false
        defer { if counted { lock.withLock { leaseWaiters -= 1 } } }
        var pause = Self.firstLeasePoll
        while true {
            do {
                if try await lease.store.takeTokenCommandLease(reference: reference, holder: lease.holder, for: lease.duration) { return true }
            } catch is CancellationError {
                throw TurnNotReached(cancelled: true)
            } catch {
                if Task.isCancelled { throw TurnNotReached(cancelled: true) }
                lease.logger.warning(
                    "could not ask the database for a token's command lease; the command goes ahead without it",
                    metadata: ["token": "\(Redaction.prefix(reference))", "error": "\(DatabaseUnavailable.reason(error))"]
                )
                return false
            }
            if !counted {
                lock.withLock { leaseWaiters += 1 }
                counted = true
            }
            guard ContinuousClock.now < deadline else { throw TurnNotReached(cancelled: false) }
            do {
                try await Task.sleep(for: pause * Double.random(in: 0.5...1.0))
            } catch {
                throw TurnNotReached(cancelled: true)
            }
            pause = min(pause * 1.5, Self.longestLeasePoll)
        }
    }

    /// Gives `lease` back, also when the caller was cancelled; not while a command for the
    /// token given up at its time limit still runs (the lease then expires). One that cannot
    /// be given back (the database failing) expires.
    private func giveBack(_ lease: Lease, _ reference: String) async {
        guard !lease.abandoned(reference) else { return }
        await Task { try? await lease.store.releaseTokenCommandLease(reference: reference, holder: lease.holder) }.value
    }

    /// Runs `body` in `reference`'s place if no command for it is in progress or waiting;
    /// nil, without running it, if one is.
    /// `lease`, if given, must be free too (another instance's command is not waited for).
    func runIfFree<T>(_ reference: String, lease: Lease? = nil, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T? {
        let place = Place(order: ObjectIdentifier(self), token: Array(reference.utf8))
        guard enabled, !Self.held.contains(place) else { return try await body() }
        let free: Bool = lock.withLock {
            guard lines[place.token] == nil else { return false }
            lines[place.token] = []
            return true
        }
        guard free else { return nil }
        defer { release(place.token) }
        if let lease {
            guard try await lease.store.takeTokenCommandLease(reference: reference, holder: lease.holder, for: lease.duration) else { return nil }
        }
        return try await holding(lease, reference) {
            try await Self.$held.withValue(Self.held.union([place]), operation: body)
        }
    }

    /// Takes the token's place, at once if it is free, or else once the commands before this
    /// one have released it; leaves the line when the patience runs out or the caller is
    /// cancelled.
    private func takeTurn(_ key: [UInt8], patience: Duration, clock: any Clock<Duration>) async throws {
        if Task.isCancelled { throw TurnNotReached(cancelled: true) }
        let waiter = Waiter()
        defer { lock.withLock { waiter.timer }?.cancel() }
        let turn = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                // Joining the line and storing the continuation happen under one lock, so a
                // release never finds a waiter it cannot hand the place to.
                let now: Bool? = lock.withLock {
                    if waiter.gaveUp { return false }
                    guard lines[key] != nil else {
                        lines[key] = []
                        return true
                    }
                    waiter.continuation = continuation
                    lines[key]!.append(waiter)
                    return nil
                }
                if let now {
                    continuation.resume(returning: now)
                    return
                }
                let timer = Task {
                    // Cancelled once the turn came: nothing to do then.
                    guard (try? await clock.sleep(for: patience)) != nil else { return }
                    self.leave(key, waiter)
                }
                lock.withLock { waiter.timer = timer }
            }
        } onCancel: {
            self.leave(key, waiter)
        }
        if !turn { throw TurnNotReached(cancelled: Task.isCancelled) }
    }

    /// Takes `waiter` out of the line and tells it it has no turn, if it is still waiting;
    /// one not in the line yet will not join it.
    private func leave(_ key: [UInt8], _ waiter: Waiter) {
        let continuation: CheckedContinuation<Bool, Never>? = lock.withLock {
            waiter.gaveUp = true
            guard let index = lines[key]?.firstIndex(where: { $0 === waiter }) else { return nil }
            lines[key]!.remove(at: index)
            let continuation = waiter.continuation
            waiter.continuation = nil
            return continuation
        }
        continuation?.resume(returning: false)
    }

    /// Hands the place to the next command waiting, or frees it.
    private func release(_ key: [UInt8]) {
        let next: CheckedContinuation<Bool, Never>? = lock.withLock {
            guard var line = lines[key], !line.isEmpty else {
                lines[key] = nil
                return nil
            }
            // Every waiter in the line has its continuation (stored as it joined).
            let waiter = line.removeFirst()
            lines[key] = line
            let continuation = waiter.continuation
            waiter.continuation = nil
            return continuation
        }
        next?.resume(returning: true)
    }
}
