import Foundation
import Logging
import ProvisioningModels
import ServiceLifecycle

/// Sends again, periodically, the token service commands a card's status still owes.
///
/// A card status change records the card first and then commands its tokens; a correction
/// (``TokenCorrection``) commands one token after the fact. When the token service does not
/// confirm such a command, or the process stops before sending it, the token stays at odds
/// with its card: in the worst case a blocked or closed card keeps a token that pays. The
/// stores keep, in the same transaction as every status write, since when each token has
/// been at odds with its card (``TMPStore/tokensAtOddsWithTheirCard(since:limit:)``), and
/// this service realigns those that have been so for longer than ``grace``
/// (``LifecycleService/realignTokens(atOddsSince:limit:while:)``).
///
/// ``grace`` leaves a status change in progress alone: its own commands (at most
/// ``LifecycleService/maximumConcurrentCommands`` at a time, each within the connector's time
/// limit) normally settle the tokens first. Should the realignment still overlap one, the
/// token service gets the same command twice (which a ``TokenServiceConnector`` takes as one),
/// and TMP records it once.
///
/// Several TMP instances on one PostgreSQL database each run this service and share the work:
/// a round claims the tokens it commands, a batch of eight at a time just before sending
/// their commands, by restarting their clocks in the transaction that reads them
/// (``TMPStore/claimTokensAtOddsWithTheirCard(since:limit:at:)``), so another instance's
/// round takes other tokens, or those again only after a further grace. Only a batch whose
/// commands outlast the grace (six time limits for eight commands sent at once) can overlap
/// the next claim of its tokens, which again means a command sent twice and taken as one.
public struct TokenRealigner: Service {
    /// The default time between two rounds.
    public static let defaultInterval: Duration = .seconds(30)
    /// The most tokens one round commands, so that a long outage of the token service is
    /// caught up in steps.
    public static let defaultRoundLimit = 500

    /// The grace for `connectorTimeout`: six time limits (a status change of up to 48 tokens
    /// has then sent and recorded all its commands), and at least a minute.
    public static func grace(connectorTimeout: Duration) -> Duration {
        max(.seconds(60), connectorTimeout * 6)
    }

    let lifecycle: LifecycleService
    /// Time between two rounds.
    public let interval: Duration
    /// How long a token must have been at odds with its card before it is realigned.
    public let grace: Duration
    /// The most tokens one round commands.
    public let roundLimit: Int
    let metrics: PlatformMetrics?

    /// Realigns the tokens of `environment` every `interval` (positive), those at odds for
    /// longer than `grace`, at most `roundLimit` (positive) per round, counting outcomes in
    /// `metrics`.
    public init(environment: PlatformEnvironment, interval: Duration = defaultInterval, grace: Duration? = nil, roundLimit: Int = defaultRoundLimit, metrics: PlatformMetrics? = nil) {
        precondition(interval > .zero, "the realignment interval must be positive")
        precondition(roundLimit > 0, "a realignment round must allow at least one token")
        self.lifecycle = LifecycleService(environment: environment)
        self.interval = interval
        self.grace = grace ?? Self.grace(connectorTimeout: environment.connectorTimeout)
        self.roundLimit = roundLimit
        self.metrics = metrics
    }

    /// Runs a round every ``interval`` until the service group shuts down gracefully or the
    /// task is cancelled.
    public func run() async throws {
        let logger = lifecycle.environment.logger
        logger.notice("token realignment runs", metadata: ["interval": "\(interval.formattedSeconds)", "grace": "\(grace.formattedSeconds)"])
        await runPeriodically(every: interval) {
            await realignOnce()
            return true
        }
    }

    /// One round: the tokens at odds with their card for longer than ``grace``, as of now.
    /// Returns what happened to each; a failure to read the store is logged and answers none.
    /// Once the service group shuts down gracefully, the round claims no further batch and
    /// ends when the commands in flight have been answered (each within the connector's time
    /// limit).
    @discardableResult
    public func realignOnce() async -> [LifecycleService.StatusChange.TokenOutcome] {
        let environment = lifecycle.environment
        let cutoff = environment.now().addingTimeInterval(-grace.seconds)
        let outcomes: [LifecycleService.StatusChange.TokenOutcome]
        do {
            outcomes = try await lifecycle.realignTokens(atOddsSince: cutoff, limit: roundLimit, while: { !Task.isShuttingDownGracefully })
        } catch {
            environment.logger.error("token realignment could not read the store", metadata: ["error": "\(Redaction.cardNumbers(in: DatabaseUnavailable.reason(error)))"])
            return []
        }
        var failed = 0
        for outcome in outcomes {
            metrics?.recordRealignment(result: outcome.result)
            if outcome.result == "FAILED" {
                // Each failed command has logged its own warning; the round says it once.
                failed += 1
            } else {
                environment.logger.notice(
                    "token realigned with its card",
                    metadata: ["token": "\(Redaction.prefix(outcome.tokenUniqueReference))", "result": "\(outcome.result)", "token_status": "\(outcome.status.rawValue)"]
                )
            }
        }
        if failed > 0 {
            environment.logger.error(
                "tokens still at odds with their card: the token service did not confirm the commands sent again",
                metadata: ["tokens": "\(failed)", "next_try_in": "\(grace.formattedSeconds)"]
            )
        }
        return outcomes
    }
}
