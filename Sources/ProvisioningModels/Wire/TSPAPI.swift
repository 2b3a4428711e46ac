import Foundation

/// `POST /tsp/tokenization-decisions`: the token service provider asks whether to tokenize.
public struct TokenizationDecisionRequest: Codable, Sendable, Hashable {
    /// The TSP's id for this request.
    public var requestId: String
    /// The card Apple decrypted.
    public var primaryAccountNumber: PrimaryAccountNumber
    /// Its expiration.
    public var expiration: CardExpiration
    /// The activation data TMP issued with the sealed card, if Wallet passed it on.
    public var activationData: String?
    /// Always `APPLE_PAY`.
    public var walletType: WalletType
    /// The device the token is for.
    public var deviceType: DeviceType

    /// Creates a request.
    public init(requestId: String, primaryAccountNumber: PrimaryAccountNumber, expiration: CardExpiration, activationData: String?, walletType: WalletType = .applePay, deviceType: DeviceType) {
        self.requestId = requestId
        self.primaryAccountNumber = primaryAccountNumber
        self.expiration = expiration
        self.activationData = activationData
        self.walletType = walletType
        self.deviceType = deviceType
    }
}

/// The issuer's tokenization decision.
public enum TokenizationDecision: String, Codable, Sendable, Hashable {
    /// Green: create the token active.
    case approved = "APPROVED"
    /// Yellow: create the token inactive; the app activates it.
    case requireAdditionalAuthentication = "REQUIRE_ADDITIONAL_AUTHENTICATION"
    /// Red: do not create a token.
    case declined = "DECLINED"
}

/// `tokenization-decisions` response.
public struct TokenizationDecisionResponse: Codable, Sendable, Hashable {
    /// The decision.
    public var decision: TokenizationDecision
    /// The card's pan-unique reference (absent when the card is unknown).
    public var panUniqueReference: String?
    /// Why, as a stable code (e.g. `card_blocked`, `activation_data_valid`).
    public var reason: String

    /// Creates a response.
    public init(decision: TokenizationDecision, panUniqueReference: String?, reason: String) {
        self.decision = decision
        self.panUniqueReference = panUniqueReference
        self.reason = reason
    }
}

/// What happened to a token at the token service provider.
public enum TokenEventType: String, Codable, Sendable, Hashable, CaseIterable {
    /// Created: TMP records the token `INACTIVE` whatever the decision; a token the token
    /// service makes active (green) is reported `ACTIVATED` too.
    case created = "CREATED"
    /// Activated.
    case activated = "ACTIVATED"
    /// Suspended.
    case suspended = "SUSPENDED"
    /// Resumed.
    case resumed = "RESUMED"
    /// Deactivated.
    case deactivated = "DEACTIVATED"
}

/// `POST /tsp/token-events`: idempotent by `eventId`.
public struct TokenEventRequest: Codable, Sendable, Hashable {
    /// Unique per event: a repeat of the same event is acknowledged (`DUPLICATE`) and changes
    /// nothing; the id reused for another event is refused (409 `event_id_reused`).
    public var eventId: String
    /// The token.
    public var tokenUniqueReference: String
    /// The card's pan-unique reference.
    public var panUniqueReference: String
    /// What happened.
    public var event: TokenEventType
    /// Always `APPLE_PAY`.
    public var walletType: WalletType
    /// The device.
    public var deviceType: DeviceType
    /// Last four digits of the token, if known.
    public var tokenLast4: String?
    /// When it happened at the token service, if it says. TMP applies a token's events in
    /// this order: an event older than one already applied to the token is acknowledged as
    /// `STALE` and changes nothing. Events without it are applied in the order they arrive.
    public var occurredAt: EventTime?

    /// Creates an event.
    public init(eventId: String, tokenUniqueReference: String, panUniqueReference: String, event: TokenEventType, walletType: WalletType = .applePay, deviceType: DeviceType, tokenLast4: String? = nil, occurredAt: EventTime? = nil) {
        self.eventId = eventId
        self.tokenUniqueReference = tokenUniqueReference
        self.panUniqueReference = panUniqueReference
        self.event = event
        self.walletType = walletType
        self.deviceType = deviceType
        self.tokenLast4 = tokenLast4
        self.occurredAt = occurredAt
    }
}

/// `token-events` response.
public struct TokenEventResponse: Codable, Sendable, Hashable {
    /// The event id.
    public var eventId: String
    /// `APPLIED`; `DUPLICATE` for an event id seen before; `STALE` for an event older
    /// (`occurredAt`) than one already applied to the token, acknowledged and not applied.
    public var result: String
    /// The token's state after the event.
    public var tokenStatus: TokenStatus

    /// Creates a response.
    public init(eventId: String, result: String, tokenStatus: TokenStatus) {
        self.eventId = eventId
        self.result = result
        self.tokenStatus = tokenStatus
    }
}
