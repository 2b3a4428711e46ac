import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// The token service provider's API: tokenization decisions, token events, activation keys.
public struct TSPService: Sendable {
    /// Shared dependencies.
    public let environment: PlatformEnvironment

    /// Creates the service.
    public init(environment: PlatformEnvironment) {
        self.environment = environment
    }

    /// `tokenization-decisions`: finds the card by keyed hash and decides green, yellow or red.
    public func decide(_ request: TokenizationDecisionRequest) async throws -> TokenizationDecisionResponse {
        try InputRules.identifier(request.requestId, field: "requestId")
        // Stored and logged in clear: no card number in it, the request's own least of all.
        try await environment.refuseCardNumber(in: request.requestId, field: "requestId", own: request.primaryAccountNumber)
        let now = environment.now()
        func record(_ response: TokenizationDecisionResponse) -> TokenizationDecisionRecord {
            TokenizationDecisionRecord(requestId: request.requestId, panUniqueReference: response.panUniqueReference, deviceType: request.deviceType, decision: response.decision, reason: response.reason, decidedAt: now)
        }
        func answer(_ response: TokenizationDecisionResponse) -> TokenizationDecisionResponse {
            environment.logger.info("tokenization decision", metadata: ["request": "\(Redaction.identifier(request.requestId))", "decision": "\(response.decision.rawValue)", "reason": "\(response.reason)"])
            return response
        }
        // A decision on activation data that lets a token be made is recorded only while the
        // card is still as it was decided on; a card changed meanwhile (blocked, closed, given
        // another owner or PAN) is decided on again, as it is now, and a second change in that
        // time declines. (A yellow one without activation data is not checked: the token it
        // lets be made is activated in the app, which checks the card then.)
        for round in 1...2 {
            let decided = try await decision(for: request, now: now)
            let response = decided.response
            if decided.answeredBefore {
                // A retry after the activation data expired: the recorded answer, recorded once.
                environment.logger.info("tokenization decision", metadata: ["request": "\(Redaction.identifier(request.requestId))", "decision": "\(response.decision.rawValue)", "reason": "\(response.reason)", "retry": "true"])
                return response
            }
            // The activation data is used up in the transaction that records the decision.
            switch try await environment.store.recordTokenizationDecision(record(response), consumingActivationData: decided.consuming, decidedOn: decided.card) {
            case .recorded:
                return answer(response)
            case .cardChanged:
                guard round == 2 else { continue }
                let declined = TokenizationDecisionResponse(decision: .declined, panUniqueReference: response.panUniqueReference, reason: Self.cardChangedDuringDecision)
                try await environment.store.recordTokenizationDecision(record(declined))
                return answer(declined)
            case .activationDataUsedBefore:
                if let consuming = decided.consuming,
                    let earlier = try await environment.store.tokenizationDecision(requestId: request.requestId, usingUp: consuming),
                    earlier.panUniqueReference == response.panUniqueReference, earlier.deviceType == request.deviceType
                {
                    // A retry of a request already decided (its answer was lost on the way): the
                    // same answer, not a refusal for the activation data it used itself. The same
                    // request id with activation data another request used up is a replay.
                    return TokenizationDecisionResponse(decision: earlier.decision, panUniqueReference: earlier.panUniqueReference, reason: earlier.reason)
                }
                let replayed = TokenizationDecisionResponse(decision: .declined, panUniqueReference: response.panUniqueReference, reason: "activation_data_replayed")
                try await environment.store.recordTokenizationDecision(record(replayed))
                return answer(replayed)
            }
        }
        // Not reached: the second round returns in every case.
        throw TMPError.internalError
    }

    /// The reason of a decision declined because its card changed twice while it was decided.
    static let cardChangedDuringDecision = "card_changed_during_decision"

    /// How long after its activation data expired a request that used it up may still be
    /// retried for its recorded answer (15 minutes): a token service retries within minutes.
    public static let retryWindowAfterExpiry: TimeInterval = 900

