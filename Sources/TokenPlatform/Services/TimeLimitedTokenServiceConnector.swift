import Foundation

/// A ``TokenServiceConnector`` that gives every command of another connector a time limit.
///
/// A command still running when the limit passes on `clock` is cancelled and fails with
/// ``TimedOut``, exactly like a command that failed: TMP leaves the token as it was. Whatever
/// the cancelled command produces afterwards is ignored. The limit holds for connectors that
/// ignore cancellation too: the caller is answered when it passes, and the command, cancelled,
/// ends in its own time; meanwhile its token's further commands fail at once
/// (``EarlierCommandUnfinished``) rather than overtake it.
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

    /// The error of a command not sent because an earlier one for the same token was given up
    /// at the limit (or by its caller) and has not returned yet: sending it could let it reach
    /// the token service before the earlier one does.
    public struct EarlierCommandUnfinished: TokenServiceCommandNotSent, Sendable, Hashable, CustomStringConvertible {
        /// The command not sent.
        public var command: String

        /// Says which command was not sent and why; never names a card or a PAN.
        public var description: String { "\(command) not sent: the token service has not yet answered an earlier command for this token, given up at its time limit" }
    }

    /// The error of a command whose caller was cancelled before the command was handed to the
    /// token service connector: nothing was sent, so it cannot have taken effect.
    ///
    /// A caller cancelled once its command is under way gets `CancellationError` instead,
    /// which leaves open whether the command was carried out.
    public struct CancelledBeforeSending: TokenServiceCommandNotSent, Sendable, Hashable, CustomStringConvertible {
        /// The command not sent.
        public var command: String

        /// Says which command was not sent and why; never names a card or a PAN.
        public var description: String { "\(command) not sent: its caller was cancelled first" }
    }

    /// The error of a command whose limit passed before it was handed to the token service
    /// connector (an executor too busy to start it in time): nothing was sent.
    public struct TimedOutBeforeSending: TokenServiceCommandNotSent, Sendable, Hashable, CustomStringConvertible {
        /// The command not sent.
        public var command: String
        /// The limit that passed.
        public var limit: Duration

        /// Says which command was not sent and why; never names a card or a PAN.
        public var description: String { "\(command) not sent: its limit of \(limit.formattedSeconds) passed before it could be handed to the token service" }
    }

    /// The default limit of one command: 10 seconds.
    public static let defaultLimit: Duration = .seconds(10)

    /// The connector whose commands are limited.
    public let base: any TokenServiceConnector
    /// The most one command may take.
    public let limit: Duration
    private let clock: any Clock<Duration>
    /// Tokens with a command given up but still running, shared by copies of this connector
    /// (and by every connector made from one ``PlatformEnvironment``).
    private let abandoned: AbandonedCommands

    /// Limits each command of `base` to `limit`, measured on `clock` (tests pass a manual one).
    ///
    /// Only commands sent through this connector and its copies are held back behind one given
    /// up: a server makes one and sends every command through it.
    public init(_ base: any TokenServiceConnector, limit: Duration = Self.defaultLimit, clock: any Clock<Duration> = ContinuousClock()) {
        self.init(base, limit: limit, clock: clock, abandoned: AbandonedCommands())
    }

    /// Limits each command of `base`, holding back commands behind the ones in `abandoned`.
    init(_ base: any TokenServiceConnector, limit: Duration, clock: any Clock<Duration>, abandoned: AbandonedCommands) {
        self.base = base
        self.limit = limit
        self.clock = clock
        self.abandoned = abandoned
    }

    /// Implements ``TokenServiceConnector/activate(_:)``.
    public func activate(_ token: TokenRecord) async throws { try await run("activate", token, base.activate) }
    /// Implements ``TokenServiceConnector/suspend(_:)``.
    public func suspend(_ token: TokenRecord) async throws { try await run("suspend", token, base.suspend) }
    /// Implements ``TokenServiceConnector/resume(_:)``.
    public func resume(_ token: TokenRecord) async throws { try await run("resume", token, base.resume) }
    /// Implements ``TokenServiceConnector/deactivate(_:)``.
    public func deactivate(_ token: TokenRecord) async throws { try await run("deactivate", token, base.deactivate) }

    /// How many tokens have a command given up at its limit that has not returned yet.
    public var unfinishedCommands: Int { abandoned.count }

    /// Races `call` against the limit; the first to finish decides, the other is cancelled.
    ///
    /// Both run as tasks of their own, not as children of the caller: a task group would wait
    /// for a cancelled command to return, so a connector that ignores cancellation would hold
    /// the request (a `PATCH` batch, a realignment, a graceful shutdown) until it did. The
    /// caller is answered when the limit passes, whatever the command does afterwards; until
    /// that command returns, further commands for its token fail at once
    /// (``EarlierCommandUnfinished``), so none overtakes it and at most one command per token
    /// outlives its caller. Cancelling the caller cancels the command and answers
    /// `CancellationError` at once; a caller cancelled before the command was handed to `call`
    /// sends nothing and gets ``CancelledBeforeSending``. The limit passing before the command
    /// was handed over (a starved executor) sends nothing either: ``TimedOutBeforeSending``.
    private func run(_ command: String, _ token: TokenRecord, _ call: @escaping @Sendable (TokenRecord) async throws -> Void) async throws {
        let (limit, clock, abandoned) = (limit, clock, abandoned)
        let reference = token.tokenUniqueReference
        guard !Task.isCancelled else { throw CancelledBeforeSending(command: command) }
        guard !abandoned.contains(reference) else { throw EarlierCommandUnfinished(command: command) }
        let race = Race(command: command, token: reference, abandoned: abandoned)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard race.begin(continuation) else { return }
                race.attach(
                    command: Task {
                        guard race.handOver() else { return race.commandEnded() }
                        do {
                            // Outside the caller's place in TMP's line: this task may outlive it.
                            try await TokenCommandOrder.outsideAnyPlace { try await call(token) }
                            race.commandEnded()
                            race.finish(.success(()))
                        } catch {
                            race.commandEnded()
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

/// The tokens whose command was given up (at its limit, or by its caller) while the connector
/// had not returned, each counted until it does.
final class AbandonedCommands: @unchecked Sendable {
    // @unchecked: `tokens` is only touched while holding `lock`.
    private let lock = NSLock()
    private var tokens: [String: Int] = [:]

    var count: Int { lock.withLock { tokens.count } }
    func contains(_ token: String) -> Bool { lock.withLock { tokens[token] != nil } }
    func add(_ token: String) { lock.withLock { tokens[token, default: 0] += 1 } }
    func remove(_ token: String) {
        lock.withLock {
            guard let count = tokens[token] else { return }
            tokens[token] = count > 1 ? count - 1 : nil
        }
    }
}

/// One command's race against its time limit: the first outcome answers the caller, once, and
/// cancels both tasks; later outcomes are dropped. A command given up while still running is
/// registered as abandoned until it returns.
private final class Race: @unchecked Sendable {
    // @unchecked: every stored property but the constants is only touched while holding `lock`.
    private let lock = NSLock()
    private let command: String
    private let token: String
    private let abandoned: AbandonedCommands
    private var continuation: CheckedContinuation<Void, any Error>?
    private var tasks: [Task<Void, Never>] = []
    /// An outcome that came before `begin` (the caller cancelled before the race began).
    private var early: Result<Void, any Error>?
    private var finished = false
    /// Whether the command was handed to the connector: only then can it have been sent.
    private var handedOver = false
    private var ended = false
    private var registered = false

    init(command: String, token: String, abandoned: AbandonedCommands) {
        self.command = command
        self.token = token
        self.abandoned = abandoned
    }

    /// Takes the caller's continuation; false (having answered it) when the race is already
    /// decided, in which case no task may be started.
    func begin(_ continuation: CheckedContinuation<Void, any Error>) -> Bool {
        let settled: Result<Void, any Error>? = lock.withLock {
            if let early { return early }
            self.continuation = continuation
            return nil
        }
        guard let settled else { return true }
        continuation.resume(with: settled)
        return false
    }

    /// The race's tasks: cancelled at once if it was decided meanwhile.
    func attach(command: Task<Void, Never>, timer: Task<Void, Never>) {
        let decided = lock.withLock {
            if finished { return true }
            tasks = [command, timer]
            return false
        }
        if decided {
            command.cancel()
            timer.cancel()
        }
    }

    /// Called by the command's task just before it calls the connector: false when the race
    /// is decided already (the command is then never sent), true otherwise, and from then on
    /// an outcome decided by the timer or the caller leaves the command abandoned.
    func handOver() -> Bool {
        lock.withLock {
            guard !finished, !Task.isCancelled else { return false }
            handedOver = true
            return true
        }
    }

    /// The connector's call has returned (or was never made).
    func commandEnded() {
        lock.withLock {
            ended = true
            if registered {
                registered = false
                abandoned.remove(token)
            }
        }
    }

    func finish(_ outcome: Result<Void, any Error>) {
        let (waiting, outcome, tasks): (CheckedContinuation<Void, any Error>?, Result<Void, any Error>, [Task<Void, Never>]) = lock.withLock {
            guard !finished else { return (nil, outcome, []) }
            finished = true
            var outcome = outcome
            if handedOver {
                // Decided by the timer or the caller while the command runs: it is abandoned.
                if !ended {
                    registered = true
                    abandoned.add(token)
                }
            } else if case .failure(let error) = outcome {
                // Never handed over, and from now on it cannot be: nothing was sent.
                if error is CancellationError {
                    outcome = .failure(TimeLimitedTokenServiceConnector.CancelledBeforeSending(command: command))
                } else if let timedOut = error as? TimeLimitedTokenServiceConnector.TimedOut {
                    outcome = .failure(TimeLimitedTokenServiceConnector.TimedOutBeforeSending(command: command, limit: timedOut.limit))
                }
            }
            guard let continuation else {
                early = outcome
                return (nil, outcome, [])
            }
            self.continuation = nil
            defer { self.tasks = [] }
            return (continuation, outcome, self.tasks)
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
