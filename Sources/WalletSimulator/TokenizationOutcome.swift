import ProvisioningModels

/// How a tokenization ended, for the Apple side to add the pass or report the failure.
public enum TokenizationOutcome: Sendable, Hashable {
    /// Green: the token is active; add an activated pass.
    case approved(NetworkToken)
    /// Yellow: the token is inactive; add a pass that requires activation in the issuer app.
    case requiresActivation(NetworkToken)
    /// Red: no token was created.
    case declined(TokenizationDecline)

    /// The created token, or nil when declined.
    public var token: NetworkToken? {
        switch self {
        case .approved(let token), .requiresActivation(let token): token
        case .declined: nil
        }
    }

    /// The decline, or nil when a token was created.
    public var decline: TokenizationDecline? {
        if case .declined(let decline) = self { decline } else { nil }
    }
}

/// Why a tokenization was declined, and who declined it.
public struct TokenizationDecline: Sendable, Hashable, CustomStringConvertible {
    /// Who said no.
    public enum Source: String, Sendable, Hashable {
        /// TMP's tokenization decision (its reason code, e.g. `card_blocked`).
        case issuer
        /// The token service itself: its activation-data checks, TMP out of reach, or an
        /// injected decline.
        case tokenService = "token-service"
    }

    /// A stable reason code. TMP's codes pass through unchanged; the token service's own are
    /// `activation_data_<refusal>` (for example `activation_data_expired`,
    /// `activation_data_bad_signature`, `activation_data_wrong_nonce`), `activation_data_replayed`,
    /// `issuer_timeout`, `issuer_unavailable`, or the injected reason.
    public var reason: String
    /// Who declined.
    public var source: Source

    /// Creates a decline.
    public init(reason: String, source: Source) {
        self.reason = reason
        self.source = source
    }

    /// `reason (source)`.
    public var description: String { "\(reason) (\(source.rawValue))" }
}
