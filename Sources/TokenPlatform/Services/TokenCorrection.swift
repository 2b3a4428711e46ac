import Foundation
import ProvisioningModels

/// Keeps a token at the token service in line with its card's status when the two cross.
///
/// **A command the card's status overtook** (``settle(_:held:actor:)``). A command is sent for
/// the card's status at the time: suspend because the card is blocked, resume or activate
/// because it is active. When the card changes status before the answer comes back (unblocked
/// during a block's suspension, blocked again during an unblock's resumption, a customer-service
/// resume or an in-app activation), TMP refuses to record the command, but the token service
/// has already carried it out. Left alone, a blocked card would keep a token that pays, or an
/// active card a token that does not. The command is undone at the token service, and TMP
/// records what the token service holds afterwards:
///
/// | the token service holds | the card now | undo | if confirmed, TMP records | if not confirmed |
/// |---|---|---|---|---|
/// | ACTIVE (resumed, activated) | BLOCKED | suspend | SUSPENDED by the block | ACTIVE: the same `PATCH … BLOCKED`, or ``TokenRealigner``, suspends it |
/// | SUSPENDED by a block | ACTIVE | resume | ACTIVE | SUSPENDED by the block: the same `PATCH … ACTIVE`, or ``TokenRealigner``, resumes it |
///
/// **A token event the card's status forbids** (``enforce(afterEvent:)``). The token service
/// reports what it did; when that leaves a token usable that the card's status forbids — a token
/// created or activated after its tokenization was approved and before the card was closed or
/// blocked, or a late echo resuming a blocked card's token — TMP corrects it there: a closed
/// card's token is deactivated, a blocked card's active token suspended (by the block, so
/// unblocking resumes it). Only in that direction: a suspension the token service reports for
/// an active card is its own decision and stays — unless it echoes a suspension sent for the
/// card's block (``TokenRecord/blockSuspensionsSent``), which the event rules record as the
/// block's, for the realignment to resume.
///
/// Nothing is undone when the card was closed while a command ran (closing deactivates every
/// token itself), when the token was deactivated, or when customer service suspended it
/// meanwhile (only customer service resumes such a token) — unless the command was customer
/// service's own resume of that suspension (``settle(_:held:actor:undoingCustomerServiceResume:)``).
/// A resume for an unblocked card that finds the token suspended meanwhile for another reason
/// is not recorded, and the suspension is sent again (``reassertSuspension(_:actor:)``).
///
/// Two corrections leave TMP's record as it is whether or not the token service confirms
/// them: sending a suspension again, and ending a token the card's previous owner activated
/// (``deactivateActivatedForAPreviousOwner(_:actor:)``). Unconfirmed, nothing in the token's
/// state would show that a command is owed, so the token records it as pending
/// (``TokenRecord/pendingCommand``), and the realignment sends it again until the token service
/// confirms it.
struct TokenCorrection {
    /// How the correction ended.
    enum Settlement: Sendable, Hashable {
        /// Corrected at the token service; the token as TMP now records it.
        case undone(TokenRecord)
        /// The token service did not confirm the correction; the token as TMP now records it
        /// (what the token service holds), ready for the same card status change to be sent again.
        case notConfirmed(TokenRecord)
        /// Nothing to correct.
        case nothingToUndo
    }

    let environment: PlatformEnvironment

