import Foundation
import Logging
import NIOCore
import ProvisioningCrypto
import ProvisioningModels

/// The app-facing API: what a signed-in cardholder may do with their own cards and tokens.
///
/// Every method takes the caller's user id and treats another user's card or token exactly
/// like a missing one, so the API never confirms that someone else's card exists.
public struct PushProvisioningService: Sendable {
    /// Shared dependencies.
    public let environment: PlatformEnvironment

    /// Creates the service.
    public init(environment: PlatformEnvironment) {
        self.environment = environment
    }

    /// `tokens/searches`: the caller's tokens among `request.tokenUniqueReferences`.
    public func searchTokens(userId: String, request: TokenSearchRequest) async throws -> [TokenSearchResult] {
        guard request.tokenUniqueReferences.count <= TokenSearchRequest.maximumReferences else {
            throw TMPError.badRequest("too_many_references", "tokenUniqueReferences holds \(request.tokenUniqueReferences.count) references; at most \(TokenSearchRequest.maximumReferences) are accepted per search")
        }
        // The app passes on every identifier Wallet gives it; one of another shape than TMP's ids
        // names no token TMP has (token events take only that shape), so it is absent from the
        // answer like any unknown reference, and the others are still answered.
        let references = Array(Set(request.tokenUniqueReferences.filter(CardIdentifier.isValid)))
        guard !references.isEmpty else { return [] }
        return try await environment.store.tokens(references: references, ownedBy: userId).map(\.searchResult)
    }

    /// `signed-cards`: validates Apple's chain, seals the card for its leaf and issues activation data.
    public func signCard(userId: String, request: SignedCardRequest) async throws -> SignedCardResponse {
        try InputRules.identifier(request.externalCardId, field: "externalCardId")
        guard !request.certificates.isEmpty else {
            throw TMPError.badRequest("invalid_field", "certificates must hold the certificates Wallet supplied, leaf first")
        }
        guard request.certificates.count <= SignedCardRequest.maximumCertificates else {
            throw TMPError.badRequest("too_many_certificates", "certificates holds \(request.certificates.count) entries; at most \(SignedCardRequest.maximumCertificates) are accepted")
        }
        for (field, value) in [("nonce", request.nonce.data), ("nonceSignature", request.nonceSignature.data)] {
            guard !value.isEmpty, value.count <= PassDataPayload.maximumNonceBytes else {
                throw TMPError.badRequest("invalid_field", "\(field) must be 1 to \(PassDataPayload.maximumNonceBytes) bytes")
            }
        }
        let card = try await ownedCard(request.externalCardId, userId: userId)
        let now = environment.now()
        switch card.status {
        case .active: break
        case .blocked: throw TMPError.conflict("card_blocked", "card \(Redaction.identifier(card.externalCardId)) is blocked and cannot be added to Wallet")
        case .closed: throw TMPError.conflict("card_closed", "card \(Redaction.identifier(card.externalCardId)) is closed and cannot be added to Wallet")
        }
        guard !card.expiration.isExpired(at: now) else {
            throw TMPError.conflict("card_expired", "card \(Redaction.identifier(card.externalCardId)) expired at the end of \(card.expiration.text)")
        }
        let chain: AcceptedChain
        switch await environment.chainValidator.validate(request.certificates.map(\.data)) {
        case .accepted(let accepted): chain = accepted
        case .refused(let refusal):
            if let held = environment.chainRefusalLog.admit(refusal.code.rawValue) {
                var metadata: Logger.Metadata = ["card": "\(Redaction.identifier(card.externalCardId))", "reason": "\(refusal.code.rawValue)"]
                if held > 0 { metadata["refused_since_last_line"] = "\(held)" }
                environment.logger.notice("signed-cards refused certificate chain", metadata: metadata)
            }
            throw TMPError.badRequest("certificate_chain_refused", "\(refusal.code.rawValue): \(refusal.message)")
        }
        let pan: PrimaryAccountNumber
        do {
            pan = try environment.vault.decrypt(EncryptedPAN(serialized: card.encryptedPAN).orThrow(), cardID: card.externalCardId)
        } catch {
            // A 500 to the caller; the operator needs to know which card, and that it is the vault.
            let keyID = EncryptedPAN(serialized: card.encryptedPAN)?.keyID ?? "unreadable"
            environment.logger.error(
                "a stored card number cannot be decrypted: the card cannot be provisioned",
                metadata: ["card": "\(Redaction.identifier(card.externalCardId))", "vault_key": "\(keyID)", "error": "\(type(of: error))"]
            )
            // Without detail, as every 500: what went wrong is in the operator's log.
            throw TMPError.internalError
        }
        // The ciphertext is bound to its card id, not to the card's current number: one stored
        // for an earlier number of the same card (restored from a backup, written back by hand)
        // decrypts as well. The keyed hash the card was stored with says which number it has.
        guard constantTimeEquals(environment.vault.lookupHash(pan), card.panLookupHash) else {
            environment.logger.error(
                "a stored card number is not the one the card was stored with (its lookup hash differs): the card cannot be provisioned",
                metadata: ["card": "\(Redaction.identifier(card.externalCardId))"]
            )
            throw TMPError.internalError
        }
        let payload: PassDataPayload
        do {
            payload = try PassDataPayload(
                primaryAccountNumber: pan,
                expiration: card.expiration,
                name: card.cardholderName,
                nonce: request.nonce.data,
                nonceSignature: request.nonceSignature.data
            )
        } catch let error as ValidationError where error.field == "nonce" || error.field == "nonceSignature" {
            // Behind the size check above: the caller's values, so the caller's error (400), never
            // a 500. The card's own fields were validated when the issuer stored it.
            throw TMPError.badRequest("invalid_field", "\(error.field) \(error.message)")
        }
        let sealed = try ECCV2.seal(payload.jsonData(), for: chain.leafPublicKey)
        let activation = try environment.activationIssuer.issue(
            panUniqueReference: card.panUniqueReference,
            nonce: request.nonce.data,
            deviceType: request.deviceType,
            now: now
        )
        try await environment.store.recordProvisioningAttempt(
            ProvisioningAttempt(
                activationDataId: activation.claims.id,
                externalCardId: card.externalCardId,
                userId: userId,
                deviceType: request.deviceType,
                nonceHash: activation.claims.nh,
                leafFingerprint: chain.leafFingerprint,
                createdAt: now,
                expiresAt: activation.claims.expiresAt
            )
        )
        environment.logger.info("sealed card", metadata: ["card": "\(Redaction.identifier(card.externalCardId))", "device": "\(request.deviceType.rawValue)"])
        return SignedCardResponse(activationData: Data(activation.token.utf8), ephemeralPublicKey: sealed.ephemeralPublicKey, encryptedData: sealed.encryptedData)
    }

