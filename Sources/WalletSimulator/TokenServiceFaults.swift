import ProvisioningModels

/// An operation of the simulated token service that a test can make time out.
public enum TokenServiceOperation: String, Sendable, Hashable, CaseIterable {
    /// Waiting for TMP's tokenization decision.
    case tokenizationDecision = "tokenization-decision"
    /// TMP's `activate` command.
    case activate
    /// TMP's `suspend` command.
    case suspend
    /// TMP's `resume` command.
    case resume
    /// TMP's `deactivate` command.
    case deactivate
}

/// Failures injected into the simulated token service; change them at run time with
/// ``TokenServiceSimulator/setFaults(_:)``.
public struct TokenServiceFaults: Sendable, Hashable {
    /// When set, the token service's own risk check declines every tokenization with this
    /// reason code, before it asks TMP (so TMP records nothing).
    public var declineTokenization: String?
    /// When set, the token service's own risk check turns an issuer's approval (green) into
    /// additional authentication (yellow), as a network may: the token is created INACTIVE
    /// and waits for the issuer app's activation.
    public var downgradeApprovalToYellow: Bool
    /// Operations that hang for ``hangDuration`` and then fail as timed out, changing nothing.
    ///
    /// A timed-out decision has reached TMP (TMP decided and used the activation data), but
    /// its answer comes too late: the token service declines with `issuer_timeout`.
    public var timeOut: Set<TokenServiceOperation>
    /// Lifecycle commands that take effect (the token changes, the device is told, the echo
    /// is queued) and then hang for ``hangDuration`` and fail as timed out: the answer lost on
    /// its way back, the case TMP cannot tell from one that did nothing. Checked after
    /// ``timeOut``; `tokenizationDecision` here means nothing.
    public var applyThenTimeOut: Set<TokenServiceOperation>
    /// After a tokenization decision timed out (``timeOut`` holds `tokenizationDecision`),
    /// ask TMP once more with the same request id, as a network whose answer was lost retries
    /// it, and go by that answer instead of declining with `issuer_timeout`.
    public var retryTimedOutDecision: Bool
    /// How long a timed-out operation hangs before it fails.
    public var hangDuration: Duration
    /// Token events the network loses: logged as dropped, never sent.
    public var dropEvents: Set<TokenEventType>
    /// Token events sent twice with the same event id; TMP must acknowledge the second as a
    /// duplicate and change nothing.
    public var duplicateEvents: Set<TokenEventType>
    /// Events overtake each other: each new event is queued ahead of the last event in the
    /// queue when that one still waits (is not being sent), as a network whose events take
    /// different paths delivers them. With background delivery to a reachable TMP the head is
    /// usually being sent, so only an event queued behind a waiting one overtakes it. TMP must judge each by its time (`occurredAt`), not by
    /// its arrival: an event older than what it knows is acknowledged stale.
    public var reorderEvents: Bool

    /// Creates a set of faults; the default injects none.
    public init(
        declineTokenization: String? = nil,
        downgradeApprovalToYellow: Bool = false,
        timeOut: Set<TokenServiceOperation> = [],
        applyThenTimeOut: Set<TokenServiceOperation> = [],
        retryTimedOutDecision: Bool = false,
        hangDuration: Duration = .zero,
        dropEvents: Set<TokenEventType> = [],
        duplicateEvents: Set<TokenEventType> = [],
        reorderEvents: Bool = false
    ) {
        self.declineTokenization = declineTokenization
        self.downgradeApprovalToYellow = downgradeApprovalToYellow
        self.timeOut = timeOut
        self.applyThenTimeOut = applyThenTimeOut
        self.retryTimedOutDecision = retryTimedOutDecision
        self.hangDuration = hangDuration
        self.dropEvents = dropEvents
        self.duplicateEvents = duplicateEvents
        self.reorderEvents = reorderEvents
    }

    /// No failure injected.
    public static let none = TokenServiceFaults()
}