    /// Undoes, if the card's status now wants it, a command after which the token service
    /// holds the token `held` (`.active` or `.suspended` by a block).
    ///
    /// `undoingCustomerServiceResume`: the command was customer service's resume of a token
    /// TMP still records suspended by customer service. That suspension is the one the
    /// command lifted, so it does not stop the correction: confirmed, the token is recorded
    /// suspended by the block (unblocking resumes it, as customer service wanted); not
    /// confirmed, ACTIVE as the token service holds it, at odds with the blocked card, so the
    /// realignment suspends it.
    func settle(_ reference: String, held: TokenStatus, actor: String, undoingCustomerServiceResume: Bool = false) async -> Settlement {
        guard let (token, card) = await current(reference) else { return .nothingToUndo }
        switch (held, card.status) {
        case (.active, .blocked):
            return await correct(
                token, card: card, with: environment.tokenService.suspend, actor: actor,
                confirmed: .set(.suspended, suspendedBy: .cardBlocked), unconfirmed: .set(.active, suspendedBy: nil),
                overridesCustomerService: undoingCustomerServiceResume
            )
        case (.suspended, .active):
            guard token.suspendedBy != .customerService else { return .nothingToUndo }
            return await correct(
                token, card: card, with: environment.tokenService.resume, actor: actor,
                confirmed: .set(.active, suspendedBy: nil), unconfirmed: .set(.suspended, suspendedBy: .cardBlocked)
            )
        default:
            return .nothingToUndo
        }
    }

    /// After a resume the token service carried out for a token TMP has since recorded
    /// suspended for another reason (customer service suspended it while an unblocking's
    /// resume was with the token service): suspends it there again, so the token service holds
    /// what TMP records. TMP's record is not changed.
    ///
    /// Not confirmed, the suspension is recorded as pending, so the realignment sends it again.
    /// Confirmed after customer service resumed the token meanwhile (its resume may have reached
    /// the token service first), the resume is sent again, so the token service ends holding
    /// the token active, as TMP records it.
    func reassertSuspension(_ reference: String, actor: String) async -> Settlement {
        guard let (token, card) = await current(reference), token.status == .suspended else { return .nothingToUndo }
        let settlement = await correct(token, card: card, with: environment.tokenService.suspend, actor: actor, confirmed: .unchanged, unconfirmed: nil, suspends: true)
        let why = "the token was suspended (by \(token.suspendedBy?.rawValue ?? "the token service")) while a resume for the card's unblocking was with the token service"
        switch settlement {
        case .undone:
            // TMP's record does not change, but a command was sent: the trail says so. A
            // suspension still pending from an earlier attempt is settled by it.
            let audit = AuditEntry(at: environment.now(), actor: actor, action: "token.suspended", subject: "token:\(reference)", detail: "suspension sent again: \(why)")
            let settled = await settlePending(.suspend, of: token, audit: audit).map(Settlement.undone) ?? settlement
            // Resumed meanwhile (customer service), possibly reaching the token service before
            // this suspension: resumed there again, so it holds what TMP records — only while
            // the card is active. Blocked meanwhile, TMP's ACTIVE record is at odds with the
            // card and the block (or the realignment) suspends the token; a resume sent now
            // could land after that suspension and leave the token paying on a blocked card.
            guard let now = try? await environment.store.token(reference: reference), now.status == .active,
                let card = try? await environment.store.card(externalCardId: now.externalCardId), card.status == .active, !now.isOfAReplacedPAN(of: card)
            else { return settled }
            do {
                try await environment.tokenService.resume(now)
                let resent = AuditEntry(at: environment.now(), actor: actor, action: "token.active", subject: "token:\(reference)", detail: "resume sent again: customer service resumed the token while its suspension was sent again")
                try? await environment.recordCommandAudit(resent)
                return .undone(now)
            } catch {
                environment.logger.error(
                    "token service did not confirm resuming a token again after its suspension was sent again while customer service resumed it; it may hold the token suspended",
                    metadata: ["token": "\(Redaction.prefix(reference))", "error": "\(Redaction.cardNumbers(in: "\(error)"))"]
                )
                return .notConfirmed(now)
            }
        case .notConfirmed:
            let audit = AuditEntry(
                at: environment.now(), actor: actor, action: "token.pending_command", subject: "token:\(reference)",
                detail: "suspension not confirmed by the token service, to be sent again by the realignment: \(why)"
            )
            return .notConfirmed(await recordPending(.suspend, of: token, audit: audit))
        case .nothingToUndo:
            return settlement
        }
    }

