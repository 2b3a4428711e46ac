import Foundation
import ProvisioningModels

/// Pure rules for how a TSP token event changes a token.
///
/// Events repeat (TMP's own commands are echoed back), so applying an event to a token that
/// is already in the event's target state is accepted and changes nothing but `updatedAt`.
/// Events that carry `occurredAt` are applied in that order: one older than the newest
/// already applied to the token is stale.
public enum TokenEventRules {
    /// The effect of `event` on `current` (nil when the token does not exist yet).
    ///
    /// - Parameters:
    ///   - cardStatus: The status of the token's card as committed (nil when unknown).
    ///   - newToken: The token to insert for `CREATED`.
    public static func effect(of event: TokenEventRequest, on current: TokenRecord?, cardStatus: CardStatus? = nil, newToken: TokenRecord?) -> TokenEventEffect {
        guard let current else {
            guard event.event == .created, let newToken else {
                return .reject("token \(Redaction.prefix(event.tokenUniqueReference)) is unknown; the first event of a token must be CREATED")
            }
            return .insert(newToken)
        }
        guard current.panUniqueReference == event.panUniqueReference else {
            return .reject("token belongs to another panUniqueReference")
        }
        // Delivered after an event that happened later: the token service has moved on, and
        // applying it would record a state the token no longer has. A deactivation is never
        // stale: it is final at the token service whatever came after it (a clock that stepped
        // back there cannot keep a dead token live here).
        if event.event != .deactivated, let occurredAt = event.occurredAt, let last = current.lastEventAt, occurredAt < last {
            return .stale
        }
        // The newest time stays the newest, even when a late deactivation is applied.
        let eventTime = [event.occurredAt, current.lastEventAt].compactMap { $0 }.max()
        let target: TokenStatus
        switch event.event {
        case .created: return .reject("token already exists (state \(current.status.rawValue))")
        case .activated: target = .active
        case .suspended: target = .suspended
        case .resumed: target = .active
        case .deactivated: target = .deactivated
        }
        if current.status == target {
            return .update(status: target, suspendedBy: current.suspendedBy, tokenLast4: event.tokenLast4, eventTime: eventTime)
        }
        if event.event == .resumed, current.status != .suspended {
            return .reject("RESUMED needs a SUSPENDED token; the token is \(current.status.rawValue)")
        }
        if event.event == .activated, current.status != .inactive {
            return .reject("ACTIVATED needs an INACTIVE token; the token is \(current.status.rawValue)")
        }
        guard current.status.canTransition(to: target) else {
            return .reject("cannot go from \(current.status.rawValue) to \(target.rawValue)")
        }
        // An active token of a blocked card owes the block its suspension: a suspension the
        // token service reports then is the block's (its command may have been carried out
        // and not confirmed), so unblocking the card resumes it.
        let suspendedBy: SuspensionSource? = target == .suspended ? (current.suspendedBy ?? (cardStatus == .blocked ? .cardBlocked : .tokenService)) : nil
        return .update(status: target, suspendedBy: suspendedBy, tokenLast4: event.tokenLast4, eventTime: eventTime)
    }
}
