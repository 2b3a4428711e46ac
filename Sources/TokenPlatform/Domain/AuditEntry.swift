import Foundation

/// One audit event: who did what to which card or token, and when.
public struct AuditEntry: Sendable, Hashable {
    /// When.
    public var at: Date
    /// Who: `user:<id>`, `issuer`, `tsp`, `system`.
    public var actor: String
    /// What, e.g. `card.put`, `token.suspend`.
    public var action: String
    /// Which: `card:<externalCardId>` or `token:<tokenUniqueReference>`.
    public var subject: String
    /// Free text for people; never a PAN, key or token secret.
    public var detail: String

    /// Creates an entry.
    public init(at: Date, actor: String, action: String, subject: String, detail: String) {
        self.at = at
        self.actor = actor
        self.action = action
        self.subject = subject
        self.detail = detail
    }
}