    /// After an in-app activation the token service carried out while the card was given to
    /// another user (same PAN, so the token followed the card): the token is on the previous
    /// owner's device and was activated by them, so it is deactivated there; TMP records it
    /// DEACTIVATED once confirmed, and otherwise keeps it as it was with the deactivation
    /// pending, so the realignment sends it again.
    func deactivateActivatedForAPreviousOwner(_ reference: String, actor: String) async -> Settlement {
        guard let (token, card) = await current(reference) else { return .nothingToUndo }
        let settlement = await correct(
            token, card: card, with: environment.tokenService.deactivate, actor: actor,
            confirmed: .set(.deactivated, suspendedBy: nil), unconfirmed: nil, reason: "activated by the card's previous owner"
        )
        guard case .notConfirmed(let recorded) = settlement else { return settlement }
        let audit = AuditEntry(
            at: environment.now(), actor: actor, action: "token.pending_command", subject: "token:\(reference)",
            detail: "deactivation not confirmed by the token service, to be sent again by the realignment: activated by the card's previous owner"
        )
        return .notConfirmed(await recordPending(.deactivate, of: recorded, audit: audit))
    }

    /// Records `command` as pending for `token` (unless the token was deactivated meanwhile,
    /// or, for a suspension, is no longer suspended or owes a deactivation already); the token
    /// as TMP then records it.
    private func recordPending(_ command: PendingTokenCommand, of token: TokenRecord, audit: AuditEntry) async -> TokenRecord {
        await writePending(of: token, audit: audit) { current in
            guard current.status != .deactivated else { return .reject("the token is deactivated already") }
            if command == .suspend, current.status != .suspended || current.pendingCommand == .deactivate { return .unchanged }
            return .setPending(command)
        }.token
    }

