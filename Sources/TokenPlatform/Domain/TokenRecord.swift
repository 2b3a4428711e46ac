import Foundation
import ProvisioningModels

/// Why a token is suspended; decides what unblocking a card resumes.
public enum SuspensionSource: String, Sendable, Hashable, Codable {
    /// The card was blocked; unblocking resumes it.
    case cardBlocked = "CARD_BLOCKED"
    /// Customer service suspended this token; only customer service resumes it.
    case customerService = "CUSTOMER_SERVICE"
    /// The token service provider reported a suspension.
    case tokenService = "TOKEN_SERVICE"
}

/// A network token of a card on one device.
public struct TokenRecord: Sendable, Hashable {
    /// The token reference (= the pass's `deviceAccountIdentifier`).
    public var tokenUniqueReference: String
    /// The card.
    public var externalCardId: String
    /// The card's pan-unique reference when the token was created.
    public var panUniqueReference: String
    /// The card's owner (denormalized so searches filter by owner in one query).
    public var userId: String
    /// The device.
    public var deviceType: DeviceType
    /// The state.
    public var status: TokenStatus
    /// Green or yellow.
    public var authorizationPath: AuthorizationPath
    /// Why it is suspended, when it is.
    public var suspendedBy: SuspensionSource?
    /// Last four digits of the token, if reported.
    public var tokenLast4: String?
    /// Created.
    public var createdAt: Date
    /// Last changed.
    public var updatedAt: Date
    /// When the newest token event applied to it happened at the token service (its
    /// `occurredAt`), if events said; older events are then stale.
    public var lastEventAt: EventTime?

    /// Creates a record.
    public init(tokenUniqueReference: String, externalCardId: String, panUniqueReference: String, userId: String, deviceType: DeviceType, status: TokenStatus, authorizationPath: AuthorizationPath, suspendedBy: SuspensionSource?, tokenLast4: String?, createdAt: Date, updatedAt: Date, lastEventAt: EventTime? = nil) {
        self.tokenUniqueReference = tokenUniqueReference
        self.externalCardId = externalCardId
        self.panUniqueReference = panUniqueReference
        self.userId = userId
        self.deviceType = deviceType
        self.status = status
        self.authorizationPath = authorizationPath
        self.suspendedBy = suspendedBy
        self.tokenLast4 = tokenLast4
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.lastEventAt = lastEventAt
    }

    /// The Lifecycle API's view.
    public var resource: TokenResource {
        TokenResource(tokenUniqueReference: tokenUniqueReference, externalCardId: externalCardId, panUniqueReference: panUniqueReference, status: status, deviceType: deviceType, authorizationPath: authorizationPath, tokenLast4: tokenLast4, suspendedBy: suspendedBy?.rawValue)
    }

    /// The Push Provisioning API's view.
    public var searchResult: TokenSearchResult {
        TokenSearchResult(
            tokenUniqueReference: tokenUniqueReference,
            panUniqueReference: panUniqueReference,
            externalCardId: externalCardId,
            tokenStatus: status,
            authorizationPath: authorizationPath,
            processStatus: status == .inactive ? "PENDING_ACTIVATION" : "COMPLETED",
            deviceType: deviceType
        )
    }
}

extension TokenRecord {
    /// Whether the card's status forbids this token's state, so that a token service command
    /// is owed: any live token of a CLOSED card (deactivate), an ACTIVE token of a BLOCKED card
    /// (suspend), a token the block suspended of an ACTIVE card (resume).
    ///
    /// The stores keep the same rule in SQL (`AtOddsSQL.predicate`) to know since when a
    /// token has been at odds with its card.
    public func isAtOdds(withCardStatus cardStatus: CardStatus) -> Bool {
        isAtOdds(withCardStatus: cardStatus, cardPanUniqueReference: panUniqueReference)
    }

    /// Whether a command is owed to bring this token in line with `card`: as
    /// ``isAtOdds(withCardStatus:)``, and also any live token made for a PAN the card no
    /// longer has (deactivate) — tokenized while the card's PAN was being replaced, or
    /// reported afterwards for the old PAN.
    public func isAtOdds(with card: CardRecord) -> Bool {
        isAtOdds(withCardStatus: card.status, cardPanUniqueReference: card.panUniqueReference)
    }

    /// Whether this token was made for a PAN its card no longer has.
    public func isOfAReplacedPAN(of card: CardRecord) -> Bool {
        panUniqueReference != card.panUniqueReference
    }

    private func isAtOdds(withCardStatus cardStatus: CardStatus, cardPanUniqueReference: String) -> Bool {
        guard status != .deactivated else { return false }
        if panUniqueReference != cardPanUniqueReference { return true }
        switch cardStatus {
        case .closed: return true
        case .blocked: return status == .active
        case .active: return status == .suspended && suspendedBy == .cardBlocked
        }
    }
}

/// The rule of ``TokenRecord/isAtOdds(with:)`` in SQL both stores run, and the
/// statement that keeps `token.at_odds_since` in step with it.
enum AtOddsSQL {
    /// True for a live `token` row whose state its card's status forbids, or that was made
    /// for a PAN its card no longer has.
    static let predicate = """
        token.status <> 'DEACTIVATED' AND EXISTS (SELECT 1 FROM card WHERE card.external_card_id = token.external_card_id \
        AND (card.status = 'CLOSED' OR card.pan_unique_reference <> token.pan_unique_reference OR (card.status = 'BLOCKED' AND token.status = 'ACTIVE') \
        OR (card.status = 'ACTIVE' AND token.status = 'SUSPENDED' AND token.suspended_by = 'CARD_BLOCKED')))
        """

    /// Sets `at_odds_since` of the rows `scope` selects: kept (or set to the time bound first)
    /// while the row is at odds with its card, cleared once it is not. The scope's own
    /// arguments follow the time.
    static func recompute(scope: String, time: String = "?") -> String {
        "UPDATE token SET at_odds_since = CASE WHEN \(predicate) THEN COALESCE(at_odds_since, \(time)) ELSE NULL END WHERE \(scope)"
    }
}
