import Foundation

/// `PUT /lifecycle/cards/{externalCardId}`: create or replace a card.
public struct CardUpsertRequest: Codable, Sendable, Hashable {
    /// The owner (the cardholder JWT's `sub`).
    public var userId: String
    /// The card number; validated (digits, length, Luhn).
    public var primaryAccountNumber: PrimaryAccountNumber
    /// `MM/YY`.
    public var expiration: CardExpiration
    /// Name as printed on the card.
    public var cardholderName: String
    /// The network.
    public var network: CardNetwork
    /// Product title shown in Wallet.
    public var productTitle: String
    /// Card art id (uploaded with `PUT /lifecycle/card-art/{artId}`), if any.
    public var artId: String?

    /// Creates a request.
    public init(userId: String, primaryAccountNumber: PrimaryAccountNumber, expiration: CardExpiration, cardholderName: String, network: CardNetwork, productTitle: String, artId: String? = nil) {
        self.userId = userId
        self.primaryAccountNumber = primaryAccountNumber
        self.expiration = expiration
        self.cardholderName = cardholderName
        self.network = network
        self.productTitle = productTitle
        self.artId = artId
    }
}

/// `PATCH /lifecycle/cards/{externalCardId}`.
public struct CardStatusChangeRequest: Codable, Sendable, Hashable {
    /// The new status.
    public var status: CardStatus

    /// Creates a request.
    public init(status: CardStatus) {
        self.status = status
    }
}

/// A card as the Lifecycle API returns it: never the PAN.
public struct CardResource: Codable, Sendable, Hashable {
    /// The issuer's card id.
    public var externalCardId: String
    /// The owner.
    public var userId: String
    /// Last four digits.
    public var panLast4: String
    /// The card's stable reference at the network side (never derived from the PAN in clear).
    public var panUniqueReference: String
    /// `MM/YY`.
    public var expiration: String
    /// Cardholder name.
    public var cardholderName: String
    /// Network.
    public var network: CardNetwork
    /// Product title.
    public var productTitle: String
    /// Card art id.
    public var artId: String?
    /// Status.
    public var status: CardStatus

    /// Creates a resource.
    public init(externalCardId: String, userId: String, panLast4: String, panUniqueReference: String, expiration: String, cardholderName: String, network: CardNetwork, productTitle: String, artId: String?, status: CardStatus) {
        self.externalCardId = externalCardId
        self.userId = userId
        self.panLast4 = panLast4
        self.panUniqueReference = panUniqueReference
        self.expiration = expiration
        self.cardholderName = cardholderName
        self.network = network
        self.productTitle = productTitle
        self.artId = artId
        self.status = status
    }
}

/// A token as the Lifecycle API lists it.
public struct TokenResource: Codable, Sendable, Hashable {
    /// The token reference.
    public var tokenUniqueReference: String
    /// The card.
    public var externalCardId: String
    /// The card's pan-unique reference.
    public var panUniqueReference: String
    /// The token's state.
    public var status: TokenStatus
    /// The device.
    public var deviceType: DeviceType
    /// Green or yellow.
    public var authorizationPath: AuthorizationPath
    /// Last four digits of the token (device account number), when the TSP reported them.
    public var tokenLast4: String?
    /// Why it is suspended, when it is: `CARD_BLOCKED`, `CUSTOMER_SERVICE` or `TOKEN_SERVICE`.
    public var suspendedBy: String?
    /// A command the token service has not confirmed and TMP keeps sending until it does:
    /// `SUSPEND` (the token service may still let the token pay although TMP records it
    /// suspended) or `DEACTIVATE` (the token must end: its card's previous owner activated it).
    /// Absent when none is pending.
    public var pendingCommand: String?

    /// Creates a resource.
    public init(tokenUniqueReference: String, externalCardId: String, panUniqueReference: String, status: TokenStatus, deviceType: DeviceType, authorizationPath: AuthorizationPath, tokenLast4: String?, suspendedBy: String?, pendingCommand: String? = nil) {
        self.tokenUniqueReference = tokenUniqueReference
        self.externalCardId = externalCardId
        self.panUniqueReference = panUniqueReference
        self.status = status
        self.deviceType = deviceType
        self.authorizationPath = authorizationPath
        self.tokenLast4 = tokenLast4
        self.suspendedBy = suspendedBy
        self.pendingCommand = pendingCommand
    }
}

/// `GET /lifecycle/cards/{externalCardId}/tokens` response.
public struct TokenListResponse: Codable, Sendable, Hashable {
    /// The card's tokens.
    public var tokens: [TokenResource]

    /// Creates a response.
    public init(tokens: [TokenResource]) {
        self.tokens = tokens
    }
}