    /// `tokens/activations`: activates the caller's inactive token through the token service.
    ///
    /// The activation is decided and sent in the token's place in line (``TokenCommandOrder``):
    /// once the token's earlier commands are recorded, on the token as they left it.
    ///
    /// An answer that sends nothing (the token already active, suspended or ended, its card
    /// not active) is given from a plain read, while no command for the token is under way in
    /// this process, without taking the token's place: that place
    /// costs two database writes (the lease of a shared database), which a cardholder asking
    /// again and again for an active token would otherwise add to every other request's wait.
    public func activateToken(userId: String, request: TokenActivationRequest) async throws -> TokenActivationResponse {
        try InputRules.identifier(request.tokenUniqueReference, field: "tokenUniqueReference")
        guard let found = try await environment.store.tokens(references: [request.tokenUniqueReference], ownedBy: userId).first,
            let card = try await environment.store.card(externalCardId: found.externalCardId)
        else {
            throw TMPError.notFound("token_not_found", "no token \(Redaction.identifier(request.tokenUniqueReference)) for this user")
        }
        // Only while no command for the token is under way here: one in progress (customer
        // service's suspension, say) may change the answer, which is then given once it is
        // recorded, as before.
        if !environment.tokenCommandOrder.isBusy(found.tokenUniqueReference), let (outcome, comment) = answerWithoutCommand(token: found, card: card) {
            return TokenActivationResponse(tokenUniqueReference: found.tokenUniqueReference, cardLast4Digits: card.panLast4, issuerMobileAppAuthResponse: outcome, comment: comment)
        }
        return try await environment.inTokenOrder(found.tokenUniqueReference) {
            try await activateInLine(userId: userId, request: request)
        }
    }

