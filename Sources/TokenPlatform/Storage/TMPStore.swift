import Foundation
import ProvisioningModels

/// Everything TMP persists, behind one small async protocol.
///
/// Every method that changes state is one transaction, and writes its audit entry in that
/// same transaction. Implementations: ``SQLiteStore`` (GRDB, the embedded default) and
/// ``PostgresStore`` (postgres-nio, for several TMP instances on one database). All pass
/// `TMPStoreContractTests`.
///
/// Several processes may share one store: the read-decide-write methods
/// (``updateToken(reference:audit:_:)``, ``applyTokenEvent(eventId:event:tokenReference:occurredAt:audit:_:)``,
/// ``setCardStatus(externalCardId:status:at:audit:)``) decide on the current committed row
/// while holding it, so no change is lost.
///
/// A write whose calling task is cancelled may or may not be stored, and the two stores
/// differ: GRDB interrupts a SQLite transaction still running and rolls it back (throwing
/// `CancellationError`), except the group-committed writes (tokenization decisions,
/// provisioning attempts), which go on; a PostgreSQL statement already sent runs on and
/// commits. Either way the write is whole or absent. A caller whose write must land once the
/// token service has acted (a command's outcome) writes from a task of its own
/// (``PlatformEnvironment``'s `recordCommandOutcome`), which its caller's cancellation does
/// not reach.
public protocol TMPStore: Sendable {
    /// Creates or upgrades the schema (named migrations); returns the names this call applied,
    /// in order (empty when the schema was up to date). Safe to call from several processes.
    @discardableResult
    func migrate() async throws -> [String]
    /// The names of the migrations not yet applied, in order.
    func pendingMigrations() async throws -> [String]
    /// The names of migrations applied to the database that this version does not know,
    /// sorted: a newer version migrated it, so its schema may not be the one this code reads.
    func unknownMigrations() async throws -> [String]
    /// Releases connections; the store is unusable afterwards. A no-op where nothing is held.
    func close() async
    /// Checks the database answers.
    func ping() async throws

    /// A card by id.
    func card(externalCardId: String) async throws -> CardRecord?
    /// A card by id if `userId` owns it (the ids compared byte for byte): nil alike for a
    /// missing card and for another user's, whose row is filtered out by the query and never
    /// decoded, so the two answers take the same time.
    func card(externalCardId: String, ownedBy userId: String) async throws -> CardRecord?
    /// A card by the PAN vault's lookup hash.
    func card(panLookupHash: String) async throws -> CardRecord?
    /// Whether a card has one of these PAN lookup hashes (false for none), in one query however
    /// many there are.
    func holdsCard(panLookupHashes: [String]) async throws -> Bool
    /// A card by its pan-unique reference.
    func card(panUniqueReference: String) async throws -> CardRecord?
    /// The card that had `panUniqueReference` before its PAN was replaced.
    func card(retiredPanUniqueReference: String) async throws -> CardRecord?
    /// A user's cards, ordered by id.
    func cards(ownedBy userId: String) async throws -> [CardRecord]
    /// Creates or replaces a card; returns the version it replaced.
    ///
    /// A replacement keeps the status as stored (only
    /// ``setCardStatus(externalCardId:status:at:audit:)`` changes it), so replacing a card
    /// cannot reopen one closed meanwhile.
    ///
    /// When the replacement carries another `panUniqueReference` (the PAN changed), the old
    /// one is kept as retired (``card(retiredPanUniqueReference:)``), and every token of the
    /// old PAN that is not yet deactivated is at odds with the card from this commit on: the
    /// token service must deactivate it, so TMP never records it deactivated on its own.
    /// Tokens follow the card's owner. Fails with ``StoreError/duplicatePAN`` when another card
    /// has the same PAN.
    ///
    /// Whether the PAN changed is decided on the card as stored, locked by this write, not on
    /// the caller's earlier read: when the stored card already has this PAN (a concurrent
    /// replacement with the same PAN committed first), its `panUniqueReference` is kept whatever
    /// `card` carries, and nothing is retired. When the stored card has another PAN but `card`
    /// carries the stored reference (the caller read the card before a concurrent replacement
    /// and took the PAN as unchanged), this fails with ``StoreError/concurrentChange`` and
    /// stores nothing.
    ///
    /// `audit` makes the write's audit entry from the card as stored before it (nil: the card
    /// is new), in the same transaction, so the trail says `card.create` once even when two
    /// first `PUT`s of a card race, and names the PAN or owner change the write actually made.
    /// It is called inside the transaction, again if a store runs the transaction again (a
    /// PostgreSQL transaction that lost a race), and also when the write then fails; it must
    /// only make the entry.
    func putCard(_ card: CardRecord, audit: @Sendable (_ previous: CardRecord?) -> AuditEntry) async throws -> CardRecord?
    /// Changes a card's status, deciding on the card as stored: a CLOSED card stays CLOSED.
    ///
    /// The card is read and written in one transaction that holds it, so a concurrent change
    /// of its status either commits before this one reads it or waits until this one commits.
    /// Closing a CLOSED card again is allowed (it retries the deactivation of its tokens); any
    /// other change of a CLOSED card is refused and writes nothing. Setting the status the card
    /// has already (a retry of its tokens' commands) writes nothing either, and makes no audit
    /// entry: it is answered as ``CardStatusUpdate/updated(previous:card:)`` with the card as
    /// stored. `audit` makes the audit entry from the status the card had just before the change.
    func setCardStatus(externalCardId: String, status: CardStatus, at: Date, audit: @Sendable (_ previous: CardStatus) -> AuditEntry) async throws -> CardStatusUpdate