    /// A decision before it is recorded.
    private struct Decided {
        /// The answer.
        var response: TokenizationDecisionResponse
        /// The activation data it uses up when it is recorded.
        var consuming: String?
        /// Whether it is the answer recorded before for this request (a retry after the data
        /// expired), which is not recorded again.
        var answeredBefore = false
        /// The card as decided on, for a decision that lets a token be made.
        var card: DecidedCard?
    }

    /// The decision for `request`.
    private func decision(for request: TokenizationDecisionRequest, now: Date) async throws -> Decided {
        let hash = environment.vault.lookupHash(request.primaryAccountNumber)
        guard let card = try await environment.store.card(panLookupHash: hash) else {
            return Decided(response: TokenizationDecisionResponse(decision: .declined, panUniqueReference: nil, reason: "card_unknown"))
        }
        func declined(_ reason: String) -> Decided {
            Decided(response: TokenizationDecisionResponse(decision: .declined, panUniqueReference: card.panUniqueReference, reason: reason))
        }
        switch card.status {
        case .active: break
        case .blocked: return declined("card_blocked")
        case .closed: return declined("card_closed")
        }
        if card.expiration.isExpired(at: now) { return declined("card_expired") }
        if request.expiration != card.expiration { return declined("expiration_mismatch") }
        guard let activationData = request.activationData else {
            // No proof that the issuer app started this: the owner must activate it in the app.
            return Decided(response: TokenizationDecisionResponse(decision: .requireAdditionalAuthentication, panUniqueReference: card.panUniqueReference, reason: "activation_data_missing"))
        }
        let verifier = environment.activationVerifier
        let verdict = verifier.verify(activationData, panUniqueReference: card.panUniqueReference, now: now)
        let claims: ActivationDataClaims
        let expiredSince: Bool
        if let valid = verdict.claims {
            claims = valid
            expiredSince = false
        } else if verdict.refusal?.code == .expired,
            let issued = verifier.claimsIgnoringTime(activationData, panUniqueReference: card.panUniqueReference),
            now.timeIntervalSince1970 < TimeInterval(issued.exp) + Self.retryWindowAfterExpiry
        {
            // Perhaps the retry of a request that used this data up while it was valid, sent
            // again after it expired (the first answer was lost on the way): checked as any
            // data is below, then answered only from that request's record.
            claims = issued
            expiredSince = true
        } else {
            return declined("activation_data_\(verdict.refusal?.code.rawValue ?? "invalid")")
        }
        // Data TMP issued is recorded with its attempt: the claims must be that attempt's, so
        // data minted anew for a real id (with a key still published) proves nothing.
        guard let attempt = try await environment.store.provisioningAttempt(activationDataId: claims.id), attempt.externalCardId == card.externalCardId,
            constantTimeEquals(attempt.nonceHash, claims.nh), Int64(attempt.expiresAt.timeIntervalSince1970.rounded()) == claims.exp
        else {
            return declined("activation_data_unknown")
        }
        // Issued to the card's owner at the time: a card given to another user since (same PAN,
        // so the same panUniqueReference) must not be tokenized on the previous owner's device.
        guard attempt.userId.isSameIdentifier(as: card.userId) else {
            return declined("activation_data_owner_changed")
        }
        if expiredSince {
            guard let earlier = try await environment.store.tokenizationDecision(requestId: request.requestId, usingUp: claims.id),
                earlier.panUniqueReference == card.panUniqueReference, earlier.deviceType == request.deviceType
            else { return declined("activation_data_expired") }
            return Decided(response: TokenizationDecisionResponse(decision: earlier.decision, panUniqueReference: earlier.panUniqueReference, reason: earlier.reason), answeredBefore: true)
        }
        // Decided on the card as read: recorded only while it still is so.
        let decidedOn = DecidedCard(externalCardId: card.externalCardId, panUniqueReference: card.panUniqueReference, userId: card.userId)
        switch environment.activationPolicy {
        case .immediate:
            return Decided(response: TokenizationDecisionResponse(decision: .approved, panUniqueReference: card.panUniqueReference, reason: "activation_data_valid"), consuming: claims.id, card: decidedOn)
        case .inApp:
            // The cardholder already proved themselves for this card on their other device
            // (its token there is active): the new device's token is active at once.
            let tokens = try await environment.store.tokens(externalCardId: card.externalCardId)
            if tokens.contains(where: {
                $0.status == .active && $0.userId.isSameIdentifier(as: card.userId) && $0.deviceType != request.deviceType && !$0.isOfAReplacedPAN(of: card)
                    // Activated by the card's previous owner, and being ended: no proof of this owner.
                    && $0.pendingCommand != .deactivate
            }) {
                return Decided(response: TokenizationDecisionResponse(decision: .approved, panUniqueReference: card.panUniqueReference, reason: "active_on_other_device"), consuming: claims.id, card: decidedOn)
            }
            return Decided(response: TokenizationDecisionResponse(decision: .requireAdditionalAuthentication, panUniqueReference: card.panUniqueReference, reason: "in_app_activation_required"), consuming: claims.id, card: decidedOn)
        }
    }

