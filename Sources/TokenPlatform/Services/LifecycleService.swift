import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// The issuer back office's API: cards, their status, customer-service token actions, card art.
public struct LifecycleService: Sendable {
    /// Shared dependencies.
    public let environment: PlatformEnvironment

    /// Creates the service.
    public init(environment: PlatformEnvironment) {
        self.environment = environment
    }

    /// A token command customer service can give.
    public enum TokenAction: String, Sendable, CaseIterable {
        /// ACTIVE → SUSPENDED.
        case suspend
        /// SUSPENDED → ACTIVE.
        case resume
        /// any → DEACTIVATED.
        case deactivate
    }

    /// The result of changing a card's status: the card and what happened to each token.
    public struct StatusChange: Codable, Sendable, Hashable {
        /// What happened to one token.
        public struct TokenOutcome: Codable, Sendable, Hashable {
            /// The token.
            public var tokenUniqueReference: String
            /// Its state now.
            public var status: TokenStatus
            /// `SUSPENDED`, `RESUMED`, `DEACTIVATED`, `UNCHANGED`, or `FAILED` (the token service
            /// did not confirm, or it did and the database could not record it; TMP's record is
            /// unchanged — the same PATCH again retries it, and ``TokenRealigner`` sends the
            /// command again once the grace has passed).
            /// A command the card's status overtook is undone at the token service
            /// (``TokenCorrection``): `UNCHANGED`, or `FAILED` with the token as the token
            /// service holds it when the undo was not confirmed. The command is decided in
            /// the token's turn (``TokenCommandOrder``), for the card as it is then: a change
            /// overtaken by another may report what was done for the later status, and
            /// `UNCHANGED` when nothing was owed by then. `FAILED` also when the command did
            /// not get its turn in time.
            public var result: String
        }

        /// The card now.
        public var card: CardResource
        /// The tokens the change concerned.
        public var tokens: [TokenOutcome]
    }

