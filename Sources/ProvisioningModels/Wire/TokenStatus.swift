/// The state of a network token, as TMP and the token service provider see it.
///
/// Transitions: `INACTIVE → ACTIVE`; `ACTIVE ⇄ SUSPENDED`; any state `→ DEACTIVATED` (final).
public enum TokenStatus: String, Codable, Sendable, Hashable, CaseIterable {
    /// Usable for payments.
    case active = "ACTIVE"
    /// Created on the yellow path; waits for in-app activation.
    case inactive = "INACTIVE"
    /// Temporarily unusable (card blocked, or customer service).
    case suspended = "SUSPENDED"
    /// Permanently removed.
    case deactivated = "DEACTIVATED"

    /// Whether moving from this state to `next` is allowed.
    public func canTransition(to next: TokenStatus) -> Bool {
        switch (self, next) {
        case (.inactive, .active), (.active, .suspended), (.suspended, .active): true
        case (.deactivated, _): false
        case (_, .deactivated): true
        default: false
        }
    }
}

/// How a token came to exist: straight to active (green) or with in-app activation (yellow).
public enum AuthorizationPath: String, Codable, Sendable, Hashable {
    /// The token service approved at once.
    case green = "GREEN"
    /// Additional authentication (in-app activation) was required.
    case yellow = "YELLOW"
}
