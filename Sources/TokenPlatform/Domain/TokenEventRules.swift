import Foundation
import ProvisioningModels

/// Pure rules for how a TSP token event changes a token.
///
/// Events repeat (TMP's own commands are echoed back), so applying an event to a token that
/// is already in the event's target state is accepted and changes nothing but `updatedAt`.
/// Events that carry `occurredAt` are applied in that order: one older than the newest
/// already applied to the token is stale, and one newer whose state the token's recorded
/// state does not lead to directly — the events between were overtaken — records that state.
public enum TokenEventRules {
    /// The effect of `event` on `current` (nil when the token does not exist yet).
    ///
    /// - Parameters:
    ///   - cardStatus: The status of the token's card as committed (nil when unknown).
    ///   - newToken: The token to insert, as `CREATED` makes it (`INACTIVE`): for `CREATED`,
    ///     and for another event that says when it happened and overtook the token's
    ///     `CREATED` (the token is then inserted in the event's state).
    ///   - receivedAt: When TMP received the event: its time when it carries no `occurredAt`,
    ///     to tell whether it echoes a block's suspension (``blockSuspensionEcho(sent:)``).
    public static func effect(of event: TokenEventRequest, on current: TokenRecord?, cardStatus: CardStatus? = nil, newToken: TokenRecord?, receivedAt: Date? = nil) -> TokenEventEffect {
        guard let current else {
            guard let newToken, event.event == .created || event.occurredAt != nil else {
                return .reject("token \(Redaction.prefix(event.tokenUniqueReference)) is unknown; the first event of a token must be CREATED, or say when it happened (occurredAt)")
            }
            guard event.event != .created else { return .insert(newToken) }
            // The token's CREATED is late (or lost): the token service holds the state this
            // event reports, so the token starts there; its CREATED, older, will be STALE.
            var token = newToken
            token.status = target(of: event.event)
            // The token service's own: TMP never sent a command for a token it did not know.
            token.suspendedBy = token.status == .suspended ? .tokenService : nil
            token.lastEventAt = event.occurredAt
            return .insert(token)
        }
        guard current.panUniqueReference == event.panUniqueReference else {
            return .reject("token belongs to another panUniqueReference")
        }
        // A token lives in one device's secure element: an event naming another device is not
        // this token's (a CREATED says so in its own words below) — except a deactivation,
        // final at the token service whatever it names, which must not leave a dead token live.
        guard event.event == .created || event.event == .deactivated || event.deviceType == current.deviceType else {
            return .reject("token is on a \(current.deviceType.rawValue) device, not \(event.deviceType.rawValue)")
        }
        // A token's creation comes before everything else that happens to it: a CREATED for a
        // token TMP holds is old news — late (the token was recorded from an event that
        // overtook it) or sent again under another id — unless it says it happened after an
        // event already applied, or names another device (whenever it happened): then it is
        // not this token's.
        if event.event == .created {
            guard event.deviceType == current.deviceType else {
                return .reject("token already exists on a \(current.deviceType.rawValue) device, not \(event.deviceType.rawValue) (state \(current.status.rawValue))")
            }
            if let occurredAt = event.occurredAt, let last = current.lastEventAt, occurredAt > last {
                return .reject("token already exists (state \(current.status.rawValue)) with an event at \(last); it cannot be created after it")
            }
            return stale(event, current)
        }
        // Delivered after an event that happened later: the token service has moved on, and
        // applying it would record a state the token no longer has. A deactivation is never
        // stale: it is final at the token service whatever came after it (a clock that stepped
        // back there cannot keep a dead token live here).
        if event.event != .deactivated, let occurredAt = event.occurredAt, let last = current.lastEventAt, occurredAt < last {
            return stale(event, current)
        }
        // The newest time stays the newest, even when a late deactivation is applied.
        let eventTime = [event.occurredAt, current.lastEventAt].compactMap { $0 }.max()
        let target = target(of: event.event)
        // The token number's last four digits are the first ones reported: a later event fills
        // them in when the token has none, and never replaces them.
        let tokenLast4 = current.tokenLast4 == nil ? event.tokenLast4 : nil
        if current.status == target {
            return .update(status: target, suspendedBy: current.suspendedBy, tokenLast4: tokenLast4, eventTime: eventTime)
        }
        // Newer than every event applied to the token (both times known), an INACTIVE token's
        // SUSPENDED or RESUMED says the token was activated meanwhile: its ACTIVATED (and a
        // suspension) were overtaken on the way, and will be STALE when they come.
        let overtook = event.occurredAt.flatMap { at in current.lastEventAt.map { at > $0 } } ?? false
        let skipsActivation = overtook && current.status == .inactive && (event.event == .suspended || event.event == .resumed)
        if event.event == .resumed, current.status != .suspended, !skipsActivation {
            return .reject("RESUMED needs a SUSPENDED token; the token is \(current.status.rawValue)")
        }
        if event.event == .activated, current.status != .inactive {
            return .reject("ACTIVATED needs an INACTIVE token; the token is \(current.status.rawValue)")
        }
        guard current.status.canTransition(to: target) || skipsActivation else {
            return .reject("cannot go from \(current.status.rawValue) to \(target.rawValue)")
        }
        // An active token of a blocked card owes the block its suspension: a suspension the
        // token service reports then is the block's (its command may have been carried out
        // and not confirmed), so unblocking the card resumes it. So is one reported around
        // the time a suspension for the block was sent without its outcome being recorded,
        // even once the card is unblocked: the late echo of that command, which unblocking
        // (finding the token ACTIVE) did not resume. The realignment resumes it.
        let eventAt = event.occurredAt ?? receivedAt.map { EventTime($0) }
        let echoesTheBlock = current.blockSuspensionsSent.flatMap { sent in eventAt.map { blockSuspensionEcho(sent: sent).contains($0) } } ?? false
        let blocks = cardStatus == .blocked || echoesTheBlock
        let suspendedBy: SuspensionSource? = target == .suspended ? (current.suspendedBy ?? (blocks ? .cardBlocked : .tokenService)) : nil
        return .update(status: target, suspendedBy: suspendedBy, tokenLast4: tokenLast4, eventTime: eventTime)
    }

