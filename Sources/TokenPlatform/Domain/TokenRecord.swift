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

/// A command the token service has not confirmed, owed to it until it does: TMP's record of the
/// token stands, and the realignment (``TokenRealigner``) sends the command again.
///
/// Only two commands are owed this way, because only for them does TMP's record not already
/// say what is owed: every other unconfirmed command leaves the token at odds with its card's
/// status (``TokenRecord/isAtOdds(with:)``), which the realignment reads by itself.
public enum PendingTokenCommand: String, Sendable, Hashable, Codable {
    /// Suspend again: TMP records the token suspended, but the token service carried out a
    /// resume for the card's unblocking after customer service (or the token service) had
    /// suspended it, and did not confirm suspending it again. Settled by a confirmed
    /// suspension, and by any later change of the token's status (TMP then records what the
    /// token service holds).
    case suspend = "SUSPEND"
    /// Deactivate: the token service activated the token for its card's previous owner (the
    /// card changed hands, same PAN, during the activation) and did not confirm ending it.
    /// Settled only by the token's deactivation.
    case deactivate = "DEACTIVATE"

    /// What stays owed after a command the token service confirmed is recorded as `status`:
    /// a suspension no longer, since TMP's record then says what the token service holds; a
    /// deactivation until the token is deactivated.
    func remaining(afterStatusBecomes status: TokenStatus) -> PendingTokenCommand? {
        self == .deactivate && status != .deactivated ? .deactivate : nil
    }

    /// What stays owed after a token event moves the token from `before` to `status`. An event
    /// that leaves the status as it was settles nothing: a late echo of an earlier suspension
    /// says nothing about the resume the pending suspension answers.
    func remaining(afterEventFrom before: TokenStatus, to status: TokenStatus) -> PendingTokenCommand? {
        before == status ? self : remaining(afterStatusBecomes: status)
    }
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
    /// A command the token service has not confirmed, sent again until it does.
    public var pendingCommand: PendingTokenCommand?
    /// When TMP sent the token service suspensions for the card's block whose outcome it has not
    /// recorded (the first and the last, TMP's clock), while TMP records the token ACTIVE: a
    /// suspension the token service reports around then is taken as the block's
    /// (``TokenEventRules/blockSuspensionEcho(sent:)``), also once the card is unblocked.
    ///
    /// Noted just before such a suspension is sent; withdrawn when it failed in a way that says
    /// it never left (``TokenServiceCommandOutcome/neverSent(_:)``); cleared when the token's
    /// status is recorded from a confirmed outcome (or found recorded already) or changed by an
    /// event, and before another suspension (customer service's) is sent.
    public var blockSuspensionsSent: ClosedRange<EventTime>?

    /// Creates a record.
    public init(tokenUniqueReference: String, externalCardId: String, panUniqueReference: String, userId: String, deviceType: DeviceType, status: TokenStatus, authorizationPath: AuthorizationPath, suspendedBy: SuspensionSource?, tokenLast4: String?, createdAt: Date, updatedAt: Date, lastEventAt: EventTime? = nil, pendingCommand: PendingTokenCommand? = nil, blockSuspensionsSent: ClosedRange<EventTime>? = nil) {
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
        self.pendingCommand = pendingCommand
        self.blockSuspensionsSent = blockSuspensionsSent
    }

