import Foundation
import ProvisioningModels

/// The cardholder's session for the Wallet extensions: the cardholder token the non-UI
/// extension sends to TMP, until when it may be used, and whose it is.
///
/// Written by the authorization (UI) extension after the cardholder signed in
/// (``ExtensionSignIn``), read by the non-UI extension. It lives in a ``SecretStore`` only.
/// Its description never shows the token.
public struct ExtensionSession: Sendable, Hashable, Codable, CustomStringConvertible, CustomReflectable {
    /// The cardholder JWT.
    public var cardholderToken: String
    /// When the extensions stop using it.
    public var expiresAt: Date
    /// The cardholder it belongs to.
    public var userId: String

    /// Creates a session.
    public init(cardholderToken: String, expiresAt: Date, userId: String) {
        self.cardholderToken = cardholderToken
        self.expiresAt = expiresAt
        self.userId = userId
    }

    /// Whether it may still be used at `now`.
    public func isValid(at now: Date) -> Bool {
        now < expiresAt && !cardholderToken.isEmpty && !userId.isEmpty
    }

    /// The user and the expiry; never the token (for `dump` and debuggers too).
    public var customMirror: Mirror {
        Mirror(self, children: ["userId": userId, "expiresAt": expiresAt, "cardholderToken": "<redacted>"], displayStyle: .struct)
    }

    /// The user and the expiry; never the token.
    public var description: String {
        "ExtensionSession(userId: \(userId), expiresAt: \(expiresAt), cardholderToken: <redacted>)"
    }
}

/// Keeps the ``ExtensionSession`` in a ``SecretStore`` under one key.
public struct ExtensionSessionStore: Sendable {
    /// The key of the session in the store.
    public static let key = "wallet-extension-session"

    /// The store.
    public let secrets: any SecretStore

    /// A session store over `secrets`.
    public init(secrets: any SecretStore) {
        self.secrets = secrets
    }

    /// Stores `session`, replacing any other.
    public func save(_ session: ExtensionSession) throws {
        try secrets.setSecret(JSONEncoder().encode(session), for: Self.key)
    }

    /// The session if there is one that is still valid at `now` with at least `remaining`
    /// of its life left (and, when `userId` is given, belongs to that cardholder). An
    /// unreadable or undecodable one counts as none.
    ///
    /// A session found expired at `now` is removed from the store, so the cardholder's token
    /// does not stay behind (in the shared Keychain on iOS) once it is no use. A valid session
    /// with less than `remaining` left is not returned but stays stored: the calls that use
    /// a session until its expiry still find it.
    public func validSession(at now: Date, userId: String? = nil, remaining: Duration = .zero) -> ExtensionSession? {
        guard let data = try? secrets.secret(for: Self.key),
            let session = try? JSONDecoder().decode(ExtensionSession.self, from: data)
        else { return nil }
        if now >= session.expiresAt {
            removeExpired(data)
            return nil
        }
        guard session.isValid(at: now), session.expiresAt.timeIntervalSince(now) >= remaining.timeInterval else { return nil }
        if let userId, !session.userId.isSameIdentifier(as: userId) { return nil }
        return session
    }

    /// Removes the expired session stored as `data` — unless the store holds another one by
    /// now (the authorization extension may have just saved a fresh session). A failure to
    /// remove it is left for the next read to retry.
    private func removeExpired(_ data: Data) {
        guard (try? secrets.secret(for: Self.key)) == data else { return }
        try? secrets.removeSecret(for: Self.key)
    }

    /// The session stored, valid or not (nil when there is none, or it cannot be read).
    func storedSession() -> ExtensionSession? {
        guard let data = try? secrets.secret(for: Self.key) else { return nil }
        return try? JSONDecoder().decode(ExtensionSession.self, from: data)
    }

    /// Whether the store still holds `session` itself, valid or not: false once sign-out
    /// removed it or another sign-in replaced it (or it cannot be read).
    public func holds(_ session: ExtensionSession) -> Bool {
        storedSession() == session
    }

    /// Removes `session` if it is still the one stored: a session saved since (the
    /// authorization extension signing the cardholder in again while TMP refused the old
    /// one) is left alone. A failure to remove it is left for a later read.
    public func remove(_ session: ExtensionSession) {
        guard holds(session) else { return }
        try? secrets.removeSecret(for: Self.key)
    }

    /// Removes the session.
    public func clear() throws {
        try secrets.removeSecret(for: Self.key)
    }
}
