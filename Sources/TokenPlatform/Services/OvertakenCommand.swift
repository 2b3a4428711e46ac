import Foundation
import ProvisioningModels

/// Settles a token command that the card's status overtook while it was with the token service.
///
/// A command is sent for the card's status at the time: suspend because the card is blocked,
/// resume or activate because it is active. When the card changes status before the answer
/// comes back (unblocked during a block's suspension, blocked again during an unblock's
/// resumption or an in-app activation), TMP refuses to record the command, but the token
/// service has already carried it out. Left alone, a blocked card would keep a token that pays,
/// or an active card a token that does not.
///
/// ``settle(_:held:actor:)`` undoes such a command at the token service, so the token matches
/// the card's status again, and records in TMP what the token service holds afterwards:
///
/// | the token service holds | the card now | undo | if confirmed, TMP records | if not confirmed |
/// |---|---|---|---|---|
/// | ACTIVE (resumed, activated) | BLOCKED | suspend | SUSPENDED by the block | ACTIVE: the same `PATCH … BLOCKED` suspends it |
/// | SUSPENDED by a block | ACTIVE | resume | ACTIVE | SUSPENDED by the block: the same `PATCH … ACTIVE` resumes it |
///
/// Nothing is undone when the card was closed (closing deactivates every token itself), when
/// the token was deactivated, or when customer service suspended it meanwhile (only customer
/// service resumes such a token).
struct OvertakenCommand {
    /// How the overtaken command ended.
    enum Settlement: Sendable, Hashable {
        /// Undone at the token service; the token as TMP now records it.
        case undone(TokenRecord)
        /// The undo was not confirmed; the token as TMP now records it (what the token service
        /// holds), ready for the same card status change to be sent again.
        case notConfirmed(TokenRecord)
        /// Nothing to undo.
        case nothingToUndo
    }

    let environment: PlatformEnvironment

    /// Undoes, if the card's status now wants it, a command after which the token service
    /// holds the token `held` (`.active` or `.suspended` by a block).
    func settle(_ reference: String, held: TokenStatus, actor: String) async -> Settlement {
        let store = environment.store
        guard let token = try? await store.token(reference: reference),
            let card = try? await store.card(externalCardId: token.externalCardId),
            token.status != .deactivated
        else { return .nothingToUndo }
        let undo: @Sendable (TokenRecord) async throws -> Void
        let confirmed: TokenChange
        let unconfirmed: TokenChange
        switch (held, card.status) {
        case (.active, .blocked):
            undo = environment.tokenService.suspend
            confirmed = .set(.suspended, suspendedBy: .cardBlocked)
            unconfirmed = .set(.active, suspendedBy: nil)
        case (.suspended, .active):
            guard token.suspendedBy != .customerService else { return .nothingToUndo }
            undo = environment.tokenService.resume
            confirmed = .set(.active, suspendedBy: nil)
            unconfirmed = .set(.suspended, suspendedBy: .cardBlocked)
        default:
            return .nothingToUndo
        }
        let undone: Bool
        do {
            try await undo(token)
            undone = true
        } catch {
            undone = false
            environment.logger.error(
                "token service did not confirm undoing a command the card's status overtook",
                metadata: ["token": "\(Redaction.prefix(reference))", "card status": "\(card.status.rawValue)", "error": "\(error)"]
            )
        }
        let change = undone ? confirmed : unconfirmed
        let detail = undone
            ? "card became \(card.status.rawValue) while the token service carried out the command; undone"
            : "card became \(card.status.rawValue) while the token service carried out the command; undo not confirmed, recorded as the token service holds it"
        let target: TokenStatus = if case .set(let status, _) = change { status } else { token.status }
        let audit = AuditEntry(at: environment.now(), actor: actor, action: "token.\(target.rawValue.lowercased())", subject: "token:\(reference)", detail: detail)
        let cardStatus = card.status
        let result = try? await store.updateToken(reference: reference, audit: audit) { current, card in
            // Recorded only while the card keeps the status the undo was made for; a further
            // change is that change's to settle.
            guard card?.status == cardStatus, current.status != .deactivated else { return .reject("card or token changed again") }
            if current.status == .suspended, current.suspendedBy == .customerService { return .reject("customer service suspended the token") }
            if case .set(let status, let source) = change, current.status == status, current.suspendedBy == source { return .unchanged }
            return change
        }
        let recorded: TokenRecord? = switch result {
        case .updated(_, let after): after
        case .unchanged(let current), .rejected(let current, _): current
        case .notFound, nil: nil
        }
        guard let recorded else { return .notConfirmed(token) }
        return undone ? .undone(recorded) : .notConfirmed(recorded)
    }
}
