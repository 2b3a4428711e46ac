import Foundation
import Hummingbird
import Logging

/// Who is calling, once authenticated.
public enum Caller: Sendable, Hashable {
    /// A cardholder, by user id (JWT `sub`).
    case cardholder(userId: String)
    /// The issuer back office.
    case issuer
    /// The token service provider.
    case tsp
}

/// Checks the `Authorization: Bearer …` credential a route requires.
public struct Authenticator: Sendable {
    /// Verifies cardholder JWTs.
    public var cardholderTokens: CardholderTokenVerifier
    /// The issuer back office's key.
    public var issuerKey: APIKey
    /// The token service provider's key.
    public var tspKey: APIKey
    /// The current time.
    public var now: @Sendable () -> Date

    /// Creates an authenticator.
    public init(cardholderTokens: CardholderTokenVerifier, issuerKey: APIKey, tspKey: APIKey, now: @escaping @Sendable () -> Date = { Date() }) {
        self.cardholderTokens = cardholderTokens
        self.issuerKey = issuerKey
        self.tspKey = tspKey
        self.now = now
    }

    /// The caller, or a 401 that says nothing about what was wrong.
    func authenticate(_ request: Request, as requirement: AuthRequirement, logger: Logger) throws(TMPError) -> Caller? {
        if requirement == .none { return nil }
        guard let header = request.headers[.authorization], header.count <= 8192, header.hasPrefix("Bearer ") else {
            throw TMPError.unauthorized
        }
        let credential = String(header.dropFirst("Bearer ".count)).trimmingCharacters(in: .whitespaces)
        switch requirement {
        case .cardholder:
            switch cardholderTokens.userId(from: credential, now: now()) {
            case .success(let userId): return .cardholder(userId: userId)
            case .failure(let refusal):
                logger.notice("cardholder token refused", metadata: ["reason": "\(refusal.rawValue)"])
                throw TMPError.unauthorized
            }
        case .issuer:
            guard issuerKey.matches(credential) else { throw TMPError.unauthorized }
            return .issuer
        case .tsp:
            guard tspKey.matches(credential) else { throw TMPError.unauthorized }
            return .tsp
        case .none:
            return nil
        }
    }
}