    /// The Lifecycle API's view.
    public var resource: TokenResource {
        TokenResource(tokenUniqueReference: tokenUniqueReference, externalCardId: externalCardId, panUniqueReference: panUniqueReference, status: status, deviceType: deviceType, authorizationPath: authorizationPath, tokenLast4: tokenLast4, suspendedBy: suspendedBy?.rawValue, pendingCommand: pendingCommand?.rawValue)
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
    /// `note` (``blockSuspensionsSent``) with a suspension sent at `time` added.
    static func note(_ note: ClosedRange<EventTime>?, adding time: EventTime) -> ClosedRange<EventTime> {
        guard let note else { return time...time }
        return min(note.lowerBound, time)...max(note.upperBound, time)
    }

    /// A note read back from its two stored times (nil unless both are there; in order
    /// whatever order they were stored in).
    static func note(first: Int64?, last: Int64?) -> ClosedRange<EventTime>? {
        guard let first, let last else { return nil }
        return EventTime(millisecondsSince1970: min(first, last))...EventTime(millisecondsSince1970: max(first, last))
    }

    /// The record as it would be without its note of block suspensions sent
    /// (``blockSuspensionsSent``): to tell whether anything else about the token changed.
    public var withoutSuspensionNote: TokenRecord {
        var token = self
        token.blockSuspensionsSent = nil
        return token
    }

    /// Whether a token service command is owed: one the token's ``pendingCommand`` names, or
    /// one the card's status asks because it forbids this token's state: any live token of a
    /// CLOSED card (deactivate), an ACTIVE token of a BLOCKED card (suspend), a token the block
    /// suspended of an ACTIVE card (resume).
    ///
    /// The stores keep the same rule in SQL (`AtOddsSQL.predicate`) to know since when a
    /// token has been at odds with its card.
    public func isAtOdds(withCardStatus cardStatus: CardStatus) -> Bool {
        isAtOdds(withCardStatus: cardStatus, cardPanUniqueReference: panUniqueReference)
    }

    /// Whether a command is owed to this token given `card`: as
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

    /// Whether `card`'s status or PAN asks a command of this token (``isAtOdds(with:)`` without
    /// the ``pendingCommand``).
    func cardAsksACommand(_ card: CardRecord) -> Bool {
        guard status != .deactivated else { return false }
        return cardAsksACommand(cardStatus: card.status, cardPanUniqueReference: card.panUniqueReference)
    }

    private func isAtOdds(withCardStatus cardStatus: CardStatus, cardPanUniqueReference: String) -> Bool {
        guard status != .deactivated else { return false }
        return owesItsPendingCommand || cardAsksACommand(cardStatus: cardStatus, cardPanUniqueReference: cardPanUniqueReference)
    }

    /// Whether its ``pendingCommand`` is still to be sent: a deactivation, or a suspension of
    /// a token TMP records suspended (one on any other state — written by a server of an
    /// earlier version, which does not settle it — is not sent).
    var owesItsPendingCommand: Bool {
        switch pendingCommand {
        case .deactivate: status != .deactivated
        case .suspend: status == .suspended
        case nil: false
        }
    }

    private func cardAsksACommand(cardStatus: CardStatus, cardPanUniqueReference: String) -> Bool {
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
    /// True for a live `token` row that owes the token service a command: one it has not
    /// confirmed (`pending_command`, migration `v7`), or one its card asks because its status
    /// forbids the token's state or the token was made for a PAN the card no longer has.
    static let predicate = """
        token.status <> 'DEACTIVATED' AND (token.pending_command = 'DEACTIVATE' OR (token.pending_command = 'SUSPEND' AND token.status = 'SUSPENDED') \
        OR \(cardAsks))
        """

    /// The rule as migration `v3` applied it, before tokens had `pending_command`: frozen, so
    /// that the migration runs on the schema of its time (written out, not built from
    /// `cardAsks`, which may come to name columns added later).
    static let predicateBeforeV7 = """
        token.status <> 'DEACTIVATED' AND \
        EXISTS (SELECT 1 FROM card WHERE card.external_card_id = token.external_card_id \
        AND (card.status = 'CLOSED' OR card.pan_unique_reference <> token.pan_unique_reference OR (card.status = 'BLOCKED' AND token.status = 'ACTIVE') \
        OR (card.status = 'ACTIVE' AND token.status = 'SUSPENDED' AND token.suspended_by = 'CARD_BLOCKED')))
        """

    /// The card's part of the rule, for a live `token` row.
    private static let cardAsks = """
        EXISTS (SELECT 1 FROM card WHERE card.external_card_id = token.external_card_id \
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
