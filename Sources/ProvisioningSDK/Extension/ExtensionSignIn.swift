import Foundation

/// The cardholder the app's own sign-in produced in the authorization (UI) extension.
/// Its description never shows the token.
public struct SignedInCardholder: Sendable, CustomStringConvertible, CustomReflectable {
    /// The cardholder JWT.
    public var cardholderToken: String
    /// The cardholder's user id (the JWT's `sub`).
    public var userId: String
    /// When the token expires; nil to read it from the JWT's `exp` claim.
    public var tokenExpiresAt: Date?

    /// Creates a signed-in cardholder.
    public init(cardholderToken: String, userId: String, tokenExpiresAt: Date? = nil) {
        self.cardholderToken = cardholderToken
        self.userId = userId
        self.tokenExpiresAt = tokenExpiresAt
    }

    /// The user and the expiry; never the token (for `dump` and debuggers too).
    public var customMirror: Mirror {
        Mirror(self, children: ["userId": userId, "tokenExpiresAt": tokenExpiresAt as Any, "cardholderToken": "<redacted>"], displayStyle: .struct)
    }

    /// The user and the expiry; never the token.
    public var description: String {
        "SignedInCardholder(userId: \(userId), tokenExpiresAt: \(tokenExpiresAt.map { "\($0)" } ?? "from the token"), cardholderToken: <redacted>)"
    }
}

/// How the authorization extension ended: the values of
/// `PKIssuerProvisioningExtensionAuthorizationResult`.
public enum ExtensionAuthorizationResult: Sendable, Hashable {
    /// The cardholder signed in; the non-UI extension has a session.
    case authorized
    /// The cardholder gave up.
    case canceled
}

/// Signs the cardholder in inside the authorization (UI) extension and leaves the session
/// the non-UI extension uses to reach TMP.
///
/// The app's own sign-in runs — manual or biometric, whatever the app does; the result is
/// stored as an ``ExtensionSession`` that lives ``lifetime`` (5 minutes by default, the
/// time Apple suggests when authentication is reused for later calls), never longer than the
/// token itself.
public struct ExtensionSignIn: Sendable {
    /// The default lifetime of the extensions' session.
    public static let defaultLifetime: Duration = .seconds(300)

    /// Where the session goes.
    public let sessions: ExtensionSessionStore
    /// How long the session lives at most.
    public let lifetime: Duration
    private let now: @Sendable () -> Date

    /// Creates the sign-in step.
    public init(secrets: any SecretStore, lifetime: Duration = ExtensionSignIn.defaultLifetime, now: @escaping @Sendable () -> Date = { Date() }) {
        self.sessions = ExtensionSessionStore(secrets: secrets)
        self.lifetime = lifetime
        self.now = now
    }

    /// Why signing in did not produce a session.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The app's sign-in threw (wrong password, biometry refused, …): the error's
        /// `localizedDescription` (a `LocalizedError`'s `errorDescription`), not its full
        /// description, whose `userInfo` can hold a callback URL with an authorization code.
        case signInFailed(String)
        /// The token the sign-in returned has already expired (or carries no usable expiry
        /// and no lifetime is left).
        case tokenExpired
        /// The session could not be stored.
        case storage(String)

        /// What happened, for people (never the token).
        public var description: String {
            switch self {
            case .signInFailed(let reason): "sign-in failed: \(reason)"
            case .tokenExpired: "the sign-in returned an expired token; sign in again"
            case .storage(let reason): "the session could not be stored: \(reason)"
            }
        }
    }

    /// Runs `signIn` and stores the session it yields; returns the session.
    ///
    /// A failed attempt stores nothing and leaves any earlier session untouched, so the UI
    /// can offer another way in (password after biometry) or cancel.
    public func signIn(_ signIn: @Sendable () async throws -> SignedInCardholder) async throws(Failure) -> ExtensionSession {
        let cardholder: SignedInCardholder
        do {
            cardholder = try await signIn()
        } catch {
            throw .signInFailed(error.localizedDescription)
        }
        let start = now()
        var expiry = start.addingTimeInterval(lifetime.timeInterval)
        if let tokenExpiry = cardholder.tokenExpiresAt ?? Self.expiry(ofJWT: cardholder.cardholderToken) {
            expiry = min(expiry, tokenExpiry)
        }
        let session = ExtensionSession(cardholderToken: cardholder.cardholderToken, expiresAt: expiry, userId: cardholder.userId)
        guard session.isValid(at: start) else { throw .tokenExpired }
        do {
            try sessions.save(session)
        } catch {
            throw .storage(String(describing: error))
        }
        return session
    }

    /// The `exp` claim of a JWT, read without verifying it (only to bound the session's
    /// lifetime; TMP verifies the token). Nil for anything that is not a JWT with a numeric `exp`.
    public static func expiry(ofJWT token: String) -> Date? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].utf8.count <= 8_192 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let payload = Data(base64Encoded: base64),
            let exp = (try? JSONDecoder().decode(ExpiryClaim.self, from: payload))?.exp, exp.isFinite
        else { return nil }
        return Date(timeIntervalSince1970: exp)
    }

    private struct ExpiryClaim: Decodable {
        var exp: Double?
    }
}
