import Foundation
import ProvisioningModels
import SDKTestSupport
import TokenPlatform

/// A store that forwards every call to another one, but throws ``failure`` instead while it is
/// set: a database that fails in a way a real one is hard to make fail on demand (a ping that
/// does not answer, an error no driver would call an outage).
struct FaultyStore: TMPStore {
    /// The store the calls go to.
    let base: any TMPStore
    /// What every call throws while set.
    let failure = Locked<(any Error)?>(nil)
    /// Awaited, while set, before each read of a card by its id: lets a test hold concurrent
    /// requests at that read so they interleave as it wants.
    let beforeCardRead = Locked<(@Sendable () async -> Void)?>(nil)
    /// Every command lease taken or asked for: "holder reference".
    let leaseTakes = Locked<[String]>([])
    /// What a read of one token by its reference throws while set (other calls go through).
    let tokenReadFailure = Locked<(any Error)?>(nil)
    /// What an update of one token (``TMPStore/updateToken(reference:audit:_:)``) throws while
    /// set (other calls go through).
    let tokenUpdateFailure = Locked<(any Error)?>(nil)
    /// What a write of a token's note of block suspensions throws while set.
    let noteFailure = Locked<(any Error)?>(nil)
    /// Awaited, while set, after a note of a block suspension is written, in the caller's task.
    let afterNote = Locked<(@Sendable () async -> Void)?>(nil)
    /// Awaited, while set, just before a token event is applied.
    let beforeTokenEvent = Locked<(@Sendable () async -> Void)?>(nil)
    /// Awaited, while set, just before and just after a tokenization decision is recorded.
    let aroundDecisionRecord = Locked<(before: @Sendable () async -> Void, after: @Sendable () async -> Void)?>(nil)

    private func check() throws {
        if let error = failure.current { throw error }
    }

    @discardableResult
    func migrate() async throws -> [String] { try check(); return try await base.migrate() }
    func pendingMigrations() async throws -> [String] { try check(); return try await base.pendingMigrations() }
    func unknownMigrations() async throws -> [String] { try check(); return try await base.unknownMigrations() }
    func close() async { await base.close() }
    func ping() async throws { try check(); try await base.ping() }

    func card(externalCardId: String) async throws -> CardRecord? {
        try check()
        await beforeCardRead.current?()
        return try await base.card(externalCardId: externalCardId)
    }
    func card(externalCardId: String, ownedBy userId: String) async throws -> CardRecord? { try check(); return try await base.card(externalCardId: externalCardId, ownedBy: userId) }
    func card(panLookupHash: String) async throws -> CardRecord? { try check(); return try await base.card(panLookupHash: panLookupHash) }
    func holdsCard(panLookupHashes: [String]) async throws -> Bool { try check(); return try await base.holdsCard(panLookupHashes: panLookupHashes) }
    func card(panUniqueReference: String) async throws -> CardRecord? { try check(); return try await base.card(panUniqueReference: panUniqueReference) }
    func card(retiredPanUniqueReference: String) async throws -> CardRecord? { try check(); return try await base.card(retiredPanUniqueReference: retiredPanUniqueReference) }
    func cards(ownedBy userId: String) async throws -> [CardRecord] { try check(); return try await base.cards(ownedBy: userId) }
    func putCard(_ card: CardRecord, audit: @Sendable (_ previous: CardRecord?) -> AuditEntry) async throws -> CardRecord? { try check(); return try await base.putCard(card, audit: audit) }
    func setCardStatus(externalCardId: String, status: CardStatus, at: Date, audit: @Sendable (_ previous: CardStatus) -> AuditEntry) async throws -> CardStatusUpdate {
        try check()
        return try await base.setCardStatus(externalCardId: externalCardId, status: status, at: at, audit: audit)
    }

