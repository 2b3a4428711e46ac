import ProvisioningModels

/// When the token service sends the token events it queues.
public enum TokenEventDeliveryMode: Sendable, Hashable {
    /// A background task sends queued events in order as soon as it can, as a real network
    /// does: TMP may receive the echo of its own command before or after it recorded the change
    /// itself. Tokenization waits for its own `CREATED`/`ACTIVATED` events before it returns.
    case background
    /// Events wait in the queue until ``TokenServiceSimulator/drainEvents()``, so a test decides
    /// when TMP hears of a change.
    case manual
}

/// What became of one token event, as the token service's delivery log records it.
public struct TokenEventDelivery: Sendable, Hashable {
    /// The outcome.
    public enum Outcome: Sendable, Hashable {
        /// TMP applied it; the token's state afterwards.
        case applied(TokenStatus)
        /// TMP had seen this event id before and changed nothing; the token's state.
        case duplicate(TokenStatus)
        /// TMP took it as older than what it already knew of the token and changed nothing;
        /// the token's state as TMP has it.
        case stale(TokenStatus)
        /// Lost on purpose (an injected fault); never sent.
        case dropped
        /// TMP refused it for good (error envelope code and message); it is not retried.
        case rejected(code: String, message: String)
        /// Not delivered this time (timeout, TMP unreachable); it stays queued and the next
        /// delivery tries it again.
        case failed(String)
    }

    /// The event.
    public var event: TokenEventRequest
    /// What became of it.
    public var outcome: Outcome

    /// Creates a log entry.
    public init(event: TokenEventRequest, outcome: Outcome) {
        self.event = event
        self.outcome = outcome
    }
}
