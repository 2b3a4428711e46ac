/// A ``TokenServiceConnector`` that gives every command of another connector a time limit.
///
/// A command still running when the limit passes on `clock` is cancelled and fails with
/// ``TimedOut``, exactly like a command that failed: TMP leaves the token as it was. Whatever
/// the cancelled command produces afterwards is ignored. The call and the timer race in a
/// task group, so the limit holds for connectors that stop when cancelled, as the
/// ``TokenServiceConnector`` protocol asks of them.
public struct TimeLimitedTokenServiceConnector: TokenServiceConnector {
    /// The error of a command that did not answer in time.
    public struct TimedOut: Error, Sendable, Hashable, CustomStringConvertible {
        /// `activate`, `suspend`, `resume` or `deactivate`.
        public var command: String
        /// The limit it exceeded.
        public var limit: Duration

        /// Says which command took too long; never names a card or a PAN.
        public var description: String { "the token service did not answer \(command) within \(limit.formattedSeconds)" }
    }

    /// The default limit of one command: 10 seconds.
    public static let defaultLimit: Duration = .seconds(10)

    /// The connector whose commands are limited.
    public let base: any TokenServiceConnector
    /// The most one command may take.
    public let limit: Duration
    private let clock: any Clock<Duration>

    /// Limits each command of `base` to `limit`, measured on `clock` (tests pass a manual one).
    public init(_ base: any TokenServiceConnector, limit: Duration = Self.defaultLimit, clock: any Clock<Duration> = ContinuousClock()) {
        self.base = base
        self.limit = limit
        self.clock = clock
    }

    /// Implements ``TokenServiceConnector/activate(_:)``.
    public func activate(_ token: TokenRecord) async throws { try await run("activate", token, base.activate) }
    /// Implements ``TokenServiceConnector/suspend(_:)``.
    public func suspend(_ token: TokenRecord) async throws { try await run("suspend", token, base.suspend) }
    /// Implements ``TokenServiceConnector/resume(_:)``.
    public func resume(_ token: TokenRecord) async throws { try await run("resume", token, base.resume) }
    /// Implements ``TokenServiceConnector/deactivate(_:)``.
    public func deactivate(_ token: TokenRecord) async throws { try await run("deactivate", token, base.deactivate) }

    /// Races `call` against the limit; the first to finish decides, the other is cancelled.
    private func run(_ command: String, _ token: TokenRecord, _ call: @escaping @Sendable (TokenRecord) async throws -> Void) async throws {
        let (limit, clock) = (limit, clock)
        let answered = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await call(token)
                return true
            }
            group.addTask {
                try await clock.sleep(for: limit)
                return false
            }
            // The loser is cancelled; the group then waits for it, and drops its result.
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
        if !answered {
            throw TimedOut(command: command, limit: limit)
        }
    }
}

extension Duration {
    /// The duration in seconds, with fractions.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Whole milliseconds, rounded down but at least 1 (PostgreSQL's settings in
    /// milliseconds take 0 as "no limit").
    var wholeMilliseconds: Int64 {
        max(1, components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000)
    }

    /// `10 s`, `0.25 s`: seconds as configured, for messages.
    var formattedSeconds: String {
        let text = seconds == seconds.rounded() ? String(Int64(seconds)) : String(seconds)
        return "\(text) s"
    }
}