    func takeTokenCommandLease(reference: String, holder: String, for duration: Duration) async throws -> Bool {
        try check()
        leaseTakes.withValue { $0.append("\(holder) \(reference)") }
        return try await base.takeTokenCommandLease(reference: reference, holder: holder, for: duration)
    }
    func releaseTokenCommandLease(reference: String, holder: String) async throws {
        try check()
        try await base.releaseTokenCommandLease(reference: reference, holder: holder)
    }
    func token(reference: String) async throws -> TokenRecord? {
        try check()
        if let error = tokenReadFailure.current { throw error }
        return try await base.token(reference: reference)
    }
    func tokens(externalCardId: String) async throws -> [TokenRecord] { try check(); return try await base.tokens(externalCardId: externalCardId) }
    func tokens(references: [String], ownedBy userId: String) async throws -> [TokenRecord] { try check(); return try await base.tokens(references: references, ownedBy: userId) }
    func updateToken(reference: String, audit: AuditEntry, _ decide: @Sendable (TokenRecord, CardRecord?) -> TokenChange) async throws -> TokenUpdateResult {
        try check()
        if let error = tokenUpdateFailure.current { throw error }
        return try await base.updateToken(reference: reference, audit: audit, decide)
    }
    func applyTokenEvent(eventId: String, event: TokenEventType, tokenReference: String, occurredAt: EventTime?, audit: AuditEntry, _ decide: @Sendable (TokenRecord?, CardRecord?) -> TokenEventEffect) async throws -> TokenEventApplication {
        try check()
        await beforeTokenEvent.current?()
        return try await base.applyTokenEvent(eventId: eventId, event: event, tokenReference: tokenReference, occurredAt: occurredAt, audit: audit, decide)
    }
    func tokensAtOddsWithTheirCard(since cutoff: Date, limit: Int) async throws -> [TokenRecord] { try check(); return try await base.tokensAtOddsWithTheirCard(since: cutoff, limit: limit) }
    func claimTokensAtOddsWithTheirCard(since cutoff: Date, limit: Int, at now: Date) async throws -> [TokenRecord] {
        try check()
        return try await base.claimTokensAtOddsWithTheirCard(since: cutoff, limit: limit, at: now)
    }
    func restartAtOddsClock(reference: String, at time: Date) async throws { try check(); try await base.restartAtOddsClock(reference: reference, at: time) }
    func noteBlockSuspensionSent(reference: String, at time: EventTime) async throws {
        try check()
        if let error = noteFailure.current { throw error }
        try await base.noteBlockSuspensionSent(reference: reference, at: time)
        await afterNote.current?()
    }
    func replaceBlockSuspensionNote(reference: String, with note: ClosedRange<EventTime>?, ifItIs expected: ClosedRange<EventTime>?, whileStatusIs status: TokenStatus?) async throws {
        try check()
        if let error = noteFailure.current { throw error }
        try await base.replaceBlockSuspensionNote(reference: reference, with: note, ifItIs: expected, whileStatusIs: status)
    }
    func clearBlockSuspensionNote(reference: String) async throws {
        try check()
        if let error = noteFailure.current { throw error }
        try await base.clearBlockSuspensionNote(reference: reference)
    }

    func recordProvisioningAttempt(_ attempt: ProvisioningAttempt) async throws { try check(); try await base.recordProvisioningAttempt(attempt) }
    func provisioningAttempt(activationDataId: String) async throws -> ProvisioningAttempt? { try check(); return try await base.provisioningAttempt(activationDataId: activationDataId) }
    func recordTokenizationDecision(_ decision: TokenizationDecisionRecord, consumingActivationData id: String?, decidedOn card: DecidedCard?) async throws -> TokenizationDecisionRecording {
        try check()
        let around = aroundDecisionRecord.current
        await around?.before()
        let recording = try await base.recordTokenizationDecision(decision, consumingActivationData: id, decidedOn: card)
        await around?.after()
        return recording
    }
    func tokenizationDecision(requestId: String) async throws -> TokenizationDecisionRecord? { try check(); return try await base.tokenizationDecision(requestId: requestId) }
    func tokenizationDecision(requestId: String, usingUp activationDataId: String) async throws -> TokenizationDecisionRecord? {
        try check()
        return try await base.tokenizationDecision(requestId: requestId, usingUp: activationDataId)
    }
    func latestTokenizationDecision(panUniqueReference: String, deviceType: DeviceType) async throws -> TokenizationDecisionRecord? {
        try check()
        return try await base.latestTokenizationDecision(panUniqueReference: panUniqueReference, deviceType: deviceType)
    }
    func latestTokenizingDecision(panUniqueReference: String, deviceType: DeviceType) async throws -> TokenizationDecisionRecord? {
        try check()
        return try await base.latestTokenizingDecision(panUniqueReference: panUniqueReference, deviceType: deviceType)
    }

    func putCardArt(_ art: CardArtRecord, audit: AuditEntry) async throws { try check(); try await base.putCardArt(art, audit: audit) }
    func cardArt(id: String) async throws -> CardArtRecord? { try check(); return try await base.cardArt(id: id) }
    func cardArtVersion(id: String) async throws -> CardArtVersion? { try check(); return try await base.cardArtVersion(id: id) }
    func auditEntries(subject: String) async throws -> [AuditEntry] { try check(); return try await base.auditEntries(subject: subject) }
    func anyCard() async throws -> CardRecord? { try check(); return try await base.anyCard() }
    func recordAudit(_ entry: AuditEntry) async throws { try check(); try await base.recordAudit(entry) }
    func countCards(notEncryptedUnder keyID: String) async throws -> Int { try check(); return try await base.countCards(notEncryptedUnder: keyID) }
    func cards(notEncryptedUnder keyID: String, after externalCardId: String?, limit: Int) async throws -> [CardRecord] {
        try check()
        return try await base.cards(notEncryptedUnder: keyID, after: externalCardId, limit: limit)
    }
    func replaceEncryptedPANs(_ changes: [EncryptedPANChange]) async throws -> [String] { try check(); return try await base.replaceEncryptedPANs(changes) }
    func historyCount(_ table: HistoryTable, before cutoff: Date) async throws -> Int { try check(); return try await base.historyCount(table, before: cutoff) }
    func deleteHistory(_ table: HistoryTable, before cutoff: Date, limit: Int, after position: HistoryPosition?) async throws -> HistoryBatch {
        try check()
        return try await base.deleteHistory(table, before: cutoff, limit: limit, after: position)
    }
}