    /// `PUT cards/{id}`: creates or replaces a card. Returns the card and whether it was created.
    public func putCard(externalCardId: String, request: CardUpsertRequest) async throws -> (card: CardResource, created: Bool) {
        // Only a new card's id must keep the rules for new ids (below): a card stored under
        // another id before a rule can still be replaced.
        try InputRules.identifier(externalCardId, field: "externalCardId")
        try InputRules.userId(request.userId)
        try InputRules.text(request.cardholderName, field: "cardholderName", maximum: PassDataPayload.maximumNameLength)
        try InputRules.text(request.productTitle, field: "productTitle", maximum: InputRules.maximumTitleLength)
        // Kept and returned in clear (to the cardholder's app too): no card number in them.
        try await environment.refuseCardNumber(in: request.userId, field: "userId", own: request.primaryAccountNumber)
        try await environment.refuseCardNumber(in: request.cardholderName, field: "cardholderName", own: request.primaryAccountNumber, kind: .text)
        try await environment.refuseCardNumber(in: request.productTitle, field: "productTitle", own: request.primaryAccountNumber, kind: .text)
        if let artId = request.artId {
            try InputRules.identifier(artId, field: "artId")
            // Checked against the numbers held when the art was uploaded, which this card's
            // may not have been among; returned with the card in clear.
            try PlatformEnvironment.refuseOwnCardNumber(in: artId, field: "artId", own: request.primaryAccountNumber)
            guard try await environment.store.cardArtVersion(id: artId) != nil else {
                throw TMPError.badRequest("unknown_art", "artId \(Redaction.identifier(artId)) is not uploaded; PUT /lifecycle/card-art/\(Redaction.identifier(artId)) first")
            }
        }
        let now = environment.now()
        let existing = try await environment.store.card(externalCardId: externalCardId)
        if existing == nil {
            // A card stored under such an id before the rule can still be replaced.
            try InputRules.newIdentifier(externalCardId, field: "externalCardId")
            try await environment.refuseCardNumber(in: externalCardId, field: "externalCardId", own: request.primaryAccountNumber)
        }
        let lookupHash = environment.vault.lookupHash(request.primaryAccountNumber)
        let samePAN = existing.map { constantTimeEquals($0.panLookupHash, lookupHash) } ?? false
        if existing != nil, !samePAN {
            // The id of a card given a new PAN must not hold that PAN either, or the number
            // would be stored, logged and returned in clear as the card's id from now on.
            try PlatformEnvironment.refuseOwnCardNumber(in: externalCardId, field: "externalCardId", own: request.primaryAccountNumber)
        }
        if let existing, !samePAN {
            // A PAN another card has is refused before any token is touched: the store would
            // refuse the card after its tokens had been deactivated for nothing. (Two requests
            // racing for one PAN are still told apart by the store's own check.)
            if let other = try await environment.store.card(panLookupHash: lookupHash), !other.externalCardId.isSameIdentifier(as: externalCardId) {
                throw TMPError.conflict("duplicate_pan", "card \(Redaction.identifier(other.externalCardId)) already has this primaryAccountNumber")
            }
            // The old PAN's tokens must die at the token service before TMP forgets them; the
            // commands run concurrently, like a status change's.
            // Only the replaced PAN's tokens: one made for a PAN a concurrent replacement stored
            // meanwhile is not this request's to end.
            let live = try await environment.store.tokens(externalCardId: externalCardId).filter {
                $0.status != .deactivated && $0.panUniqueReference == existing.panUniqueReference
            }
            let tokenService = environment.tokenService
            let results = await live.concurrentMap(maximumConcurrency: Self.maximumConcurrentCommands) { token -> Result<Bool, any Error> in
                do {
                    return try await environment.inTokenOrder(token.tokenUniqueReference) { () async throws -> Result<Bool, any Error> in
                        do {
                            try await tokenService.deactivate(token)
                        } catch {
                            environment.logger.warning("token service command failed", metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "target": "DEACTIVATED", "error": "\(Redaction.cardNumbers(in: "\(error)"))"])
                            return .success(false)
                        }
                        let audit = AuditEntry(at: now, actor: "issuer", action: "token.deactivated", subject: "token:\(token.tokenUniqueReference)", detail: "card PAN replaced")
                        do {
                            _ = try await environment.recordCommandOutcome(reference: token.tokenUniqueReference, audit: audit) { current, _ in
                                current.status == .deactivated ? .unchanged : .set(.deactivated, suspendedBy: nil)
                            }
                            return .success(true)
                        } catch {
                            return .failure(error)
                        }
                    }
                } catch {
                    return .failure(error)
                }
            }
            let failed = try results.filter { try !$0.get() }.count
            if failed > 0 {
                throw TMPError(
                    .unavailable, "token_service_unavailable",
                    "replacing the PAN of card \(Redaction.identifier(existing.externalCardId)) needs the token service to deactivate its \(live.count) live tokens, and \(failed) did not answer; those that did are deactivated, the card was not replaced, try again"
                )
            }
        }
        let card = CardRecord(
            externalCardId: externalCardId,
            userId: request.userId,
            encryptedPAN: try environment.vault.encrypt(request.primaryAccountNumber, cardID: externalCardId).serialized,
            panLookupHash: lookupHash,
            panLast4: request.primaryAccountNumber.last4,
            panUniqueReference: samePAN ? existing!.panUniqueReference : "PUR" + environment.makeIdentifier(),
            expiration: request.expiration,
            cardholderName: request.cardholderName,
            network: request.network,
            productTitle: request.productTitle,
            artId: request.artId,
            status: existing?.status ?? .active,
            createdAt: existing?.createdAt ?? now,
            updatedAt: now
        )
        // Made from the card as stored when the write holds it, not from `existing`: a PUT racing
        // this one may have created the card or changed its PAN or owner since.
        let (redactedPAN, newOwner) = (request.primaryAccountNumber.redacted, request.userId)
        let audit: @Sendable (CardRecord?) -> AuditEntry = { previous in
            guard let previous else {
                return AuditEntry(at: now, actor: "issuer", action: "card.create", subject: "card:\(externalCardId)", detail: "pan \(redactedPAN)")
            }
            var detail = constantTimeEquals(previous.panLookupHash, lookupHash) ? "pan \(redactedPAN)" : "pan changed to \(redactedPAN)"
            if !previous.userId.isSameIdentifier(as: newOwner) {
                // The card's tokens follow it to the new owner (an issuer renumbering its users
                // must not end every token); the trail says who had it.
                detail += "; owner changed from \(previous.userId) to \(newOwner)"
            }
            return AuditEntry(at: now, actor: "issuer", action: "card.replace", subject: "card:\(externalCardId)", detail: detail)
        }
        var stored = card
        let previous: CardRecord?
        do {
            previous = try await environment.store.putCard(card, audit: audit)
        } catch StoreError.duplicatePAN(let other) {
            throw TMPError.conflict("duplicate_pan", "card \(Redaction.identifier(other)) already has this primaryAccountNumber")
        } catch StoreError.concurrentChange {
            throw TMPError.conflict("card_changed", "card \(Redaction.identifier(externalCardId)) got another primaryAccountNumber while this request was applied; read it and send the request again")
        }
        // As stored: a replacement keeps the status, which may have changed since `existing`
        // was read, and the PAN's reference when the stored card already had this PAN.
        let panChanged = previous.map { !constantTimeEquals($0.panLookupHash, lookupHash) } ?? false
        if let previous {
            stored.status = previous.status
            if !panChanged { stored.panUniqueReference = previous.panUniqueReference }
        }
        if panChanged {
            // Tokens of the old PAN the token service made while the known ones were being
            // deactivated (a tokenization approved before the PAN changed) are live at odds
            // with the card from its commit: deactivated now, or by the realignment if the
            // token service does not confirm.
            let stragglers = try await environment.store.tokens(externalCardId: externalCardId).compactMap { command(for: $0, card: stored) }
            _ = await stragglers.concurrentMap(maximumConcurrency: Self.maximumConcurrentCommands) { [self, stored] command in
                await applyInLine(command, card: stored, actor: "issuer") { command, card in
                    command.token.isOfAReplacedPAN(of: card) ? "card PAN replaced" : Self.why(command, card: card) ?? "card \(card.status.rawValue)"
                }
            }
        }
        return (stored.resource, previous == nil)
    }

    /// `GET cards/{id}`.
    public func card(externalCardId: String) async throws -> CardResource {
        try await existingCard(externalCardId).resource
    }

    /// `GET cards/{id}/tokens`.
    public func tokens(externalCardId: String) async throws -> TokenListResponse {
        let card = try await existingCard(externalCardId)
        return TokenListResponse(tokens: try await environment.store.tokens(externalCardId: card.externalCardId).map(\.resource))
    }

    /// The most token service commands one card status change runs at once.
    static let maximumConcurrentCommands = 8

    /// `PATCH cards/{id}`: BLOCKED suspends the active tokens, ACTIVE resumes those the block
    /// suspended, CLOSED deactivates all. A CLOSED card stays closed, even when requests to
    /// close and to reopen it race: the store decides on the card as stored.
    ///
    /// The token commands run concurrently (at most ``maximumConcurrentCommands`` at a time),
    /// each within the connector's time limit, so the change takes one time limit per
    /// ``maximumConcurrentCommands`` tokens at most when the token service does not answer,
    /// plus any wait for a token's earlier commands; the outcomes keep the order of the card's
    /// tokens.
    public func setStatus(externalCardId: String, status: CardStatus) async throws -> StatusChange {
        try InputRules.identifier(externalCardId, field: "externalCardId")
        let now = environment.now()
        let update = try await environment.store.setCardStatus(externalCardId: externalCardId, status: status, at: now) { previous in
            AuditEntry(at: now, actor: "issuer", action: "card.status", subject: "card:\(externalCardId)", detail: "\(previous.rawValue) -> \(status.rawValue)")
        }
        let card: CardRecord
        switch update {
        case .updated(_, let updated): card = updated
        case .refusedClosed: throw TMPError.conflict("card_closed", "card \(Redaction.identifier(externalCardId)) is CLOSED; a closed card cannot change status")
        case .notFound: throw TMPError.notFound("card_not_found", "no card \(Redaction.identifier(externalCardId))")
        }
        // What the tokens need follows from the status this change committed.
        let commands = try await environment.store.tokens(externalCardId: externalCardId).compactMap { command(for: $0, card: card) }
        let outcomes = await commands.concurrentMap(maximumConcurrency: Self.maximumConcurrentCommands) { [self] command in
            if let outcome = await applyInLine(command, card: card, actor: "issuer", reason: { command, card in Self.why(command, card: card) ?? "card \(card.status.rawValue)" }) {
                return outcome
            }
            return await nothingOwed(command.token)
        }
        return StatusChange(card: card.resource, tokens: outcomes)
    }

    /// Sends again the command its card's status asks of each token that has been at odds with
    /// it since `cutoff` or earlier (at most `limit` tokens, the longest at odds first): a
    /// command a status change or a correction could not have confirmed (the token service
    /// failed, or the process stopped before sending it).
    ///
    /// Each token is decided on as stored now, and recorded as ``setStatus(externalCardId:status:)``
    /// records it, with `tmp` as the actor. A token the token service again does not confirm
    /// restarts its clock, so it is tried again once `cutoff` has moved past that time.
    /// The tokens are claimed (``TMPStore/claimTokensAtOddsWithTheirCard(since:limit:at:)``)
    /// a batch of ``maximumConcurrentCommands`` at a time, just before their commands are
    /// sent: a round running at the same time, here or on another instance, takes other
    /// tokens, and a long round (a slow token service, hundreds of tokens) never holds a claim
    /// on a token it has not reached yet, so the grace protects each batch and not only the
    /// start of the round. ``TokenRealigner`` calls this periodically.
    ///
    /// `continuing` is asked before each batch is claimed; once it answers false the round
    /// ends after the batch in flight (the realigner's stops at a graceful shutdown, so that a
    /// round against an unresponsive token service does not hold the process for minutes;
    /// the tokens it did not reach are still at odds, and the next round, here or on another
    /// instance, takes them).
    public func realignTokens(atOddsSince cutoff: Date, limit: Int, while continuing: @Sendable () -> Bool = { true }) async throws -> [StatusChange.TokenOutcome] {
        let store = environment.store
        var outcomes: [StatusChange.TokenOutcome] = []
        var taken = 0
        while taken < limit, continuing() {
            let batch = try await store.claimTokensAtOddsWithTheirCard(since: cutoff, limit: min(Self.maximumConcurrentCommands, limit - taken), at: environment.now())
            if batch.isEmpty { break }
            taken += batch.count
            outcomes += await batch.concurrentMap(maximumConcurrency: Self.maximumConcurrentCommands) { [self] token -> StatusChange.TokenOutcome? in
                guard let card = try? await store.card(externalCardId: token.externalCardId), let command = command(for: token, card: card) else {
                    return nil
                }
                // Owing nothing by its turn (an earlier command settled it): not realigned.
                guard let outcome = await applyInLine(command, card: card, actor: "tmp", reason: { command, card in
                    let why = Self.why(command, card: card) ?? (command.token.isOfAReplacedPAN(of: card) ? "card PAN replaced" : "card \(card.status.rawValue)")
                    return "\(why); sent again, the token had been at odds with its card"
                }) else { return nil }
                if outcome.result == "FAILED" {
                    try? await store.restartAtOddsClock(reference: token.tokenUniqueReference, at: environment.now())
                }
                return outcome
            }.compactMap { $0 }
        }
        return outcomes
    }

    /// The outcome of a token that owed its card nothing by its command's turn: `UNCHANGED`, as
    /// the store holds it (as the change read it, if it cannot be read).
    private func nothingOwed(_ token: TokenRecord) async -> StatusChange.TokenOutcome {
        let now = (try? await environment.store.token(reference: token.tokenUniqueReference)) ?? token
        return .init(tokenUniqueReference: token.tokenUniqueReference, status: now.status, result: "UNCHANGED")
    }

    /// The audit reason of a command that sends a pending one again; nil for any other.
    private static func why(_ command: TokenCommand, card: CardRecord) -> String? {
        command.settlesPending.map { "a \($0 == .suspend ? "suspension" : "deactivation") the token service had not confirmed" }
    }

    /// One token service command for a token: one its card's status asks, or customer service's.
    private struct TokenCommand: Sendable {
        var token: TokenRecord
        var target: TokenStatus
        var source: SuspensionSource?
        var result: String
        var call: @Sendable (TokenRecord) async throws -> Void
        /// For a resume: the only suspension it lifts (nil: any). A card's unblocking lifts
        /// only the block's; one made meanwhile for another reason (customer service, while
        /// the resume was with the token service) stays.
        var lifts: SuspensionSource? = nil
        /// For customer service's resume: the token as it decided on it. A suspension recorded
        /// since (its echo, then a suspension of the token service's own, say: the same source
        /// as the one it lifts) is not lifted either.
        var liftsAsSeen: TokenRecord? = nil
        /// Customer service's own command.
        var byCustomerService = false
        /// The token's pending command this one sends again (``TokenRecord/pendingCommand``);
        /// confirmed, it is settled.
        var settlesPending: PendingTokenCommand? = nil
    }

    /// Why a resume is not recorded when the token was suspended for another reason meanwhile.
    static let suspendedOtherwiseMeanwhile = "the token was suspended for another reason meanwhile"

    /// Why a pending suspension sent again is not recorded when the token was resumed meanwhile.
    static let resumedWhileSuspensionWasResent = "the token was resumed while its pending suspension was sent again"

    /// The command owed to `token`, if any: deactivate a live token made for a PAN the card no
    /// longer has, every live token of a closed card, or a token whose deactivation is pending;
    /// suspend an active token of a blocked card; resume a token the block suspended once the
    /// card is active; otherwise send a pending suspension again.
    private func command(for token: TokenRecord, card: CardRecord) -> TokenCommand? {
        guard token.isAtOdds(with: card) else { return nil }
        let tokenService = environment.tokenService
        if token.isOfAReplacedPAN(of: card) || card.status == .closed || token.pendingCommand == .deactivate {
            let settles: PendingTokenCommand? = token.cardAsksACommand(card) ? nil : .deactivate
            return TokenCommand(token: token, target: .deactivated, source: nil, result: "DEACTIVATED", call: tokenService.deactivate, settlesPending: settles)
        }
        if token.cardAsksACommand(card) {
            return switch card.status {
            case .blocked: TokenCommand(token: token, target: .suspended, source: .cardBlocked, result: "SUSPENDED", call: tokenService.suspend)
            case .active: TokenCommand(token: token, target: .active, source: nil, result: "RESUMED", call: tokenService.resume, lifts: .cardBlocked)
            case .closed: nil
            }
        }
        guard token.pendingCommand == .suspend, token.owesItsPendingCommand else { return nil }
        return TokenCommand(token: token, target: .suspended, source: nil, result: "SUSPENDED", call: tokenService.suspend, settlesPending: .suspend)
    }

    /// `POST tokens/{ref}/{action}`: a customer-service command for one token.
    ///
    /// The command is decided and sent in the token's place in line (``TokenCommandOrder``):
    /// once the token's earlier commands are recorded, on the token as they left it.
    public func perform(_ action: TokenAction, tokenUniqueReference: String) async throws -> TokenResource {
        try InputRules.identifier(tokenUniqueReference, field: "tokenUniqueReference")
        guard let found = try await environment.store.token(reference: tokenUniqueReference) else {
            throw TMPError.notFound("token_not_found", "no token \(Redaction.identifier(tokenUniqueReference))")
        }
        return try await environment.inTokenOrder(found.tokenUniqueReference) {
            guard let token = try await environment.store.token(reference: found.tokenUniqueReference) else {
                throw TMPError.notFound("token_not_found", "no token \(Redaction.identifier(tokenUniqueReference))")
            }
            return try await performInLine(action, on: token)
        }
    }

    /// ``perform(_:tokenUniqueReference:)`` in the token's place in line.
    private func performInLine(_ action: TokenAction, on token: TokenRecord) async throws -> TokenResource {
        let tokenUniqueReference = token.tokenUniqueReference
        let target: TokenStatus
        let call: @Sendable (TokenRecord) async throws -> Void
        switch action {
        case .suspend:
            target = .suspended
            call = environment.tokenService.suspend
        case .resume:
            target = .active
            call = environment.tokenService.resume
        case .deactivate:
            target = .deactivated
            call = environment.tokenService.deactivate
        }
        // A suspension the block or the token service made becomes customer service's once the
        // token service confirms it: TMP's SUSPENDED may not be what the token service holds (a
        // resumption whose answer was lost, or one the token service made on its own, whose
        // event has not come), and recording customer service's suspension without asking would
        // leave the token paying. A command for the state the token already has is done, not an
        // error (``TokenServiceConnector``), so the suspension is sent below in every case; it
        // also settles a suspension owed.
        if action == .suspend, token.status != .deactivated {
            // A token on its way out (closed card, replaced card number, previous owner's) is
            // being deactivated: a suspension would be sent and recorded for nothing.
            let card = try await existingCard(token.externalCardId)
            if card.status == .closed || token.isOfAReplacedPAN(of: card) || token.pendingCommand == .deactivate {
                let why = card.status == .closed ? "card \(Redaction.identifier(card.externalCardId)) is CLOSED" : token.isOfAReplacedPAN(of: card) ? "it was made for a card number card \(Redaction.identifier(card.externalCardId)) no longer has" : "it was activated by card \(Redaction.identifier(card.externalCardId))'s previous owner"
                throw TMPError.conflict("deactivation_pending", "token \(Redaction.identifier(token.tokenUniqueReference)) is being deactivated: \(why); deactivate it rather than suspend it")
            }
        }
        let takingOver = action == .suspend && token.status == .suspended && token.suspendedBy != .customerService
        // Customer service's own suspension the token service never confirmed (pending): sent
        // again now rather than refused, and settled once confirmed, as the realignment would.
        let resendingPending = action == .suspend && token.status == .suspended && !takingOver && token.pendingCommand == .suspend
        guard Self.allows(action, token.status) || takingOver || resendingPending else { throw illegal(token, to: target) }
        if action == .resume {
            let card = try await existingCard(token.externalCardId)
            guard card.status == .active else {
                let advice = card.status == .closed ? "a closed card's tokens are deactivated, never resumed" : "unblock the card to resume its tokens"
                throw TMPError.conflict("card_not_active", "card \(Redaction.identifier(card.externalCardId)) is \(card.status.rawValue); \(advice)")
            }
            guard !token.isOfAReplacedPAN(of: card) else {
                throw TMPError.conflict("pan_replaced", "token \(Redaction.identifier(token.tokenUniqueReference)) was made for a card number card \(Redaction.identifier(card.externalCardId)) no longer has; it is deactivated, never resumed")
            }
            guard token.pendingCommand != .deactivate else {
                throw TMPError.conflict("deactivation_pending", "token \(Redaction.identifier(token.tokenUniqueReference)) was activated by card \(Redaction.identifier(card.externalCardId))'s previous owner and is being deactivated; it is never resumed")
            }
        }
        // A database failure after the token service confirmed is the database's to report.
        // A resume lifts the suspension customer service saw: one the token service reports
        // while the resume is with it (its echo, then a suspension of its own) stays, and is
        // asserted there again, rather than TMP recording ACTIVE a token it holds suspended.
        let lifts = action == .resume ? token.suspendedBy : nil
        let command = TokenCommand(
            token: token, target: target, source: target == .suspended ? .customerService : nil, result: target.rawValue, call: call, lifts: lifts,
            liftsAsSeen: action == .resume ? token : nil, byCustomerService: true, settlesPending: resendingPending ? .suspend : nil)
        let reason = takingOver
            ? "customer service suspend of a token suspended by \(token.suspendedBy?.rawValue ?? "an unknown source"): kept suspended until customer service resumes it"
            : resendingPending ? "customer service suspend, sent again: the token service had not confirmed the suspension" : "customer service \(action.rawValue)"
        let outcome = try await applyRecording(command, actor: "issuer", reason: reason)
        if action == .resume, outcome.result == "UNCHANGED" || outcome.result == "FAILED",
            let now = try await environment.store.token(reference: tokenUniqueReference)
        {
            // The resumption did not stand. Said from what TMP records now, never as done.
            if now.status == .deactivated { throw illegal(now, to: target) }
            let card = try await environment.store.card(externalCardId: token.externalCardId)
            if let card, card.status != .active {
                let recorded = card.status == .blocked && now.status == .active
                    ? "the token service did not confirm undoing the resumption: the token is recorded ACTIVE as it holds it, and will be suspended for the block"
                    : "the token is \(now.status.rawValue)"
                let advice = card.status != .blocked ? "" : now.suspendedBy == .customerService ? "; unblock the card, then resume the token" : "; unblock the card to resume its tokens"
                throw TMPError.conflict("card_not_active", "card \(Redaction.identifier(token.externalCardId)) became \(card.status.rawValue) while the token was being resumed; \(recorded)\(advice)")
            }
            if let card, now.isOfAReplacedPAN(of: card) {
                // The card was given a new number while the resumption was with the token
                // service: the token is of the old one, and is deactivated, not resumed.
                throw TMPError.conflict("pan_replaced", "card \(Redaction.identifier(card.externalCardId)) was given a new card number while token \(Redaction.identifier(now.tokenUniqueReference)) was being resumed; the token was made for the old one, and is deactivated, never resumed")
            }
            if outcome.result == "UNCHANGED", now.status != .active {
                // Blocked and unblocked again meanwhile: the resumption was undone.
                throw TMPError.conflict("resume_undone", "card \(Redaction.identifier(token.externalCardId)) was blocked while the token was being resumed, and the resumption was undone; the card is ACTIVE again and the token \(now.status.rawValue): resume it again")
            }
        }
        if outcome.result == "FAILED" {
            // Refused rather than unconfirmed when the token changed meanwhile so that the
            // command no longer applies (closing the card deactivated it): that is a conflict,
            // and trying again would not help.
            if let now = try await environment.store.token(reference: tokenUniqueReference), !Self.allows(action, now.status),
                !(takingOver && now.status == .suspended)
            {
                throw illegal(now, to: target)
            }
            throw TMPError(.unavailable, "token_service_unavailable", "the token service did not confirm \(action.rawValue); the token is \(outcome.status.rawValue), try again")
        }
        guard let after = try await environment.store.token(reference: tokenUniqueReference) else {
            throw TMPError.notFound("token_not_found", "no token \(Redaction.identifier(tokenUniqueReference))")
        }
        return after.resource
    }

    /// `PUT card-art/{id}`: validates against Apple's rules and stores.
    public func putCardArt(artId: String, data: Data, contentType: String?) async throws -> CardArtInfo {
        try InputRules.newIdentifier(artId, field: "artId")
        try await environment.refuseCardNumber(in: artId, field: "artId", own: nil)
        let info: CardArtInfo
        // Checked off the event loop, and the verdict kept: the art's first GET finds it.
        switch await environment.cardArtVerdicts.verdict(on: data, declaredContentType: contentType) {
        case .success(let valid): info = valid
        case .failure(let error): throw TMPError.badRequest("invalid_card_art", "\(error.code.rawValue): \(error.message)")
        }
        if contentType != info.format.mediaType {
            environment.cardArtVerdicts.keep(info, on: data, declaredContentType: info.format.mediaType)
        }
        let now = environment.now()
        try await environment.store.putCardArt(
            CardArtRecord(artId: artId, contentType: info.format.mediaType, data: data, updatedAt: now),
            audit: AuditEntry(at: now, actor: "issuer", action: "card_art.put", subject: "card_art:\(artId)", detail: "\(info.format.rawValue), \(data.count) bytes")
        )
        environment.cardArtCache.forget(id: artId)
        return info
    }

    private func existingCard(_ externalCardId: String) async throws -> CardRecord {
        try InputRules.identifier(externalCardId, field: "externalCardId")
        guard let card = try await environment.store.card(externalCardId: externalCardId) else {
            throw TMPError.notFound("card_not_found", "no card \(Redaction.identifier(externalCardId))")
        }
        return card
    }

    /// Whether a customer-service `action` applies to a token in `status`.
    private static func allows(_ action: TokenAction, _ status: TokenStatus) -> Bool {
        switch action {
        case .suspend: status == .active
        case .resume: status == .suspended
        case .deactivate: status != .deactivated
        }
    }

    private func illegal(_ token: TokenRecord, to target: TokenStatus) -> TMPError {
        TMPError.conflict("illegal_token_transition", "token \(Redaction.identifier(token.tokenUniqueReference)) is \(token.status.rawValue) and cannot become \(target.rawValue)")
    }

    /// Asks the token service, then records the change; a token service failure leaves the token as it was.
    ///
    /// A database failure while recording a confirmed command is logged and reported as
    /// `FAILED`: TMP's record then lags the token service, until the token service's event of
    /// the change (or, for a card's status, the realignment) brings it up to date.
    private func apply(_ command: TokenCommand, actor: String, reason: String) async -> StatusChange.TokenOutcome {
        do {
            return try await applyRecording(command, actor: actor, reason: reason)
        } catch {
            return .init(tokenUniqueReference: command.token.tokenUniqueReference, status: command.token.status, result: "FAILED")
        }
    }

    /// ``apply(_:actor:reason:)``, but a database failure while recording a confirmed command
    /// is thrown (after it is logged), so a caller answering for this one token says what
    /// failed: the database, not the token service.
    private func applyRecording(_ command: TokenCommand, actor: String, reason: String) async throws -> StatusChange.TokenOutcome {
        try await environment.inTokenOrder(command.token.tokenUniqueReference) {
            try await sendAndRecord(command, actor: actor, reason: reason)
        }
    }

    /// The command its card's status asks of `command`'s token, decided again in the token's
    /// place in line (``TokenCommandOrder``) on the token and card as they are then, and
    /// applied: an earlier command for the token (customer service's, another status change's)
    /// may have made it unnecessary, or another one, while this one waited. `reason` gives
    /// the audit reason of the command decided, with the card it was decided on (`card`, when
    /// the token and card cannot be read again).
    ///
    /// - Returns: The outcome, or nil when the token owes its card nothing any more.
    private func applyInLine(_ command: TokenCommand, card: CardRecord, actor: String, reason: @escaping @Sendable (TokenCommand, CardRecord) -> String) async -> StatusChange.TokenOutcome? {
        let reference = command.token.tokenUniqueReference
        do {
            return try await environment.inTokenOrder(reference) { () async -> StatusChange.TokenOutcome? in
                let current: (TokenRecord, CardRecord)?
                do {
                    if let token = try await environment.store.token(reference: reference), let card = try await environment.store.card(externalCardId: token.externalCardId) {
                        current = (token, card)
                    } else {
                        current = nil
                    }
                } catch {
                    // Sent as decided before: the record checks the card's status again, and a
                    // command not sent now would wait for a realignment that needs the database too.
                    environment.logger.warning(
                        "could not read a token again before its command; sending the command decided before",
                        metadata: ["token": "\(Redaction.prefix(reference))", "error": "\(DatabaseUnavailable.reason(error))"]
                    )
                    return await apply(command, actor: actor, reason: reason(command, card))
                }
                // Tokens and cards are never deleted; should one be gone, so is the command.
                guard let (token, card) = current, let decided = self.command(for: token, card: card) else { return nil }
                return await apply(decided, actor: actor, reason: reason(decided, card))
            }
        } catch {
            environment.logger.warning("token service command not sent", metadata: ["token": "\(Redaction.prefix(reference))", "error": "\(Redaction.cardNumbers(in: "\(error)"))"])
            return .init(tokenUniqueReference: reference, status: command.token.status, result: "FAILED")
        }
    }

    /// ``applyRecording(_:actor:reason:)`` in the token's place in line.
    private func sendAndRecord(_ command: TokenCommand, actor: String, reason: String) async throws -> StatusChange.TokenOutcome {
        let (target, source, result, call) = (command.target, command.source, command.result, command.call)
        // A suspension for the card's block is noted first: should its outcome be lost (a
        // time-out, a crash) and the card be unblocked before the token service's echo, the
        // echo is still taken as the block's, and the realignment resumes the token. Before
        // any other suspension, such a note is cleared.
        var token = command.token
        var noted: EventTime?
        if target == .suspended { (token, noted) = try await environment.prepareSuspension(of: token, forTheBlock: source == .cardBlocked) }
        do {
            try await call(token)
        } catch {
            // The note cleared before another suspension than the block's, if any, goes back
            // should that suspension never have left.
            let cleared = target == .suspended && source != .cardBlocked ? command.token.blockSuspensionsSent : nil
            await environment.withdrawSuspensionNote(of: token.tokenUniqueReference, sentAt: noted, before: command.token.blockSuspensionsSent, cleared: cleared, status: command.token.status, after: error)
            environment.logger.warning("token service command failed", metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "target": "\(target.rawValue)", "error": "\(Redaction.cardNumbers(in: "\(error)"))"])
            return .init(tokenUniqueReference: token.tokenUniqueReference, status: token.status, result: "FAILED")
        }
        let audit = AuditEntry(at: environment.now(), actor: actor, action: "token.\(target.rawValue.lowercased())", subject: "token:\(token.tokenUniqueReference)", detail: reason)
        let outcome: TokenUpdateResult
        do {
            outcome = try await environment.recordCommandOutcome(reference: token.tokenUniqueReference, audit: audit) { current, card in
                // A pending suspension sent again changes nothing but that: TMP recorded the token
                // suspended all along. Settled only while still pending (a change of the token's
                // status meanwhile settled it).
                if command.settlesPending == .suspend {
                    switch current.status {
                    case .suspended: return current.pendingCommand == .suspend ? .setPending(nil) : .unchanged
                    case .deactivated: return .reject("token is DEACTIVATED")
                    // Resumed meanwhile (customer service): the suspension just confirmed would
                    // leave the token service holding what TMP no longer records.
                    case .active, .inactive: return .reject(Self.resumedWhileSuspensionWasResent)
                    }
                }
                // A change made for a card status applies only while the card still has it: the
                // card may have changed since the command started.
                let cardStatus = card?.status
                if target == .active, cardStatus != .active { return .reject("card is \(cardStatus?.rawValue ?? "gone")") }
                if target == .active, let card, current.isOfAReplacedPAN(of: card) { return .reject("the card's PAN was replaced") }
                if source == .cardBlocked, cardStatus != .blocked { return .reject("card is \(cardStatus?.rawValue ?? "gone")") }
                if target == .active, let lifts = command.lifts, current.status == .suspended, current.suspendedBy != lifts {
                    return .reject(Self.suspendedOtherwiseMeanwhile)
                }
                if target == .active, let seen = command.liftsAsSeen, current.status == .suspended,
                    current.updatedAt != seen.updatedAt || current.lastEventAt != seen.lastEventAt
                {
                    return .reject(Self.suspendedOtherwiseMeanwhile)
                }
                // Already in the target state means the token service's echo of this very command
                // overtook TMP (events are asynchronous), or a concurrent twin got there first. TMP's
                // own reason wins over the echo's TOKEN_SERVICE: the echo cannot know why the token
                // was suspended, and unblocking a card resumes only the tokens the block suspended.
                // It never replaces customer service's: customer service may have suspended the
                // token while this command was with the token service, and only customer service
                // lifts that. Nothing else changes, so nothing is written or audited twice.
                if current.status == target {
                    guard let source, current.suspendedBy != source, current.suspendedBy != .customerService else { return .unchanged }
                    return .set(target, suspendedBy: source)
                }
                if current.status.canTransition(to: target) {
                    return .set(target, suspendedBy: source)
                }
                return .reject("token is \(current.status.rawValue)")
            }
        } catch {
            environment.logger.error(
                "the token service confirmed a command but the database could not record it; the token service's event (or, for a card's status, the realignment) brings the token up to date",
                metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "target": "\(target.rawValue)", "error": "\(DatabaseUnavailable.reason(error))"]
            )
            throw error
        }
        let verb = switch target {
        case .suspended: "suspend"
        case .deactivated: "deactivate"
        case .active, .inactive: "resume"
        }
        switch outcome {
        case .updated(_, let after): return .init(tokenUniqueReference: token.tokenUniqueReference, status: after.status, result: result)
        case .unchanged(let current):
            // Confirmed, and already recorded with this command's reason (the token service's
            // echo, or a concurrent twin, got there first): the command did what it says.
            // Otherwise (customer service's suspension kept) it changed nothing.
            let done = current.status == target && (source == nil || current.suspendedBy == source)
            // The token service holds what TMP records: no suspension for the block is still
            // without its outcome.
            if done { await environment.clearSuspensionNoteAfterConfirmed(current) }
            if !done {
                await environment.auditUnrecorded(verb, token: token.tokenUniqueReference, actor: actor, why: "the token is \(current.status.rawValue)\(current.suspendedBy.map { " (suspended by \($0.rawValue))" } ?? "")")
            } else if command.byCustomerService {
                // The change is in the token's trail under whoever recorded it (the token
                // service, for its event); customer service's request must be there too. (A
                // card's change is in the card's trail.)
                await environment.auditUnrecorded(verb, token: token.tokenUniqueReference, actor: actor, why: "recorded already (the token service's event or a concurrent command got there first)")
            }
            return .init(tokenUniqueReference: token.tokenUniqueReference, status: current.status, result: done ? result : "UNCHANGED")
        case .rejected(let current, let message):
            await environment.auditUnrecorded(verb, token: token.tokenUniqueReference, actor: actor, why: message)
            if message == Self.resumedWhileSuspensionWasResent {
                // TMP records the token active (customer service resumed it while the pending
                // suspension was with the token service, and the token service may have run the
                // two in either order): resumed there again, so it holds what TMP records. Not
                // while the card is no longer active: TMP's ACTIVE record is then at odds with it,
                // and the suspension the card asks for comes from its change or the realignment.
                // A card that cannot be read counts as not active: no resume is sent blind. Said
                // as a failure: TMP records ACTIVE what the token service may hold suspended.
                let card: CardRecord?
                do {
                    card = try await environment.store.card(externalCardId: current.externalCardId)
                } catch {
                    environment.logger.error(
                        "could not read the card to decide on resuming a token again after its pending suspension was sent while customer service resumed it; the token service may hold it suspended: resume it again",
                        metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "error": "\(DatabaseUnavailable.reason(error))"]
                    )
                    return .init(tokenUniqueReference: token.tokenUniqueReference, status: current.status, result: "FAILED")
                }
                if card.map({ $0.status != .active || current.isOfAReplacedPAN(of: $0) }) ?? true {
                    return .init(tokenUniqueReference: token.tokenUniqueReference, status: current.status, result: "UNCHANGED")
                }
                do {
                    try await environment.tokenService.resume(current)
                    // TMP's record does not change, but a command was carried out: the trail says so.
                    let resent = AuditEntry(at: environment.now(), actor: actor, action: "token.active", subject: "token:\(token.tokenUniqueReference)", detail: "resume sent again: customer service resumed the token while its pending suspension was sent again")
                    try? await environment.recordCommandAudit(resent)
                    return .init(tokenUniqueReference: token.tokenUniqueReference, status: current.status, result: "UNCHANGED")
                } catch {
                    environment.logger.error(
                        "token service did not confirm resuming a token again after a pending suspension was sent while customer service resumed it; it may hold the token suspended",
                        metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "error": "\(Redaction.cardNumbers(in: "\(error)"))"]
                    )
                    return .init(tokenUniqueReference: token.tokenUniqueReference, status: current.status, result: "FAILED")
                }
            }
            if message == Self.suspendedOtherwiseMeanwhile {
                // The token service resumed a token TMP has since recorded suspended for another
                // reason: suspended there again, so it holds what TMP records.
                let reasserted = await TokenCorrection(environment: environment).reassertSuspension(token.tokenUniqueReference, actor: actor)
                if command.byCustomerService {
                    // Customer service is told: its resume did not lift the suspension made meanwhile.
                    let by = current.suspendedBy.map { " by \($0.rawValue)" } ?? ""
                    let recorded = if case .undone = reasserted { "it is suspended there again and stays SUSPENDED" } else { "suspending it there again was not confirmed; TMP records it SUSPENDED" }
                    throw TMPError.conflict("suspended_meanwhile", "token \(Redaction.identifier(token.tokenUniqueReference)) was suspended\(by) again while it was being resumed; \(recorded): resume it again to lift that suspension")
                }
                switch reasserted {
                case .undone(let after): return .init(tokenUniqueReference: token.tokenUniqueReference, status: after.status, result: "UNCHANGED")
                case .notConfirmed, .nothingToUndo: return .init(tokenUniqueReference: token.tokenUniqueReference, status: current.status, result: "FAILED")
                }
            }
            // A command for a card status the card left meanwhile is undone at the token
            // service; the token ends as it was.
            let held: TokenStatus? = target == .active ? .active : source == .cardBlocked ? .suspended : nil
            if let held {
                let correction = TokenCorrection(environment: environment)
                switch await correction.settle(token.tokenUniqueReference, held: held, actor: actor, undoingCustomerServiceResume: command.byCustomerService && target == .active) {
                case .undone(let after): return .init(tokenUniqueReference: token.tokenUniqueReference, status: after.status, result: "UNCHANGED")
                case .notConfirmed(let after): return .init(tokenUniqueReference: token.tokenUniqueReference, status: after.status, result: "FAILED")
                case .nothingToUndo: break
                }
            }
            return .init(tokenUniqueReference: token.tokenUniqueReference, status: current.status, result: "FAILED")
        case .notFound: return .init(tokenUniqueReference: token.tokenUniqueReference, status: token.status, result: "FAILED")
        }
    }
}
