import Foundation

/// A ``TokenServiceConnector`` that gives every command of another connector a time limit.
///
/// A command still running when the limit passes on `clock` is cancelled and fails with
/// ``TimedOut``, exactly like a command that failed: TMP leaves the token as it was. Whatever
/// the cancelled command produces afterwards is ignored. The limit holds for connectors that
/// ignore cancellation too: the caller is answered when it passes, and the command, cancelled,
/// ends in its own time.
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
    ///
    /// Both run as tasks of their own, not as children of the caller: a task group would wait
    /// for a cancelled command to return, so a connector that ignores cancellation would hold
    /// the request (a `PATCH` batch, a realignment, a graceful shutdown) until it did. The
    /// caller is answered when the limit passes, whatever the command does afterwards.
    /// Cancelling the caller cancels the command and answers `CancellationError` at once.
    private func run(_ command: String, _ token: TokenRecord, _ call: @escaping @Sendable (TokenRecord) async throws -> Void) async throws {
        let (limit, clock) = (limit, clock)
        let race = Race()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                race.start(
                    continuation,
                    command: Task {
                        do {
                            try await call(token)
                            race.finish(.success(()))
                        } catch {
                            race.finish(.failure(error))
                        }
                    },
                    timer: Task {
                        // A timer cancelled because the command answered first ends here.
                        guard (try? await clock.sleep(for: limit)) != nil else { return }
                        race.finish(.failure(TimedOut(command: command, limit: limit)))
                    }
                )
            }
        } onCancel: {
            race.finish(.failure(CancellationError()))
        }
    }
}

/// One command's race against its time limit: the first outcome answers the caller, once, and
/// cancels both tasks; later outcomes are dropped.
private final class Race: @unchecked Sendable {
    // @unchecked: every stored property is only touched while holding `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Void, any Error>?
    private var tasks: [Task<Void, Never>] = []
    /// An outcome that came before `start` (the caller cancelled before the race began).
    private var early: Result<Void, any Error>?
    private var finished = false

    func start(_ continuation: CheckedContinuation<Void, any Error>, command: Task<Void, Never>, timer: Task<Void, Never>) {
        let settled: Result<Void, any Error>? = lock.withLock {
            if let early { return early }
            self.continuation = continuation
            tasks = [command, timer]
            return nil
        }
        if let settled {
            command.cancel()
            timer.cancel()
            continuation.resume(with: settled)
        }
    }

    func finish(_ outcome: Result<Void, any Error>) {
        let (waiting, tasks): (CheckedContinuation<Void, any Error>?, [Task<Void, Never>]) = lock.withLock {
            guard !finished else { return (nil, []) }
            finished = true
            guard let continuation else {
                early = outcome
                return (nil, [])
            }
            self.continuation = nil
            defer { self.tasks = [] }
            return (continuation, self.tasks)
        }
        for task in tasks { task.cancel() }
        waiting?.resume(with: outcome)
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
