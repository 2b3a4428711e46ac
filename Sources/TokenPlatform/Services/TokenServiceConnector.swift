import Foundation

/// TMP's channel to the network's token service provider for lifecycle commands.
///
/// Implementations: the Wallet simulator's in-process TSP, a real network connector, or a
/// test double. A thrown error means the command did not take effect; TMP then leaves the
/// token's state unchanged. An error after which the command may have taken effect all the
/// same (a request sent whose answer was lost) should conform to
/// ``TokenServiceOutcomeUnknown``, or be a `URLError` of a time-out or a lost connection: TMP
/// still leaves the token's state unchanged, but for a suspension sent for a card's block it
/// keeps a note that the suspension may have been carried out
/// (``TokenRecord/blockSuspensionsSent``). TMP gives every command a time limit
/// (``PlatformEnvironment/connectorTimeout``) and cancels a command that exceeds it: an
/// implementation stops waiting for the network when its task is cancelled.
///
/// TMP logs a failed command's error as text (`"\(error)"`), with anything in it that looks like
/// a card number hidden (``Redaction/cardNumbers(in:)``); still, an implementation should put
/// no card data or personal data in its errors.
///
/// A command for the state the token already has is done, not an error: TMP sends a command
/// again when it could not confirm it (``TokenRealigner``), possibly from two instances at once.
public protocol TokenServiceConnector: Sendable {
    /// Activates an inactive (yellow-path) token.
    func activate(_ token: TokenRecord) async throws
    /// Suspends an active token.
    func suspend(_ token: TokenRecord) async throws
    /// Resumes a suspended token.
    func resume(_ token: TokenRecord) async throws
    /// Deactivates a token for good.
    func deactivate(_ token: TokenRecord) async throws
}

/// The connector of a server started without a token service: every command fails, so
/// activations answer FAILED and card status changes report the tokens they could not reach.
public struct UnconfiguredTokenServiceConnector: TokenServiceConnector {
    /// The error every command throws.
    public struct NotConfigured: Error, CustomStringConvertible {
        /// Explains the situation.
        public var description: String { "no token service connector is configured" }
    }

    /// Creates the connector.
    public init() {}

    /// Implements ``TokenServiceConnector/activate(_:)``.
    public func activate(_ token: TokenRecord) async throws { throw NotConfigured() }
    /// Implements ``TokenServiceConnector/suspend(_:)``.
    public func suspend(_ token: TokenRecord) async throws { throw NotConfigured() }
    /// Implements ``TokenServiceConnector/resume(_:)``.
    public func resume(_ token: TokenRecord) async throws { throw NotConfigured() }
    /// Implements ``TokenServiceConnector/deactivate(_:)``.
    public func deactivate(_ token: TokenRecord) async throws { throw NotConfigured() }
}

/// An error after which a token service command may have taken effect (sent, and its answer
/// lost): see ``TokenServiceConnector``. TMP's own time limit ends a command with one
/// (``TimeLimitedTokenServiceConnector/TimedOut``).
public protocol TokenServiceOutcomeUnknown: Error {}

/// What a failed token service command tells about its effect.
public enum TokenServiceCommandOutcome {
    /// Whether the command that threw `error` may have taken effect at the token service all
    /// the same: a ``TokenServiceOutcomeUnknown`` error (TMP's time limit among them), a
    /// cancellation (the command may have been sent), or a `URLError` of a time-out or a lost
    /// connection. Any other error means it did not (``TokenServiceConnector``).
    public static func isUnknown(_ error: any Error) -> Bool {
        if error is any TokenServiceOutcomeUnknown || error is CancellationError { return true }
        if let error = error as? URLError { return [.timedOut, .networkConnectionLost].contains(error.code) }
        return false
    }
}
