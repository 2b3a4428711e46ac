/// The four Push Provisioning API calls the app and its extensions make.
public enum TMPOperation: String, Sendable, Hashable, CaseIterable, Codable {
    /// `POST tokens/searches`: which of these passes are tokens of the caller's, and in what state.
    case searchTokens = "tokens/searches"
    /// `POST signed-cards`: seal a card for Wallet's certificates.
    case signCard = "signed-cards"
    /// `POST tokens/activations`: activate a token from the deep link.
    case activateToken = "tokens/activations"
    /// `GET cards`: the caller's cards for display.
    case listCards = "cards"

    /// The HTTP method.
    public var method: String {
        self == .listCards ? "GET" : "POST"
    }

    /// The path below the base URL.
    public var path: String {
        "issuer/push-provisioning/" + rawValue
    }

    /// Whether the call only reads, so repeating it cannot change anything on the server.
    ///
    /// `tokens/searches` is a `POST` only because its list of references travels in the body;
    /// it changes nothing, so it is retried like `GET cards`. `signed-cards` is not: every
    /// call issues fresh activation data and records a provisioning attempt, and it runs
    /// inside Wallet's 20-second budget. `tokens/activations` changes a token's state.
    public var isIdempotentRead: Bool {
        switch self {
        case .searchTokens, .listCards: true
        case .signCard, .activateToken: false
        }
    }
}