    /// A token by reference.
    func token(reference: String) async throws -> TokenRecord?
    /// A card's tokens, ordered by creation.
    func tokens(externalCardId: String) async throws -> [TokenRecord]
    /// Those of `references` that exist and belong to `userId`.
    func tokens(references: [String], ownedBy userId: String) async throws -> [TokenRecord]
    /// Reads a token and its card, asks `decide` what to do, and applies it atomically.
    ///
    /// `decide` sees both as committed, and neither changes until this change commits, so a
    /// decision that depends on the card's status (activating, resuming, suspending for a
    /// block) cannot race a status change.
    func updateToken(reference: String, audit: AuditEntry, _ decide: @Sendable (TokenRecord, CardRecord?) -> TokenChange) async throws -> TokenUpdateResult
    /// Applies a TSP token event at most once per `eventId`, atomically with its effect.
    ///
    /// `decide` sees the token (nil when it does not exist yet) and, for an existing token, its
    /// card, both as committed; the card's status does not change until this change commits.
    /// An `eventId` seen before is a duplicate only if it was used for the same token, the
    /// same `event` and the same `occurredAt` (when both say one); otherwise the event is
    /// refused (``TokenEventApplication/eventIdReused(tokenReference:event:)``), since taking it
    /// for a duplicate would lose it.
    func applyTokenEvent(eventId: String, event: TokenEventType, tokenReference: String, occurredAt: EventTime?, audit: AuditEntry, _ decide: @Sendable (TokenRecord?, CardRecord?) -> TokenEventEffect) async throws -> TokenEventApplication

