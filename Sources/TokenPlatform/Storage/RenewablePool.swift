import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// The PostgreSQL store's connection pool, replaced by a fresh one when the database answers
/// again while the pool is still waiting out its back-off.
///
/// postgres-nio's pool retries a failed connect after a back-off that grows by a quarter per
/// failure, up to a minute, and cannot be told to try sooner: after an outage of a few
/// minutes (a failover, a restart for an upgrade) it could go on refusing requests for up to
/// a minute after the database is back. So when a call could not get a connection (the wait
/// ran out, or the pool gave up) while no call holds one, this checks the database with a
/// connection of its own and the pool's settings (connect, `SELECT 1`), again
/// ``probeInterval`` after each failed check. Once one succeeds, the pool is asked for a
/// connection once more, briefly (``poolCheckWait``); if it still cannot lend one, a new pool
/// takes its place. Calls waiting in the old pool move to the new one within their own wait,
/// and the old pool is shut down.
///
/// A pool that lends a connection is never replaced: a call claims its connection and the
/// replacement retires the old pool in one step under one lock, so no call runs on a pool
/// being shut down, and the replacement needs no call to hold a connection. A pool is replaced
/// at most once per ``minimumRenewalInterval``, so a database that takes probes but refuses
/// the pool's connections cannot set off a storm of new pools. Probing stops as soon as the
/// pool lends a connection again.
///
/// Pools and probes run in detached tasks: a task that starts them may run under a service's
/// graceful-shutdown handler (a request, the realignment), and postgres-nio's pool stops when
/// the graceful shutdown it runs under begins, while requests are still being drained.
final class RenewablePool: Sendable {
    /// The pool calls lease from, and how many pools came before it.
    struct Current: Sendable {
        let client: PostgresClient
        let generation: Int
    }

    private struct State {
        var current: Current
        /// Runs the current pool (the last) and any replaced pool still shutting down.
        var runners: [(generation: Int, task: Task<Void, Never>)]
        /// Calls holding a connection now.
        var holding = 0
        /// Connections lent so far, by every pool.
        var leases: UInt64 = 0
        /// Probing for a database that answers, while the pool lends nothing.
        var recovery: Task<Void, Never>?
        /// When the current pool replaced the one before it.
        var renewedAt: ContinuousClock.Instant?
        var closed = false
    }

    private let state: NIOLockedValueBox<State>
    private let makeClient: @Sendable (_ generation: Int) -> PostgresClient
    private let probe: @Sendable () async throws -> Void
    private let probeInterval: Duration
    private let poolCheckWait: Duration
    private let minimumRenewalInterval: Duration
    private let logger: Logger

    /// Starts the first pool.
    ///
    /// - Parameters:
    ///   - makeClient: Makes the pool of a generation (0 for the first); each is run once.
    ///   - probe: Opens and closes one connection with the pool's settings, throwing the
    ///     reason it could not.
    ///   - probeInterval: How long after a failed probe the next one starts.
    ///   - poolCheckWait: How long the pool gets to lend a connection once a probe succeeded,
    ///     before it is replaced.
    ///   - minimumRenewalInterval: The least time between two replacements.
    init(
        probeInterval: Duration = RenewablePool.defaultProbeInterval,
        poolCheckWait: Duration = RenewablePool.defaultPoolCheckWait,
        minimumRenewalInterval: Duration = .seconds(30),
        logger: Logger,
        makeClient: @escaping @Sendable (_ generation: Int) -> PostgresClient,
        probe: @escaping @Sendable () async throws -> Void
    ) {
        self.makeClient = makeClient
        self.probe = probe
        self.probeInterval = probeInterval
        self.poolCheckWait = poolCheckWait
        self.minimumRenewalInterval = minimumRenewalInterval
        self.logger = logger
        let client = makeClient(0)
        state = NIOLockedValueBox(State(current: Current(client: client, generation: 0), runners: [(0, Self.start(client))]))
    }

    /// A connection lent by a pool that has been replaced meanwhile (``claim(generation:)``).
    struct Retired: Error {}

    /// How long after a failed probe the next one starts.
    static let defaultProbeInterval: Duration = .seconds(1)

    /// How long the pool gets to lend a connection once a probe succeeded.
    static let defaultPoolCheckWait: Duration = .milliseconds(250)

    /// How long a probe's connect may take, and then its query.
    static let probeQueryTimeout: TimeAmount = .seconds(5)

    /// The pool to lease from now.
    var current: Current { state.withLockedValue { $0.current } }

    /// A call was lent a connection by the pool of `generation`. False when that pool has been
    /// replaced: the call must not use the connection (the pool is being shut down) and leases
    /// again from ``current``. After true, ``returned()`` follows once the call is done with it.
    func claim(generation: Int) -> Bool {
        state.withLockedValue { state in
            guard state.current.generation == generation else { return false }
            state.holding += 1
            state.leases &+= 1
            return true
        }
    }

