import Foundation

/// TMP's channel to the network's token service provider for lifecycle commands.
///
/// Implementations: the Wallet simulator's in-process TSP, a real network connector, or a
/// test double. A thrown error means TMP could not confirm the command; TMP then leaves the
/// token's state unchanged. The command may still have taken effect (a request sent whose
/// answer was lost), so for a suspension sent for a card's block TMP keeps a note that it may
/// have been carried out (``TokenRecord/blockSuspensionsSent``) — unless the error says the
/// command never left: it conforms to ``TokenServiceCommandNotSent``, or is a `URLError` of a
/// connection that could not be made. TMP gives every command a time limit
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
    public struct NotConfigured: TokenServiceCommandNotSent, CustomStringConvertible {
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

/// An error that says a token service command never left TMP's connector, so it cannot have
/// taken effect (see ``TokenServiceConnector``): a connector throws one when it could not
/// even send the request. Any other error leaves open whether the command was carried out.
public protocol TokenServiceCommandNotSent: Error {}

/// An error that may say the token service answered and refused the command for good: it
/// holds no such token, or the token's state there does not allow the command. Sending it
/// again would get the same answer (unlike an outage or a time-out), so TMP answers an in-app
/// activation refused so `DECLINED` with the token service's reason, not `FAILED` ("try
/// again later"). A connector's error type conforms and says which of its errors are such
/// refusals; any other error is a command TMP could not confirm.
public protocol TokenServiceCommandRefusal: Error, CustomStringConvertible {
    /// Whether the token service refused the command for good (true), rather than failed to
    /// carry it out or answer (false).
    var isRefusedForGood: Bool { get }
}

/// What a failed token service command tells about its effect.
public enum TokenServiceCommandOutcome {
    /// Whether the command that threw `error` certainly never reached the token service: a
    /// ``TokenServiceCommandNotSent`` error (a command held back behind an unfinished one, no
    /// connector configured), or a `URLError` of a connection that could not be made (no
    /// host, no route, refused). Any other error — TMP's time limit, a cancellation, a time-out
    /// or a dropped connection of the connector's own, an answer it could not read — may
    /// follow a command that was carried out.
    public static func neverSent(_ error: any Error) -> Bool {
        if error is any TokenServiceCommandNotSent { return true }
        if let error = error as? URLError {
            return [.cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet].contains(error.code)
        }
        return false
    }
}
