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
/// ran out, or the pool gave up) while no call holds one, this opens a connection of its own
/// with the pool's settings about every ``probeInterval``; once one opens, and the pool has
/// still lent nothing and holds no call, a new pool takes the old one's place. Calls waiting
/// in the old pool move to the new one within their own wait, and the old pool is shut down.
///
/// A pool that is only busy (a call holds a connection) is never replaced, and probing stops
/// as soon as the pool lends a connection again.
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
        var closed = false
    }

    private let state: NIOLockedValueBox<State>
    private let makeClient: @Sendable (_ generation: Int) -> PostgresClient
    private let probe: @Sendable () async throws -> Void
    private let probeInterval: Duration
    private let logger: Logger

    /// Starts the first pool.
    ///
    /// - Parameters:
    ///   - makeClient: Makes the pool of a generation (0 for the first); each is run once.
    ///   - probe: Opens and closes one connection with the pool's settings, throwing the
    ///     reason it could not.
    ///   - probeInterval: How long after a failed probe the next one starts.
    init(
        probeInterval: Duration = RenewablePool.defaultProbeInterval,
        logger: Logger,
        makeClient: @escaping @Sendable (_ generation: Int) -> PostgresClient,
        probe: @escaping @Sendable () async throws -> Void
    ) {
        self.makeClient = makeClient
        self.probe = probe
        self.probeInterval = probeInterval
        self.logger = logger
        let client = makeClient(0)
        state = NIOLockedValueBox(State(current: Current(client: client, generation: 0), runners: [(0, Self.start(client))]))
    }

    /// About how often a pool that lends nothing is checked against a connection of its own.
    static let defaultProbeInterval: Duration = .seconds(1)

    /// The pool to lease from now.
    var current: Current { state.withLockedValue { $0.current } }

    /// A call was lent a connection; ``returned()`` follows once the call is done with it.
    func lent() {
        state.withLockedValue { state in
            state.holding += 1
            state.leases &+= 1
        }
    }

    /// A call is done with the connection it was lent.
    func returned() {
        state.withLockedValue { $0.holding -= 1 }
    }

    /// How many pools have been replaced so far.
    var renewals: Int { state.withLockedValue { $0.current.generation } }

    /// A call found no connection: its wait ran out, or the pool gave up. Starts probing
    /// unless a call holds a connection (the pool is busy, not failing) or probing already is.
    func starved() {
        state.withLockedValue { state in
            guard !state.closed, state.recovery == nil, state.holding == 0 else { return }
            let since = state.leases
            state.recovery = Task { [self] in await recover(leasesBefore: since) }
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
            guard stillStuck(leasesBefore) else { return }
            // Started outside the lock: the install below checks again, and a pool that lent
            // a connection meanwhile keeps its place (the new one is shut down unused).
            let generation = current.generation + 1
            let client = makeClient(generation)
            let runner = Self.start(client)
            let replaced: (generation: Int, task: Task<Void, Never>)? = state.withLockedValue { state in
                guard !state.closed, state.leases == leasesBefore, state.holding == 0, state.current.generation == generation - 1 else { return nil }
                let old = state.runners.last
                state.current = Current(client: client, generation: generation)
                state.runners.append((generation, runner))
                return old
            }
            guard let replaced else {
                runner.cancel()
                await runner.value
                return
            }
            logger.warning(
                "the database answers again but the connection pool was still waiting out its back-off: replaced the pool",
                metadata: ["failed probes": "\(failedProbes)", "last probe failure": "\(lastReason.isEmpty ? "none" : lastReason)", "pool generation": "\(generation)"]
            )
            // Calls still queued in the old pool fail there and move to the new one.
            replaced.task.cancel()
            await replaced.task.value
            state.withLockedValue { state in state.runners.removeAll { $0.generation == replaced.generation } }
            return
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
        recovery?.cancel()
        await recovery?.value
        for runner in runners { runner.cancel() }
        for runner in runners { await runner.value }
    }

    /// Runs `client` in a task of its own, started at once so the pool counts as running
    /// before the first call leases (postgres-nio warns about a lease that comes first).
    private static func start(_ client: PostgresClient) -> Task<Void, Never> {
        if #available(macOS 26.0, iOS 26.0, *) {
            Task.immediate { await client.run() }
        } else {
            Task { await client.run() }
        }
    }
}