    /// `event` acknowledged as stale; the token number's last four digits it carries are kept
    /// when the token has none yet (its `CREATED`, overtaken, is the event that carries them).
    static func stale(_ event: TokenEventRequest, _ current: TokenRecord) -> TokenEventEffect {
        guard current.tokenLast4 == nil, let last4 = event.tokenLast4 else { return .stale }
        return .staleFillingIn(tokenLast4: last4)
    }

    /// The state an event reports.
    static func target(of event: TokenEventType) -> TokenStatus {
        switch event {
        case .created: .inactive
        case .activated, .resumed: .active
        case .suspended: .suspended
        case .deactivated: .deactivated
        }
    }

    /// How long before the first suspension for a card's block was sent (clocks differ) the
    /// token service's report of a suspension may be taken as an echo of it, in milliseconds.
    public static let echoLeadTolerance: Int64 = 60_000
    /// How long after the last suspension for a card's block was sent the token service's
    /// report of a suspension is still taken as its echo, when TMP never recorded the command's
    /// outcome (it timed out, or the process stopped), in milliseconds. A report after that is
    /// the token service's own suspension, which only customer service lifts.
    public static let echoWindow: Int64 = 600_000

    /// The times a reported suspension must fall within to be the echo of suspensions for the
    /// card's block sent from `sent.lowerBound` to `sent.upperBound`: from
    /// ``echoLeadTolerance`` before the first to ``echoWindow`` after the last.
    public static func blockSuspensionEcho(sent: ClosedRange<EventTime>) -> ClosedRange<EventTime> {
        EventTime(millisecondsSince1970: sent.lowerBound.millisecondsSince1970 - echoLeadTolerance)...EventTime(millisecondsSince1970: sent.upperBound.millisecondsSince1970 + echoWindow)
    }
}