    /// Tokens whose state their card forbids (``TokenRecord/isAtOdds(with:)``)
    /// and have been so since `cutoff` or earlier: the longest at odds first, at most `limit`.
    ///
    /// Every write of a card's status or a token's state keeps, in its own transaction, a
    /// clock for each token at odds with its card, so a command that was never sent or never
    /// confirmed (the token service failed, the process stopped) is found here. The clock
    /// starts when the token falls at odds, and restarts when a realignment claims the token
    /// or a command sent again is not confirmed: it says when the token is next due, not how
    /// long it has been at odds.
    func tokensAtOddsWithTheirCard(since cutoff: Date, limit: Int) async throws -> [TokenRecord]
    /// Takes tokens for a realignment round: those ``tokensAtOddsWithTheirCard(since:limit:)``
    /// returns, whose clocks this call restarts at `now` in the same transaction.
    ///
    /// Another round, on this instance or another one sharing the database, then finds them
    /// only once their clock is past its own cutoff again (a grace later), so instances share
    /// the owed commands instead of each sending all of them. A token whose command succeeds
    /// stops being at odds; one whose command fails comes back after the grace. Concurrent
    /// calls take disjoint sets: one waits for, or (PostgreSQL) skips, tokens another holds.
    func claimTokensAtOddsWithTheirCard(since cutoff: Date, limit: Int, at now: Date) async throws -> [TokenRecord]
    /// Takes token `reference`'s command lease for `holder` (an instance) for `duration`:
    /// granted (true) unless another holder's lease has not expired yet; a holder taking its
    /// own lease again extends it. Expiry is judged on the database's clock where it has one
    /// (PostgreSQL's), so instances' clocks need not agree. Instances sharing a database hold
    /// one token's token service commands in line through it (``TokenCommandOrder``).
    func takeTokenCommandLease(reference: String, holder: String, for duration: Duration) async throws -> Bool
    /// Gives back `holder`'s command lease of token `reference`, if it still holds it.
    func releaseTokenCommandLease(reference: String, holder: String) async throws
    /// Restarts at `time` the clock of a token still at odds with its card (after a command to
    /// realign it that the token service did not confirm); does nothing to a token not at odds.
    func restartAtOddsClock(reference: String, at time: Date) async throws
    /// Records, just before a suspension for its card's block is sent, that the token service
    /// may hold the token suspended by it: `time` is added to ``TokenRecord/blockSuspensionsSent``,
    /// only while the token is ACTIVE, since for any other state TMP's record already tells
    /// the command's echo apart. Nothing else changes, and nothing is audited (the command's
    /// outcome is).
    func noteBlockSuspensionSent(reference: String, at time: EventTime) async throws
    /// Sets the token's ``TokenRecord/blockSuspensionsSent`` to `note` (nil clears it), only
    /// while it is `expected` (nil: while the token has none) and, when `status` is given, the
    /// token's status is `status`: a suspension noted that never reached the token service is
    /// withdrawn, unless another was noted since; a note cleared for another suspension that
    /// never reached it is put back, unless one was noted since or the token's status changed
    /// (which clears the note: the token service has moved on). Nothing else changes, and
    /// nothing is audited.
    func replaceBlockSuspensionNote(reference: String, with note: ClosedRange<EventTime>?, ifItIs expected: ClosedRange<EventTime>?, whileStatusIs status: TokenStatus?) async throws
    /// Clears the token's ``TokenRecord/blockSuspensionsSent``, whatever it is: before another
    /// suspension (customer service's) is sent, and once the token service confirmed a command
    /// whose outcome TMP found recorded already. Nothing else changes, and nothing is audited.
    func clearBlockSuspensionNote(reference: String) async throws

