/// Why an activation deep link could not be acted on.
public struct ActivationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Not the issuer's activation link, or no single, non-empty, bounded `serialNumber`.
        case malformedLink = "malformed_link"
        /// No pass with that serial number on this iPhone or the paired Watch.
        case unknownPass = "unknown_pass"
        /// `tokens/activations` failed (network, timeout, server error), or a wait for TMP to
        /// know a just-added pass was cancelled or overtaken by a sign-out (``clientError``'s
        /// kind `cancelled`); see ``clientError``.
        case network = "network"
        /// The pass was just added in the app and TMP still does not know its token (the card
        /// network's event has not reached it) after the wallet waited a few seconds for it:
        /// try again shortly. ``clientError`` is TMP's `token_not_found`.
        case awaitingIssuer = "awaiting_issuer"
    }

    /// The kind, whose raw value is the stable code.
    public var kind: Kind
    /// What is wrong, for people; never contains a token or a PAN.
    public var message: String
    /// The client's error when ``kind`` is ``Kind/network`` or ``Kind/awaitingIssuer``.
    public var clientError: TMPClientError?

    /// Creates an error.
    public init(_ kind: Kind, _ message: String, clientError: TMPClientError? = nil) {
        self.kind = kind
        self.message = message
        self.clientError = clientError
    }

    /// The stable code, e.g. `malformed_link`.
    public var code: String { kind.rawValue }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }
}
