import Foundation
import HummingbirdCore
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How many client connections the server holds open at once.
///
/// Each connection is an open file. A server that accepts connections until the process runs
/// out of files then fails where it can least afford to: the database cannot open its files or
/// connections, and accepting fails in a loop. With a limit, the server stops accepting while
/// it holds that many connections; new ones wait in the kernel's listen queue (and are refused
/// by the kernel only once that queue is full) until one closes. The server may take a few
/// more than the limit in one read of the listening socket (NIO reads up to four accepted
/// connections at a time).
public enum ConnectionLimit {
    /// The limits `--max-connections` accepts.
    public static let range = 1...1_000_000
    /// Open files kept for everything but client connections: the database's files or
    /// connections, key and art files, the listening socket, logs.
    public static let reservedFiles = 256
    /// The default never goes above this, however many files the process may open.
    public static let defaultCeiling = 10_000

    /// The default limit for a process that may open `openFileLimit` files: what is left after
    /// ``reservedFiles``, at most ``defaultCeiling`` and at least 16.
    public static func defaultLimit(openFileLimit: Int) -> Int {
        max(16, min(defaultCeiling, openFileLimit - reservedFiles))
    }

    /// This process's limit on open files (`ulimit -n`; `Int.max` when unlimited or unknown).
    public static func openFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return Int.max }
        return count(limit.rlim_cur)
    }

    /// Raises this process's limit on open files to the most it may have (as a server should:
    /// the usual 1,024 is a default for interactive shells) and returns the limit now in force.
    @discardableResult
    public static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return Int.max }
        #if canImport(Darwin)
        // macOS refuses a soft limit above OPEN_MAX (its hard limit is usually unlimited).
        let target = min(limit.rlim_max, rlim_t(darwinOpenMax))
        #else
        let target = limit.rlim_max
        #endif
        if limit.rlim_cur < target {
            var raised = limit
            raised.rlim_cur = target
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return count(limit.rlim_cur)
    }

    #if canImport(Darwin)
    /// `OPEN_MAX` of `<sys/syslimits.h>`: the most `setrlimit(RLIMIT_NOFILE)` accepts on macOS.
    private static let darwinOpenMax = 10_240
    #endif

    #if canImport(Glibc)
    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let resource = RLIMIT_NOFILE
    #endif

    private static func count(_ value: rlim_t) -> Int {
        // Unlimited (RLIM_INFINITY) is the largest value the type holds.
        value > rlim_t(Int.max) ? Int.max : Int(value)
    }
}

/// Hummingbird's hook that decides whether the server accepts more connections: at most
/// `limit` open, counted into the open-connections gauge, and a warning when the limit is
/// reached (at most once a minute while it keeps being reached).
struct ConnectionCap: AvailableConnectionsDelegate {
    let limit: Int
    let logger: Logger
    let metrics: PlatformMetrics?
    private var open = 0
    private var lastWarning: ContinuousClock.Instant?

    init(limit: Int, logger: Logger, metrics: PlatformMetrics?) {
        self.limit = limit
        self.logger = logger
        self.metrics = metrics
    }

    mutating func connectionOpened() {
        open += 1
        metrics?.connectionOpened()
        guard open >= limit else { return }
        let now = ContinuousClock.now
        if let lastWarning, now - lastWarning < .seconds(60) { return }
        lastWarning = now
        logger.warning(
            "connection limit reached: new connections wait in the listen queue until one closes",
            metadata: ["limit": "\(limit)", "open": "\(open)"]
        )
    }

    mutating func connectionClosed() {
        open -= 1
        metrics?.connectionClosed()
    }

    func isAcceptingNewConnections() -> Bool {
        open < limit
    }
}
