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

extension AuditEntry {
    /// This entry of a token event, for the event acknowledged as stale that recorded only the
    /// token number's last four digits, which the token did not have.
    var staleFillingInTokenLast4: AuditEntry {
        var entry = self
        entry.detail += " (stale: only its tokenLast4 recorded)"
        return entry
    }

    /// The audit entry of a `signed-cards` call. The provisioning attempt is the record of a
    /// seal (who, which card, which device and Apple leaf, when), so a seal stores that one row
    /// and the audit trail shows it as `card.seal`.
    public init(seal attempt: ProvisioningAttempt) {
        self.init(
            at: attempt.createdAt, actor: "user:\(attempt.userId)", action: "card.seal", subject: "card:\(attempt.externalCardId)",
            detail: "sealed for \(attempt.deviceType.rawValue); leaf \(attempt.leafFingerprint.prefix(16))"
        )
    }

    /// A card's trail: its audit events in the order they were recorded, with its seals
    /// (oldest first) placed by time; an event and a seal at the same instant keep the event first.
    public static func trail(events: [AuditEntry], seals: [ProvisioningAttempt]) -> [AuditEntry] {
        guard !seals.isEmpty else { return events }
        var merged: [AuditEntry] = []
        merged.reserveCapacity(events.count + seals.count)
        var next = seals.makeIterator()
        var seal = next.next()
        for event in events {
            while let pending = seal, pending.createdAt < event.at {
                merged.append(AuditEntry(seal: pending))
                seal = next.next()
            }
            merged.append(event)
        }
        while let pending = seal {
            merged.append(AuditEntry(seal: pending))
            seal = next.next()
        }
        return merged
    }
}