    /// Records a successful `signed-cards` call.
    func recordProvisioningAttempt(_ attempt: ProvisioningAttempt) async throws
    /// The attempt that issued the activation data whose id is `activationDataId`.
    func provisioningAttempt(activationDataId: String) async throws -> ProvisioningAttempt?
    /// Records a tokenization decision and, in the same transaction, marks the activation data
    /// whose id is `id` (the `consumingActivationData` argument) used, at the decision's time;
    /// nil uses none. Records nothing, answering ``TokenizationDecisionRecording/activationDataUsedBefore``,
    /// when that activation data was used before. So activation data is never used up by a
    /// decision that was not recorded. The decision is recorded with the id it used up
    /// (``TokenizationDecisionRecord/activationDataId`` when read back).
    ///
    /// With `card` (a decision on activation data that lets a token be made), the decision is recorded only while
    /// the card still is as it was decided on — ACTIVE, with that PAN and that owner — checked
    /// in the same transaction, and a change of the card's waits for it (PostgreSQL: the
    /// card's row is locked for share); otherwise nothing is recorded or used up
    /// (``TokenizationDecisionRecording/cardChanged``).
    func recordTokenizationDecision(_ decision: TokenizationDecisionRecord, consumingActivationData id: String?, decidedOn card: DecidedCard?) async throws -> TokenizationDecisionRecording
    /// The newest decision recorded for the token service's request id.
    func tokenizationDecision(requestId: String) async throws -> TokenizationDecisionRecord?
    /// The decision recorded for the token service's request id that used up `activationDataId`:
    /// the answer a retry of that request gets again (nil for decisions recorded before stores
    /// kept the activation data they used up).
    func tokenizationDecision(requestId: String, usingUp activationDataId: String) async throws -> TokenizationDecisionRecord?
    /// The newest decision for a card and device.
    func latestTokenizationDecision(panUniqueReference: String, deviceType: DeviceType) async throws -> TokenizationDecisionRecord?
    /// The newest decision for a card and device that let a token be made (APPROVED or
    /// REQUIRE_ADDITIONAL_AUTHENTICATION): the one a new token's authorization path comes
    /// from, whatever was declined after it (a replay, a retry with a wrong expiry).
    func latestTokenizingDecision(panUniqueReference: String, deviceType: DeviceType) async throws -> TokenizationDecisionRecord?

    /// Stores card art (replacing any with the same id).
    func putCardArt(_ art: CardArtRecord, audit: AuditEntry) async throws
    /// Card art by id.
    func cardArt(id: String) async throws -> CardArtRecord?
    /// The version of the card art stored under `id`, without reading the file (nil when
    /// there is none); equal to that record's ``CardArtRecord/version``.
    func cardArtVersion(id: String) async throws -> CardArtVersion?

    /// Audit entries about a subject (`card:<id>` / `token:<ref>`), oldest first.
    func auditEntries(subject: String) async throws -> [AuditEntry]
    /// One card, any (nil when there is none): for the start-up check that the PAN vault's
    /// keys are those the stored card numbers were encrypted with.
    func anyCard() async throws -> CardRecord?
    /// Records an audit entry on its own: an action that changed nothing TMP stores (a command
    /// sent again to the token service so that it holds what TMP records).
    func recordAudit(_ entry: AuditEntry) async throws

    /// How many cards hold a PAN encrypted under a key other than `keyID` (their stored value
    /// does not start with `v1.<keyID>.`).
    func countCards(notEncryptedUnder keyID: String) async throws -> Int
    /// At most `limit` cards holding a PAN encrypted under a key other than `keyID`, in id
    /// order, after the card `externalCardId` (nil: from the first).
    func cards(notEncryptedUnder keyID: String, after externalCardId: String?, limit: Int) async throws -> [CardRecord]
    /// Stores each change's new encrypted PAN on its card if the card still holds the value
    /// the change was made from (a card replaced meanwhile is left as it is), with the change's
    /// audit entry, in one transaction. Returns the ids of the cards changed. Nothing else of
    /// the card changes (its `updatedAt` included: the card is the same). Each card at most
    /// once per call (a card named twice is applied in order by SQLite, by either row by
    /// PostgreSQL's single statement).
    func replaceEncryptedPANs(_ changes: [EncryptedPANChange]) async throws -> [String]

    /// How many rows of `table` were recorded before `cutoff`.
    func historyCount(_ table: HistoryTable, before cutoff: Date) async throws -> Int
    /// Deletes the next at most `limit` rows of `table` recorded before `cutoff`, going on
    /// from `position` (nil: the start), in one short transaction.
    ///
    /// The rows are found in storage order from `position` on, outside the write, so neither
    /// a batch nor the search for the last one holds the database's write lock or passes rows
    /// an earlier batch deleted; only rows recorded before `cutoff` are deleted, whatever their
    /// order. The answer says how many went and where the next batch starts (nil: none left
    /// after this one, as far as this pass is concerned).
    func deleteHistory(_ table: HistoryTable, before cutoff: Date, limit: Int, after position: HistoryPosition?) async throws -> HistoryBatch
}