    /// How long after a tokenization decision a token's first event is still taken as made by
    /// it, for telling whom the token was made for (an hour): a token service reports a token
    /// within minutes of the decision that let it be made.
    public static let decisionReachForCreation: TimeInterval = 3_600

    /// How far ahead of this server's clock a token event's `occurredAt` may be (5 minutes).
    public static let maximumClockSkew: TimeInterval = 300

    /// The refusal of an event that would make a token (a `CREATED`, or a timed event ahead of
    /// it) for a card TMP does not know, once its eventId is known to be new.
    static let noCardForEvent = "no card has the event's panUniqueReference"

    /// `token-events`: applies a token event once per event id, and, among a token's events
    /// that say when they happened, only those not older than one already applied.
    public func apply(_ event: TokenEventRequest) async throws -> TokenEventResponse {
        try InputRules.identifier(event.eventId, field: "eventId")
        try InputRules.identifier(event.tokenUniqueReference, field: "tokenUniqueReference")
        try InputRules.identifier(event.panUniqueReference, field: "panUniqueReference")
        if let last4 = event.tokenLast4, last4.count != 4 || !last4.allSatisfy(\.isASCIIDigit) {
            throw TMPError.badRequest("invalid_field", "tokenLast4 must be four digits")
        }
        // Both are stored, and shown to the cardholder and the back office, in clear: no card
        // number in them (a token's reference is checked when the token is made).
        try await environment.refuseCardNumber(in: event.eventId, field: "eventId", own: nil)
        // Another event that says when it happened, for a token TMP does not know: its CREATED
        // was overtaken (or lost), and the token is recorded from this event (see
        // `TokenEventRules`). Read first, so the usual event costs no card lookup.
        let overtookCreation: Bool
        if event.event != .created, event.occurredAt != nil {
            overtookCreation = try await environment.store.token(reference: event.tokenUniqueReference) == nil
        } else {
            overtookCreation = false
        }
        if event.event == .created || overtookCreation {
            try await environment.refuseCardNumber(in: event.tokenUniqueReference, field: "tokenUniqueReference", own: nil)
        }
        let now = environment.now()
        // An event from the future would stay the token's newest for ever, and every real event
        // after it would be acknowledged as STALE: a token service whose clock is that far off
        // is told so, and the event is not recorded.
        if let occurredAt = event.occurredAt, occurredAt.date > now.addingTimeInterval(Self.maximumClockSkew) {
            throw TMPError.badRequest(
                "invalid_field",
                "occurredAt \(occurredAt) is more than \(Int(Self.maximumClockSkew / 60)) minutes ahead of this server's clock (\(EventTime(now))); check the token service's clock"
            )
        }
        var newToken: TokenRecord?
        var decidedFor: String?
        // A CREATED event for a card TMP does not know is refused, but only after its eventId
        // is looked at: a repeat of an event already recorded is answered DUPLICATE whatever
        // has happened to the card since.
        var cardUnknown = false
        if event.event == .created || overtookCreation {
            // A token of a PAN its card no longer has (tokenized before the PAN was replaced) is
            // recorded all the same, for the card that had it: it is live at the token service,
            // at odds with its card, and deactivated there below.
            var found = try await environment.store.card(panUniqueReference: event.panUniqueReference)
            if found == nil { found = try await environment.store.card(retiredPanUniqueReference: event.panUniqueReference) }
            if let card = found {
                // The decision that let this token be made: a decline since (a replay, say) made none.
                let decision = try await environment.store.latestTokenizingDecision(panUniqueReference: event.panUniqueReference, deviceType: event.deviceType)
                decidedFor = try await userDecided(by: decision, forATokenMadeAt: now)
                newToken = TokenRecord(
                    tokenUniqueReference: event.tokenUniqueReference,
                    externalCardId: card.externalCardId,
                    panUniqueReference: event.panUniqueReference,
                    userId: card.userId,
                    deviceType: event.deviceType,
                    status: .inactive,
                    authorizationPath: decision?.decision == .approved ? .green : .yellow,
                    suspendedBy: nil,
                    tokenLast4: event.tokenLast4,
                    createdAt: now,
                    updatedAt: now,
                    lastEventAt: event.occurredAt
                )
            } else {
                cardUnknown = true
            }
        }
        let audit = AuditEntry(at: now, actor: "tsp", action: "token.event.\(event.event.rawValue.lowercased())", subject: "token:\(event.tokenUniqueReference)", detail: "event \(event.eventId)")
        let candidate = newToken
        let unknownCard = cardUnknown
        // Made with activation data issued to another user than the card's owner as committed
        // with the token (the card changed hands, same PAN, after the decision — also while
        // this event was on its way in): the token is on the previous owner's device, so it is
        // owed its deactivation, marked in the event's own transaction and sent below with the
        // corrections.
        let owed = decidedFor.map { madeFor in
            OwedDeactivation(
                madeFor: madeFor,
                audit: AuditEntry(
                    at: now, actor: "tmp", action: "token.pending_command", subject: "token:\(event.tokenUniqueReference)",
                    detail: "deactivation owed: made with activation data issued to the card's previous owner"
                )
            )
        }
        let result = try await environment.store.applyTokenEvent(eventId: event.eventId, event: event.event, tokenReference: event.tokenUniqueReference, occurredAt: event.occurredAt, audit: audit) { current, card in
            if unknownCard, current == nil { return .reject(Self.noCardForEvent) }
            let effect = TokenEventRules.effect(of: event, on: current, cardStatus: card?.status, newToken: candidate, receivedAt: now)
            if case .insert(let token, nil) = effect { return .insert(token, owed: owed) }
            return effect
        }
        switch result {
        case .applied(let token):
            // A token the card forbids (created or activated for a card closed or blocked since
            // its tokenization was approved, or for a PAN the card no longer has; a late echo
            // resuming a blocked card's token) is corrected at the token service before TMP answers.
            return TokenEventResponse(eventId: event.eventId, result: "APPLIED", tokenStatus: await correctIfOwed(token).status)
        case .stale(let token):
            // (Its tokenLast4, when the token had none, is kept: audited, not logged.)
            environment.logger.notice("stale token event acknowledged, not applied", metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "event": "\(event.event.rawValue)"])
            return TokenEventResponse(eventId: event.eventId, result: "STALE", tokenStatus: token.status)
        case .duplicate(let token):
            guard let token else { throw TMPError.notFound("token_not_found", "no token \(Redaction.identifier(event.tokenUniqueReference))") }
            // The token service sends an event again when it had no answer: the first delivery's
            // correction may not have been confirmed (or the process stopped after the event's
            // commit and before it), and the token still pays on a card that forbids it. It is
            // owed now as then, not only at the next realignment. Unless the token's place is
            // taken — most often by that first delivery's correction, still with the token
            // service (which is why the event came again): then that one answers for it.
            return TokenEventResponse(eventId: event.eventId, result: "DUPLICATE", tokenStatus: await correctIfOwed(token, alongsideABusyPlace: false).status)
        case .eventIdReused(let earlierToken, let earlierEvent):
            // Which token it was is not said: another token's reference is not this event's to learn.
            guard earlierToken.isSameIdentifier(as: event.tokenUniqueReference), let earlierEvent else {
                throw TMPError.conflict("event_id_reused", "eventId \(Redaction.identifier(event.eventId)) was already used for another token's event; every event needs an id of its own")
            }
            throw TMPError.conflict("event_id_reused", "eventId \(Redaction.identifier(event.eventId)) was already used for this token's \(earlierEvent.rawValue) event; every event needs an id of its own")
        case .rejected(let message):
            if message == Self.noCardForEvent {
                throw TMPError.notFound("card_not_found", "no card with panUniqueReference \(Redaction.identifier(event.panUniqueReference))")
            }
            if try await environment.store.token(reference: event.tokenUniqueReference) == nil {
                throw TMPError.notFound("token_not_found", message)
            }
            throw TMPError.conflict("illegal_token_transition", message)
        }
    }
}