    /// A call is done with the connection it claimed.
    func returned() {
        state.withLockedValue { $0.holding -= 1 }
    }

    /// Whether probing (or a replacement) is under way.
    var isProbing: Bool { state.withLockedValue { $0.recovery != nil } }

    /// How many pools have been replaced so far.
    var renewals: Int { state.withLockedValue { $0.current.generation } }

    /// A call found no connection: its wait ran out, or the pool gave up. Starts probing
    /// unless a call holds a connection (the pool is busy, not failing) or probing already is.
    func starved() {
        state.withLockedValue { state in
            guard !state.closed, state.recovery == nil, state.holding == 0 else { return }
            // Not again so soon after a replacement: a database that takes probes but refuses
            // the pool's connections would otherwise get a new pool every few seconds.
            if let renewedAt = state.renewedAt, ContinuousClock.now - renewedAt < minimumRenewalInterval { return }
            let since = state.leases
            state.recovery = Task.detached { [self] in await recover(leasesBefore: since) }
        }
    }

    /// Probes until a connection opens, then renews the pool unless it lent a connection
    /// meanwhile; ends early once the pool lends one, a call holds one, or on ``close()``.
    private func recover(leasesBefore: UInt64) async {
        defer { state.withLockedValue { $0.recovery = nil } }
        var failedProbes = 0
        var lastReason = ""
        while !Task.isCancelled {
            guard stillStuck(leasesBefore) else { return }
            do {
                try await probe()
            } catch {
                failedProbes += 1
                lastReason = PostgresStore.reason(error)
                do { try await Task.sleep(for: probeInterval) } catch { return }
                continue
            }
            guard stillStuck(leasesBefore), await !currentPoolLends() else { return }
            // Started outside the lock: the install below checks again, and a pool that lent
            // a connection meanwhile keeps its place (the new one is shut down unused).
            let generation = current.generation + 1
            let client = makeClient(generation)
            let runner = Self.start(client)
            let replaced: (generation: Int, task: Task<Void, Never>)? = state.withLockedValue { state in
                guard !state.closed, state.leases == leasesBefore, state.holding == 0, state.current.generation == generation - 1 else { return nil }
                let old = state.runners.last
                // From here on no call can claim a connection of the old pool.
                state.current = Current(client: client, generation: generation)
                state.runners.append((generation, runner))
                state.renewedAt = .now
                return old
            }
            guard let replaced else {
                runner.cancel()
                await runner.value
                return
            }
            // Calls still queued in the old pool fail there and move to the new one.
            replaced.task.cancel()
            logger.warning(
                "the database answers again but the connection pool was still waiting out its back-off: replaced the pool",
                metadata: ["failed_probes": "\(failedProbes)", "last_probe_failure": "\(lastReason.isEmpty ? "none" : lastReason)", "pool_generation": "\(generation)"]
            )
            await replaced.task.value
            state.withLockedValue { state in state.runners.removeAll { $0.generation == replaced.generation } }
            return
        }
    }

    /// Whether the current pool lends a connection within ``poolCheckWait`` (it reconnected on
    /// its own, or it was only slow to connect). The lease is withdrawn when the wait ends.
    private func currentPoolLends() async -> Bool {
        let client = current.client
        let wait = poolCheckWait
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    try await client.withConnection { _ in }
                    return true
                } catch {
                    return false
                }
            }
            group.addTask {
                try? await Task.sleep(for: wait)
                return false
            }
            let lent = await group.next() ?? false
            group.cancelAll()
            return lent
        }
    }

    /// Whether the pool has lent nothing since the starvation and no call holds a connection.
    private func stillStuck(_ leasesBefore: UInt64) -> Bool {
        state.withLockedValue { !$0.closed && $0.leases == leasesBefore && $0.holding == 0 }
    }

    /// Stops probing and shuts down every pool, closing their connections.
    func close() async {
        let (recovery, runners) = state.withLockedValue { state in
            state.closed = true
            return (state.recovery, state.runners.map(\.task))
        }
        // Everything is stopped first, so a probe waiting on its connect does not hold up the
        // pools' shutdown.
        recovery?.cancel()
        for runner in runners { runner.cancel() }
        await recovery?.value
        for runner in runners { await runner.value }
        // A pool installed while this waited was cancelled by its own installer (it saw
        // `closed`), or is in `runners` above.
    }

    /// Runs `client` in a detached task of its own (no graceful-shutdown handler of the caller
    /// applies), started at once so the pool counts as running before the first call leases
    /// (postgres-nio warns about a lease that comes first).
    private static func start(_ client: PostgresClient) -> Task<Void, Never> {
        if #available(macOS 26.0, iOS 26.0, watchOS 26.0, tvOS 26.0, visionOS 26.0, *) {
            Task.immediateDetached { await client.run() }
        } else {
            Task.detached { await client.run() }
        }
    }
}