/// The card a tokenization decision that lets a token be made was decided on, as it was read:
/// the decision stands only while the card is still ACTIVE with this PAN and this owner.
public struct DecidedCard: Sendable, Hashable {
    /// The card.
    public var externalCardId: String
    /// Its PAN's reference when decided.
    public var panUniqueReference: String
    /// Its owner when decided (the one its activation data was issued to).
    public var userId: String

    /// Creates the condition.
    public init(externalCardId: String, panUniqueReference: String, userId: String) {
        self.externalCardId = externalCardId
        self.panUniqueReference = panUniqueReference
        self.userId = userId
    }
}

/// What became of a tokenization decision to record.
public enum TokenizationDecisionRecording: Sendable, Hashable {
    /// Recorded, its activation data (if any) used up with it.
    case recorded
    /// Not recorded: its activation data was used before.
    case activationDataUsedBefore
    /// Not recorded: the card is no longer as the decision found it (blocked, closed, given
    /// another PAN or another owner meanwhile).
    case cardChanged
}

/// One card's PAN, encrypted again (``TMPStore/replaceEncryptedPANs(_:)``).
public struct EncryptedPANChange: Sendable, Hashable {
    /// The card.
    public var externalCardId: String
    /// The stored value it was made from.
    public var expected: String
    /// The value to store instead.
    public var replacement: String
    /// The audit entry recorded with it.
    public var audit: AuditEntry

    /// Creates a change.
    public init(externalCardId: String, expected: String, replacement: String, audit: AuditEntry) {
        self.externalCardId = externalCardId
        self.expected = expected
        self.replacement = replacement
        self.audit = audit
    }
}

/// Where a pass over a history table has got to (a row's place in storage: SQLite's rowid,
/// PostgreSQL's `ctid`); opaque outside the store that made it.
public struct HistoryPosition: Sendable, Hashable {
    package var value: String
    package init(_ value: String) { self.value = value }
}

/// One batch of ``TMPStore/deleteHistory(_:before:limit:after:)``.
public struct HistoryBatch: Sendable, Hashable {
    /// Rows deleted.
    public var deleted: Int
    /// Where the next batch starts; nil when this pass has reached the end of the table.
    public var next: HistoryPosition?

    /// Creates a batch result.
    public init(deleted: Int, next: HistoryPosition?) {
        self.deleted = deleted
        self.next = next
    }
}

/// The tables that only keep history, which grow with every call and event: nothing TMP
/// decides on reads their rows once those are older than a few days (activation data lives
/// ten minutes; a token service retries for hours at most). See ``HistoryPruning``.
public enum HistoryTable: String, CaseIterable, Sendable, Hashable {
    /// The audit trail (`audit_event`).
    case auditEvents = "audit_event"
    /// One row per `signed-cards` call, also the seal's audit entry (`provisioning_attempt`).
    case provisioningAttempts = "provisioning_attempt"
    /// The token service's decisions, by request id (`tokenization_decision`).
    case tokenizationDecisions = "tokenization_decision"
    /// The token-event ids already applied, for idempotency (`token_event`).
    case tokenEventIds = "token_event"
    /// Activation data used, for single use (`activation_data_use`).
    case activationDataUses = "activation_data_use"

    /// The column holding when a row was recorded.
    package var timeColumn: String {
        switch self {
        case .auditEvents: "at"
        case .provisioningAttempts: "created_at"
        case .tokenizationDecisions: "decided_at"
        case .tokenEventIds: "received_at"
        case .activationDataUses: "used_at"
        }
    }
}