extension TSPService {
    /// Whom the activation data of `decision`, the newest that let a token of its card and
    /// device be made, was issued to, when that decision is this token's, made at
    /// `tokenMadeAt`: nil otherwise.
    ///
    /// It is this token's when it is recent enough: a token is made within minutes of its decision, and an
    /// older one is another token's (the previous owner's device's of months ago, say, while
    /// this one came without a decision TMP recorded). A decision after `tokenMadeAt` is
    /// another token's too, beyond the clock skew allowed between instances.
    private func userDecided(by decision: TokenizationDecisionRecord?, forATokenMadeAt tokenMadeAt: Date) async throws -> String? {
        guard let decision, let used = decision.activationDataId, decision.decidedAt.timeIntervalSince(tokenMadeAt) <= Self.maximumClockSkew,
            tokenMadeAt.timeIntervalSince(decision.decidedAt) <= Self.decisionReachForCreation
        else { return nil }
        return try await environment.store.provisioningAttempt(activationDataId: used)?.userId
    }

    /// Corrects `token` at the token service when its card's status forbids its state (see
    /// ``TokenCorrection``), in the token's place in line when that is free, and answers the
    /// token as it then stands.
    ///
    /// When a command for the token is in progress or waiting, the correction does not wait for
    /// it: the token service may be waiting for this event's answer before it returns that
    /// command (both would hang until the time limit), and the event may say something newer
    /// than the command's outcome (the token resumed after the command's suspension), which
    /// recording the command would hide. So it runs at once, alongside — unless
    /// `alongsideABusyPlace` is false: then a busy place means no correction now.
    func correctIfOwed(_ token: TokenRecord, alongsideABusyPlace: Bool = true) async -> TokenRecord {
        let correction = TokenCorrection(environment: environment)
        let reference = token.tokenUniqueReference
        // (Most events call for none: checked by reading first, before any place is taken.)
        guard await correction.owesCorrection(afterEvent: reference) else { return token }
        let inLine = try? await environment.tokenCommandOrder.runIfFree(reference, lease: environment.tokenCommandLease) { await correction.enforce(afterEvent: reference) }
        let settled: TokenCorrection.Settlement
        if let inLine {
            settled = inLine
        } else if alongsideABusyPlace {
            settled = await correction.enforce(afterEvent: reference)
        } else {
            return token
        }
        switch settled {
        case .undone(let corrected), .notConfirmed(let corrected): return corrected
        case .nothingToUndo: return token
        }
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
