import Foundation

/// The Push Provisioning API calls the app and its extensions make.
public enum TMPOperation: String, Sendable, Hashable, CaseIterable, Codable {
    /// `POST tokens/searches`: which of these passes are tokens of the caller's, and in what state.
    case searchTokens = "tokens/searches"
    /// `POST signed-cards`: seal a card for Wallet's certificates.
    case signCard = "signed-cards"
    /// `POST tokens/activations`: activate a token from the deep link.
    case activateToken = "tokens/activations"
    /// `GET cards`: the caller's cards for display.
    case listCards = "cards"
    /// `GET cards/{externalCardId}/art`: one card's art (PNG or PDF), for the Wallet extensions.
    case cardArt = "cards/{externalCardId}/art"

    /// The HTTP method.
    public var method: String {
        self == .listCards || self == .cardArt ? "GET" : "POST"
    }

    /// The path below the base URL (for ``cardArt``, a template: see ``path(externalCardId:)``).
    public var path: String {
        "issuer/push-provisioning/" + rawValue
    }

    /// The path below the base URL with `{externalCardId}` filled in.
    public func path(externalCardId: String) -> String {
        path.replacingOccurrences(of: "{externalCardId}", with: externalCardId)
    }

    /// Whether the call only reads, so repeating it cannot change anything on the server.
    ///
    /// `tokens/searches` is a `POST` only because its list of references travels in the body;
    /// it changes nothing, so it is retried like `GET cards`. `signed-cards` is not: every
    /// call issues fresh activation data and records a provisioning attempt, and it runs
    /// inside Wallet's 20-second budget. `tokens/activations` changes a token's state.
    public var isIdempotentRead: Bool {
        switch self {
        case .searchTokens, .listCards, .cardArt: true
        case .signCard, .activateToken: false
        }
    }
}