extension TMPStore {
    /// `putCard(_:audit:)` with one audit entry whatever the card was before (tools and
    /// tests; the Lifecycle API makes its entry from the stored card).
    public func putCard(_ card: CardRecord, audit: AuditEntry) async throws -> CardRecord? {
        try await putCard(card, audit: { _ in audit })
    }
}

extension TMPStore {
    /// Nothing to release.
    public func close() async {}
}

/// The result of ``TMPStore/setCardStatus(externalCardId:status:at:audit:)``.
public enum CardStatusUpdate: Sendable, Hashable {
    /// Changed from `previous`; the card now.
    case updated(previous: CardStatus, card: CardRecord)
    /// Refused: the card is CLOSED, and a closed card cannot change status. Nothing was written.
    case refusedClosed(CardRecord)
    /// No such card.
    case notFound
}

extension CardStatusUpdate {
    /// Setting `stored` (the card as committed) to `status` at `date`: the card to write (nil
    /// for none) and what ``TMPStore/setCardStatus(externalCardId:status:at:audit:)`` returns.
    static func resolve(_ stored: CardRecord, to status: CardStatus, at date: Date) -> (write: CardRecord?, result: CardStatusUpdate) {
        if stored.status == .closed, status != .closed {
            return (nil, .refusedClosed(stored))
        }
        // The status it has already (a PATCH sent again to retry its tokens): nothing changes,
        // so nothing is written or audited.
        if stored.status == status {
            return (nil, .updated(previous: stored.status, card: stored))
        }
        var after = stored
        after.status = status
        after.updatedAt = date
        return (after, .updated(previous: stored.status, card: after))
    }
}

/// What ``TMPStore/updateToken(reference:audit:_:)`` should do with a token.
public enum TokenChange: Sendable, Hashable {
    /// Set the status and suspension source (what the token service now holds). A pending
    /// suspension is settled by it; a pending deactivation only by `DEACTIVATED`
    /// (``PendingTokenCommand``).
    case set(TokenStatus, suspendedBy: SuspensionSource?)
    /// Leave the status as it is and record a command the token service has not confirmed, or
    /// (nil) that the pending one is settled.
    case setPending(PendingTokenCommand?)
    /// Set the status and suspension source the token service held before a suspension for the
    /// card's block that it did not confirm: as ``set(_:suspendedBy:)``, but an ACTIVE token
    /// keeps its ``TokenRecord/blockSuspensionsSent``, with the time given (when the
    /// suspension was sent, if it may have been carried out) added in the same write.
    case setNotConfirmed(TokenStatus, suspendedBy: SuspensionSource?, blockSuspensionSentAt: EventTime?)
    /// Leave it as it is (no audit entry).
    case unchanged
    /// Refuse; the message says why.
    case reject(String)
}

/// The result of ``TMPStore/updateToken(reference:audit:_:)``.
public enum TokenUpdateResult: Sendable, Hashable {
    /// Changed from the first to the second.
    case updated(before: TokenRecord, after: TokenRecord)
    /// Nothing to do.
    case unchanged(TokenRecord)
    /// Refused.
    case rejected(TokenRecord, String)
    /// No such token.
    case notFound
}

extension TokenChange {
    /// This decision applied to `before` at `date`: the token to write (nil for none) and what
    /// ``TMPStore/updateToken(reference:audit:_:)`` returns.
    func resolve(_ before: TokenRecord, at date: Date) -> (write: TokenRecord?, result: TokenUpdateResult) {
        switch self {
        case .unchanged:
            return (nil, .unchanged(before))
        case .reject(let message):
            return (nil, .rejected(before, message))
        case .set(let status, let suspendedBy):
            var after = before
            after.status = status
            after.suspendedBy = suspendedBy
            after.pendingCommand = before.pendingCommand?.remaining(afterStatusBecomes: status)
            // The token service's state is known again: no suspension sent for a block is
            // still without its outcome.
            after.blockSuspensionsSent = nil
            after.updatedAt = date
            return (after, .updated(before: before, after: after))
        case .setNotConfirmed(let status, let suspendedBy, let sent):
            var after = before
            after.status = status
            after.suspendedBy = suspendedBy
            after.pendingCommand = before.pendingCommand?.remaining(afterStatusBecomes: status)
            after.blockSuspensionsSent = status != .active ? nil : sent.map { TokenRecord.note(before.blockSuspensionsSent, adding: $0) } ?? before.blockSuspensionsSent
            after.updatedAt = date
            return (after, .updated(before: before, after: after))
        case .setPending(let command):
            guard command != before.pendingCommand else { return (nil, .unchanged(before)) }
            var after = before
            after.pendingCommand = command
            after.updatedAt = date
            return (after, .updated(before: before, after: after))
        }
    }
}