    /// The answer to an activation of `token` of `card` that sends nothing, or nil when the
    /// token is to be activated at the token service.
    private func answerWithoutCommand(token: TokenRecord, card: CardRecord) -> (ActivationOutcome, String)? {
        guard card.status == .active else {
            return (.declined, "the card is \(card.status.rawValue.lowercased())")
        }
        guard !card.expiration.isExpired(at: environment.now()) else {
            return (.declined, "the card expired at the end of \(card.expiration.text)")
        }
        // Made for a card number the card no longer has: it is being deactivated, never activated.
        guard !token.isOfAReplacedPAN(of: card) else {
            return (.declined, "the token is of a card number this card no longer has")
        }
        // Activated for the card's previous owner and not yet ended at the token service.
        guard token.pendingCommand != .deactivate else {
            return (.declined, "the token is being deactivated")
        }
        return switch token.status {
        case .active: (.approved, "the token is already active")
        case .suspended: (.declined, "the token is suspended")
        case .deactivated: (.declined, "the token is deactivated")
        case .inactive: nil
        }
    }

    /// ``activateToken(userId:request:)`` in the token's place in line: the token is read again.
    private func activateInLine(userId: String, request: TokenActivationRequest) async throws -> TokenActivationResponse {
        // The owner is in the query, so another user's token takes the path of a missing one
        // (it was fetched and decoded first, answering measurably later).
        guard let token = try await environment.store.tokens(references: [request.tokenUniqueReference], ownedBy: userId).first,
            let card = try await environment.store.card(externalCardId: token.externalCardId)
        else {
            throw TMPError.notFound("token_not_found", "no token \(Redaction.identifier(request.tokenUniqueReference)) for this user")
        }
        func answer(_ outcome: ActivationOutcome, _ comment: String) -> TokenActivationResponse {
            TokenActivationResponse(tokenUniqueReference: token.tokenUniqueReference, cardLast4Digits: card.panLast4, issuerMobileAppAuthResponse: outcome, comment: comment)
        }
        // Read again in line: a command recorded meanwhile may have changed it.
        if let (outcome, comment) = answerWithoutCommand(token: token, card: card) { return answer(outcome, comment) }
        do {
            try await environment.tokenService.activate(token)
        } catch let refusal as any TokenServiceCommandRefusal where refusal.isRefusedForGood {
            // The token service's final answer (the token unknown to it, or in a state that
            // takes no activation there): asking again would not change it. TMP's record
            // follows from the token service's events.
            // Its words are logged, not sent to the cardholder's app: a real token service's
            // refusal may carry its internal codes, hosts or account details.
            let reason = Redaction.cardNumbers(in: refusal.description)
            environment.logger.notice("token service refused the activation", metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "reason": "\(reason)"])
            return answer(.declined, "the token service refused the activation; the token cannot be activated as it stands there")
        } catch {
            environment.logger.warning("token service activation failed", metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "error": "\(Redaction.cardNumbers(in: "\(error)"))"])
            return answer(.failed, "the token service could not be reached or did not answer in time; try again later")
        }
        let audit = AuditEntry(at: environment.now(), actor: "user:\(userId)", action: "token.activate", subject: "token:\(token.tokenUniqueReference)", detail: "in-app activation")
        let result = try await environment.recordCommandOutcome(reference: token.tokenUniqueReference, audit: audit) { current, card in
            // The card may have been blocked since it was read above.
            guard let card, card.status == .active else {
                return .reject("the card is \(card?.status.rawValue.lowercased() ?? "gone")")
            }
            guard !current.isOfAReplacedPAN(of: card) else { return .reject("the card's PAN was replaced") }
            guard current.pendingCommand != .deactivate else { return .reject("the token is being deactivated") }
            // The card may have been given to another user since (same PAN, so its tokens
            // followed): the previous owner's activation must not make it pay.
            guard current.userId.isSameIdentifier(as: userId), card.userId.isSameIdentifier(as: userId) else {
                return .reject(Self.ownerChanged)
            }
            return switch current.status {
            // Already active: the token service's ACTIVATED echo overtook TMP; the user's
            // activation is still recorded.
            case .inactive, .active: .set(.active, suspendedBy: nil)
            default: .reject("the token became \(current.status.rawValue) during activation")
            }
        }
        switch result {
        case .updated, .unchanged: return answer(.approved, "the token is active")
        case .rejected(_, let message):
            await environment.auditUnrecorded("activate", token: token.tokenUniqueReference, actor: "user:\(userId)", why: message)
            // The token service has activated the token; if the card was blocked meanwhile, the
            // activation is undone there so a blocked card has no token that pays; one the card's
            // new owner did not activate is ended there.
            let correction = TokenCorrection(environment: environment)
            if message == Self.ownerChanged {
                _ = await correction.deactivateActivatedForAPreviousOwner(token.tokenUniqueReference, actor: "tmp")
            } else {
                _ = await correction.settle(token.tokenUniqueReference, held: .active, actor: "user:\(userId)")
            }
            return answer(.declined, message)
        case .notFound: throw TMPError.notFound("token_not_found", "no token \(Redaction.identifier(request.tokenUniqueReference)) for this user")
        }
    }

    /// Why an activation is declined when the card changed owner while the token service
    /// activated the token.
    static let ownerChanged = "the card was given to another user during activation"

    /// `GET cards`: the caller's cards for display.
    public func cards(userId: String) async throws -> CardListResponse {
        let cards = try await environment.store.cards(ownedBy: userId)
        return CardListResponse(cards: cards.map { card in
            CardSummary(
                externalCardId: card.externalCardId,
                panLast4: card.panLast4,
                cardholderName: card.cardholderName,
                network: card.network,
                productTitle: card.productTitle,
                artURL: card.artId == nil ? nil : "/issuer/push-provisioning/cards/\(card.externalCardId)/art",
                status: card.status
            )
        })
    }

    /// `GET cards/{id}/art`: the caller's card's art.
    ///
    /// The stored file is checked again against the card-art rules as they are now: art stored
    /// by an earlier version, under looser rules, that fails them (an action a stricter check
    /// finds, say) is not served — the card answers as one without art, and a warning names
    /// the art and the rule so the issuer uploads it again. A file is read, checked and put in
    /// a buffer once and then served from ``CardArtCache`` while its stored version is the
    /// same, so every connection answering it shares one buffer.
    public func cardArt(userId: String, externalCardId: String) async throws -> ServedCardArt {
        try InputRules.identifier(externalCardId, field: "externalCardId")
        let card = try await ownedCard(externalCardId, userId: userId)
        let noArt = TMPError.notFound("card_art_not_found", "card \(Redaction.identifier(externalCardId)) has no card art")
        guard let artId = card.artId, let version = try await environment.store.cardArtVersion(id: artId) else { throw noArt }
        let store = environment.store
        let outcome = try await environment.cardArtCache.art(id: artId, version: version, verdicts: environment.cardArtVerdicts) {
            try await store.cardArt(id: artId)
        }
        switch outcome {
        case .served(let contentType, let body):
            return ServedCardArt(contentType: contentType, body: body)
        case .refused(let refusal):
            environment.logger.warning(
                "stored card art fails the current card-art rules and is not served; upload it again (PUT /lifecycle/card-art/{artId})",
                metadata: ["art": "\(Redaction.identifier(artId))", "reason": "\(refusal.code.rawValue)"]
            )
            throw noArt
        case nil:
            throw noArt
        }
    }

    /// The caller's card. Another user's card is filtered out by the query itself, so it is
    /// answered like a missing one in content and in time: fetching and decoding its row
    /// before comparing the owner made that 404 measurably slower (about 30 µs in a debug
    /// build), which told a caller the card id exists.
    private func ownedCard(_ externalCardId: String, userId: String) async throws -> CardRecord {
        guard let card = try await environment.store.card(externalCardId: externalCardId, ownedBy: userId), card.userId.isSameIdentifier(as: userId) else {
            throw TMPError.notFound("card_not_found", "no card \(Redaction.identifier(externalCardId)) for this user")
        }
        return card
    }
}

extension Optional where Wrapped == EncryptedPAN {
    /// The stored value, or an internal error: a row whose PAN cannot be parsed is corrupt.
    func orThrow() throws -> EncryptedPAN {
        guard let self else { throw TMPError(.internal, "internal_error", "stored card data is unreadable") }
        return self
    }
}

/// Card art as `GET cards/{id}/art` answers it.
public struct ServedCardArt: Sendable {
    /// `image/png` or `application/pdf`, as uploaded.
    public var contentType: String
    /// The file, in a buffer shared by every request served from the same cached copy.
    public var body: ByteBuffer
}