    /// Settles a pending `command` of `token` the token service has now confirmed, with `audit`
    /// (written alone when nothing was pending, since a command was sent all the same); the
    /// token as TMP then records it, nil if the database failed.
    private func settlePending(_ command: PendingTokenCommand, of token: TokenRecord, audit: AuditEntry) async -> TokenRecord? {
        let (recorded, written) = await writePending(of: token, audit: audit) { current in
            current.pendingCommand == command ? .setPending(nil) : .unchanged
        }
        if written { return recorded }
        do { try await environment.recordCommandAudit(audit) } catch {
            environment.logger.error("could not record a re-sent command in the audit trail", metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "error": "\(DatabaseUnavailable.reason(error))"])
            return nil
        }
        return recorded
    }

    /// Writes `decide`'s change of the token's pending command with `audit`; the token as TMP
    /// then records it, and whether anything (the audit entry with it) was written.
    private func writePending(of token: TokenRecord, audit: AuditEntry, _ decide: @escaping @Sendable (TokenRecord) -> TokenChange) async -> (token: TokenRecord, written: Bool) {
        let reference = token.tokenUniqueReference
        do {
            return switch try await environment.recordCommandOutcome(reference: reference, audit: audit, { current, _ in decide(current) }) {
            case .updated(_, let after): (after, true)
            case .unchanged(let current), .rejected(let current, _): (current, false)
            case .notFound: (token, false)
            }
        } catch {
            environment.logger.error(
                "could not record a token service command's outcome; the realignment finds the token only if it is at odds with its card",
                metadata: ["token": "\(Redaction.prefix(reference))", "error": "\(DatabaseUnavailable.reason(error))"]
            )
            return (token, false)
        }
    }

    /// After a token event was applied: deactivates a closed card's token, one of a PAN the
    /// card no longer has, or one whose deactivation is pending (made or activated for the
    /// card's previous owner), and suspends a blocked card's active token at the token service.
    func enforce(afterEvent reference: String) async -> Settlement {
        guard let (token, card) = await current(reference) else { return .nothingToUndo }
        switch Self.correctionAfterEvent(token, card) {
        case .deactivate:
            // Not confirmed, a pending deactivation stays pending (the realignment sends it).
            let reason = token.pendingCommand == .deactivate && !token.isOfAReplacedPAN(of: card) && card.status != .closed ? "made or activated for the card's previous owner" : nil
            return await correct(token, card: card, with: environment.tokenService.deactivate, actor: "tmp", confirmed: .set(.deactivated, suspendedBy: nil), unconfirmed: nil, reason: reason)
        case .suspend:
            return await correct(token, card: card, with: environment.tokenService.suspend, actor: "tmp", confirmed: .set(.suspended, suspendedBy: .cardBlocked), unconfirmed: nil)
        case nil:
            return .nothingToUndo
        }
    }

    /// Whether ``enforce(afterEvent:)`` would send a correction for the token as it is now
    /// (read only: most events call for none).
    func owesCorrection(afterEvent reference: String) async -> Bool {
        guard let (token, card) = await current(reference) else { return false }
        return Self.correctionAfterEvent(token, card) != nil
    }

    /// What a token event's correction sends, if anything.
    private enum EventCorrection { case deactivate, suspend }

    /// Deactivate a closed card's token, one of a PAN the card no longer has, or one whose
    /// deactivation is pending (rather than suspend it for a block: it is owed its end);
    /// suspend a blocked card's active token.
    private static func correctionAfterEvent(_ token: TokenRecord, _ card: CardRecord) -> EventCorrection? {
        if token.isOfAReplacedPAN(of: card) || card.status == .closed || token.pendingCommand == .deactivate { return .deactivate }
        if token.status == .active, card.status == .blocked { return .suspend }
        return nil
    }

    /// The token, unless deactivated, and its card.
    private func current(_ reference: String) async -> (TokenRecord, CardRecord)? {
        guard let token = try? await environment.store.token(reference: reference), token.status != .deactivated,
            let card = try? await environment.store.card(externalCardId: token.externalCardId)
        else { return nil }
        return (token, card)
    }

    /// Sends `command` for `token`, then records `confirmed` or, if the token service did not
    /// confirm, `unconfirmed` (nil: TMP's record already says what the token service holds) —
    /// both only while the card keeps the status the correction was made for.
    private func correct(
        _ token: TokenRecord,
        card: CardRecord,
        with command: @Sendable (TokenRecord) async throws -> Void,
        actor: String,
        confirmed: TokenChange,
        unconfirmed: TokenChange?,
        reason: String? = nil,
        overridesCustomerService: Bool = false,
        suspends: Bool = false
    ) async -> Settlement {
        let reference = token.tokenUniqueReference
        // A suspension for the card's block is noted first; before any other, such a note is
        // cleared (``PlatformEnvironment/prepareSuspension(of:forTheBlock:)``).
        let forTheBlock = confirmed == .set(.suspended, suspendedBy: .cardBlocked)
        let read = token
        var token = token
        var noted: EventTime?
        if forTheBlock || suspends {
            do {
                (token, noted) = try await environment.prepareSuspension(of: token, forTheBlock: forTheBlock)
            } catch {
                // The note of the block's suspensions could not be cleared: not sent (logged).
                return .notConfirmed(read)
            }
        }
        // When the token was not ACTIVE, nothing was noted: the time the suspension was sent,
        // should it be recorded unconfirmed with the token ACTIVE.
        let sentAt = noted ?? EventTime(environment.now())
        let done: Bool
        var outcomeUnknown = false
        do {
            try await command(token)
            done = true
        } catch {
            done = false
            outcomeUnknown = !TokenServiceCommandOutcome.neverSent(error)
            let cleared = !forTheBlock && suspends ? read.blockSuspensionsSent : nil
            await environment.withdrawSuspensionNote(of: reference, sentAt: noted, before: read.blockSuspensionsSent, cleared: cleared, status: read.status, after: error)
            environment.logger.error(
                "token service did not confirm correcting a token its card's status forbids",
                metadata: ["token": "\(Redaction.prefix(reference))", "token_status": "\(token.status.rawValue)", "card_status": "\(card.status.rawValue)", "error": "\(Redaction.cardNumbers(in: "\(error)"))"]
            )
        }
        guard let decided = done ? confirmed : unconfirmed else { return .notConfirmed(token) }
        guard case .set(let target, let source) = decided else { return done ? .undone(token) : .notConfirmed(token) }
        // Not confirmed, a suspension for the block may still have been carried out: recording
        // the token as the token service held it before keeps that in the same write (for an
        // ACTIVE token, the time it was sent joins its note), and keeps the note it had. An
        // error that says it never reached the token service adds nothing.
        let change: TokenChange = forTheBlock && !done
            ? .setNotConfirmed(target, suspendedBy: source, blockSuspensionSentAt: outcomeUnknown ? sentAt : nil)
            : decided
        let why = reason ?? (token.isOfAReplacedPAN(of: card) ? "token of a PAN the card no longer has" : "card is \(card.status.rawValue)")
        let detail = done
            ? "\(why); corrected at the token service"
            : "\(why); correction not confirmed, recorded as the token service holds it"
        let audit = AuditEntry(at: environment.now(), actor: actor, action: "token.\(target.rawValue.lowercased())", subject: "token:\(reference)", detail: detail)
        let cardStatus = card.status
        // Not confirmed, a suspension for the block that may have been carried out is recorded
        // (as the token service held the token before, with the note) also when the card
        // changed meanwhile, as long as the token did not: unblocked, the card leaves the
        // token ACTIVE, and the note lets the suspension's echo be taken as the block's.
        let mayHaveSuspendedForTheBlock = forTheBlock && !done && outcomeUnknown
        let result = try? await environment.recordCommandOutcome(reference: reference, audit: audit) { current, card in
            // Recorded while the card keeps the status the correction was made for. When the
            // card changed again, a further change that recorded something for the token is
            // that change's to settle; but one that found the token as it was read here sent
            // nothing, deciding on a record that did not yet show this correction, so the
            // confirmed correction is recorded all the same: at odds with the card now, it is
            // undone by the realignment or the next status change, rather than lost with the
            // token service holding what TMP does not record. A deactivation the token service
            // confirmed is recorded whatever the card became: it is final there.
            guard current.status != .deactivated else { return .reject("the token is deactivated already") }
            guard card?.status == cardStatus || ((done || mayHaveSuspendedForTheBlock) && (target == .deactivated || current.withoutSuspensionNote == read.withoutSuspensionNote)) else {
                return .reject("card or token changed again")
            }
            if current.status == .suspended, current.suspendedBy == .customerService, target != .deactivated, !overridesCustomerService {
                return .reject("customer service suspended the token")
            }
            if current.status == target, current.suspendedBy == source { return .unchanged }
            return change
        }
        let recorded: TokenRecord = switch result {
        case .updated(_, let after): after
        case .unchanged(let current), .rejected(let current, _): current
        case .notFound, nil: token
        }
        // Confirmed and found recorded already: the token service holds what TMP records.
        if done, case .unchanged = result { await environment.clearSuspensionNoteAfterConfirmed(recorded) }
        if done {
            let verb = switch target {
            case .suspended: "suspend"
            case .deactivated: "deactivate"
            case .active, .inactive: "resume"
            }
            switch result {
            case .unchanged: await environment.auditUnrecorded(verb, token: reference, actor: actor, why: "\(why); recorded so already")
            case .rejected(_, let message): await environment.auditUnrecorded(verb, token: reference, actor: actor, why: "\(why); \(message)")
            case .updated, .notFound, nil: break
            }
        }
        return done ? .undone(recorded) : .notConfirmed(recorded)
    }
}