/// A deactivation a new token is owed when it was made for another user than its card's
/// owner as committed with it: the card changed hands (same PAN) after the decision that let
/// the token be made, so the token is on the previous owner's device.
public struct OwedDeactivation: Sendable, Hashable {
    /// The user the decision's activation data was issued to.
    public var madeFor: String
    /// The entry recorded with the mark (`token.pending_command`).
    public var audit: AuditEntry

    /// Creates one.
    public init(madeFor: String, audit: AuditEntry) {
        self.madeFor = madeFor
        self.audit = audit
    }
}

/// What a token event does.
public enum TokenEventEffect: Sendable, Hashable {
    /// Insert a new token; when `owed` is given and the card's owner as committed is not
    /// `owed.madeFor` (byte for byte), the token is inserted with a pending `DEACTIVATE` and
    /// `owed.audit` is recorded, in the same transaction.
    case insert(TokenRecord, owed: OwedDeactivation? = nil)
    /// Update the existing token; `eventTime`, when given, becomes its ``TokenRecord/lastEventAt``.
    case update(status: TokenStatus, suspendedBy: SuspensionSource?, tokenLast4: String?, eventTime: EventTime? = nil)
    /// Acknowledge the event without applying it: it happened before one already applied.
    /// Its id is recorded, so a redelivery is a duplicate.
    case stale
    /// Acknowledge the event as ``stale``, and record the token number's last four digits it
    /// carries, where the token has none.
    case staleFillingIn(tokenLast4: String)
    /// Refuse the event (not recorded, so a corrected retry can apply).
    case reject(String)
}

extension TokenEventEffect {
    /// What storing this effect writes, given the token as stored now (nil when none).
    enum Write {
        /// Insert this new token (owing its deactivation when made for another user).
        case insert(TokenRecord, owed: OwedDeactivation?)
        /// Replace the stored token with this.
        case update(TokenRecord)
        /// Record the event id; the token as stored, or with its last four digits filled in
        /// (`fillsIn`, the digits, to be written).
        case stale(TokenRecord, fillsIn: String? = nil)
        /// Write nothing.
        case reject(String)
    }

    /// This effect applied to `current` at `date`.
    func resolve(_ current: TokenRecord?, at date: Date) -> Write {
        switch self {
        case .reject(let message):
            return .reject(message)
        case .insert(let token, let owed):
            return .insert(token, owed: owed)
        case .stale:
            guard let current else { return .reject("unknown token") }
            return .stale(current)
        case .staleFillingIn(let tokenLast4):
            guard var current else { return .reject("unknown token") }
            guard current.tokenLast4 == nil else { return .stale(current) }
            current.tokenLast4 = tokenLast4
            current.updatedAt = date
            return .stale(current, fillsIn: tokenLast4)
        case .update(let status, let suspendedBy, let tokenLast4, let eventTime):
            guard var token = current else { return .reject("unknown token") }
            // The token service's own word on a change of the token settles a pending suspension.
            token.pendingCommand = token.pendingCommand?.remaining(afterEventFrom: token.status, to: status)
            // A change of status the token service reports is the outcome of any suspension
            // sent for a block (its echo, or something newer).
            if token.status != status { token.blockSuspensionsSent = nil }
            token.status = status
            token.suspendedBy = suspendedBy
            token.tokenLast4 = tokenLast4 ?? token.tokenLast4
            token.updatedAt = date
            if let eventTime { token.lastEventAt = max(eventTime, token.lastEventAt ?? eventTime) }
            return .update(token)
        }
    }
}

extension TMPStore {
    /// ``applyTokenEvent(eventId:event:tokenReference:occurredAt:audit:_:)`` for an event that
    /// does not say when it happened.
    public func applyTokenEvent(eventId: String, event: TokenEventType, tokenReference: String, audit: AuditEntry, _ decide: @Sendable (TokenRecord?, CardRecord?) -> TokenEventEffect) async throws -> TokenEventApplication {
        try await applyTokenEvent(eventId: eventId, event: event, tokenReference: tokenReference, occurredAt: nil, audit: audit, decide)
    }
}

/// What a token event id was used for, as a store read it back.
struct TokenEventIdUse {
    /// The token it was applied to.
    var tokenReference: String
    /// The event; nil when recorded before stores kept it (or not one this version knows).
    var event: TokenEventType?
    /// When the event said it happened; nil when it said nothing, or was recorded before
    /// stores kept it (migration `v10`).
    var occurredAt: EventTime?

    init(tokenReference: String, event: String?, occurredMilliseconds: Int64?) {
        self.tokenReference = tokenReference
        self.event = event.flatMap(TokenEventType.init(rawValue:))
        self.occurredAt = occurredMilliseconds.map(EventTime.init(millisecondsSince1970:))
    }

    /// Whether `event` for `token`, said to have happened at `occurredAt`, is this use again
    /// (a duplicate). An id recorded without its event is a duplicate for its own token, as it
    /// was before the event was kept; one recorded without a time, for its token's event at
    /// any time. One recorded with a time is another event when it comes with another time or
    /// none: the same event sent again says the same.
    func isSame(_ event: TokenEventType, for token: String, occurredAt: EventTime?) -> Bool {
        tokenReference.isSameIdentifier(as: token) && (self.event == nil || self.event == event)
            && (self.occurredAt == nil || self.occurredAt == occurredAt)
    }
}

/// The result of ``TMPStore/applyTokenEvent(eventId:event:tokenReference:occurredAt:audit:_:)``.
public enum TokenEventApplication: Sendable, Hashable {
    /// Applied; the token now.
    case applied(TokenRecord)
    /// Seen before; the token now (nil if it never existed).
    case duplicate(TokenRecord?)
    /// The event id was used before for another token, or for another event of this token (the
    /// token and the event it was used for; the event is nil for ids recorded before the store
    /// kept it, which count as duplicates for their own token): a token service reusing ids,
    /// whose event would otherwise be lost as a duplicate.
    case eventIdReused(tokenReference: String, event: TokenEventType?)
    /// Older than an event already applied: acknowledged, not applied; the token now.
    case stale(TokenRecord)
    /// Refused.
    case rejected(String)
}

/// Storage failures callers act on.
public enum StoreError: Error, Sendable, Hashable {
    /// Another card already has this PAN.
    case duplicatePAN(existingCardId: String)
    /// The card changed between the caller's read and this write in a way the write was not
    /// decided for; read again and retry.
    case concurrentChange(externalCardId: String)
}

extension TMPStore {
    /// Records a tokenization decision that uses no activation data.
    public func recordTokenizationDecision(_ decision: TokenizationDecisionRecord) async throws {
        _ = try await recordTokenizationDecision(decision, consumingActivationData: nil, decidedOn: nil)
    }

    /// Records a decision without a card to check (``recordTokenizationDecision(_:consumingActivationData:decidedOn:)``);
    /// false when its activation data was used before.
    public func recordTokenizationDecision(_ decision: TokenizationDecisionRecord, consumingActivationData id: String?) async throws -> Bool {
        try await recordTokenizationDecision(decision, consumingActivationData: id, decidedOn: nil) == .recorded
    }
}
