import Foundation

/// `POST /issuer/push-provisioning/tokens/searches` request.
public struct TokenSearchRequest: Codable, Sendable, Hashable {
    /// The most references one search may carry.
    public static let maximumReferences = 100
    /// Always `APPLE_PAY`.
    public var walletType: WalletType
    /// The passes' `deviceAccountIdentifier`s.
    public var tokenUniqueReferences: [String]

    /// Creates a request.
    public init(walletType: WalletType = .applePay, tokenUniqueReferences: [String]) {
        self.walletType = walletType
        self.tokenUniqueReferences = tokenUniqueReferences
    }
}

/// One token of the caller's, as `tokens/searches` returns it.
public struct TokenSearchResult: Codable, Sendable, Hashable {
    /// The token reference (= the pass's `deviceAccountIdentifier`).
    public var tokenUniqueReference: String
    /// The card's pan-unique reference.
    public var panUniqueReference: String
    /// The issuer's card id.
    public var externalCardId: String
    /// The token's state.
    public var tokenStatus: TokenStatus
    /// Green or yellow, as decided at tokenization.
    public var authorizationPath: AuthorizationPath
    /// `PENDING_ACTIVATION` while an inactive token waits for in-app activation, else `COMPLETED`.
    public var processStatus: String
    /// The device the token lives on.
    public var deviceType: DeviceType

    /// Creates a result.
    public init(
        tokenUniqueReference: String,
        panUniqueReference: String,
        externalCardId: String,
        tokenStatus: TokenStatus,
        authorizationPath: AuthorizationPath,
        processStatus: String,
        deviceType: DeviceType
    ) {
        self.tokenUniqueReference = tokenUniqueReference
        self.panUniqueReference = panUniqueReference
        self.externalCardId = externalCardId
        self.tokenStatus = tokenStatus
        self.authorizationPath = authorizationPath
        self.processStatus = processStatus
        self.deviceType = deviceType
    }
}

/// `POST /issuer/push-provisioning/signed-cards` request: what Wallet handed the app.
public struct SignedCardRequest: Codable, Sendable, Hashable {
    /// The most certificates accepted.
    public static let maximumCertificates = 10
    /// The card to add.
    public var externalCardId: String
    /// Always `APPLE_PAY`.
    public var walletType: WalletType
    /// iPhone or Apple Watch.
    public var deviceType: DeviceType
    /// DER certificates, leaf first.
    public var certificates: [Base64Data]
    /// Wallet's nonce.
    public var nonce: Base64Data
    /// Wallet's nonce signature.
    public var nonceSignature: Base64Data

    /// Creates a request.
    public init(externalCardId: String, walletType: WalletType = .applePay, deviceType: DeviceType, certificates: [Data], nonce: Data, nonceSignature: Data) {
        self.externalCardId = externalCardId
        self.walletType = walletType
        self.deviceType = deviceType
        self.certificates = certificates.map(Base64Data.init)
        self.nonce = Base64Data(nonce)
        self.nonceSignature = Base64Data(nonceSignature)
    }
}

/// `signed-cards` response: the three values `PKAddPaymentPassRequest` carries.
public struct SignedCardResponse: Codable, Sendable, Hashable {
    /// Activation data for the token service provider.
    public var activationData: Base64Data
    /// The raw 65-byte ephemeral public key.
    public var ephemeralPublicKey: Base64Data
    /// ECC_V2 ciphertext and tag.
    public var encryptedData: Base64Data

    /// Creates a response.
    public init(activationData: Data, ephemeralPublicKey: Data, encryptedData: Data) {
        self.activationData = Base64Data(activationData)
        self.ephemeralPublicKey = Base64Data(ephemeralPublicKey)
        self.encryptedData = Base64Data(encryptedData)
    }

    /// The JSON form, built directly (the server writes one per `signed-cards` call): exactly
    /// what `JSONEncoder` with sorted keys writes.
    package func jsonData() -> Data {
        var writer = CompactJSONWriter(capacity: 64 + 4 * (activationData.data.count + ephemeralPublicKey.data.count + encryptedData.data.count) / 3)
        writer.addBase64("activationData", activationData.data)
        writer.addBase64("encryptedData", encryptedData.data)
        writer.addBase64("ephemeralPublicKey", ephemeralPublicKey.data)
        return writer.finish()
    }
}

/// `POST /issuer/push-provisioning/tokens/activations` request.
public struct TokenActivationRequest: Codable, Sendable, Hashable {
    /// The pass's `deviceAccountIdentifier`.
    public var tokenUniqueReference: String

    /// Creates a request.
    public init(tokenUniqueReference: String) {
        self.tokenUniqueReference = tokenUniqueReference
    }
}

/// The issuer's answer to an in-app activation.
public enum ActivationOutcome: String, Codable, Sendable, Hashable, CaseIterable {
    /// The token is active.
    case approved = "APPROVED"
    /// The issuer refuses (card or token state); see the comment.
    case declined = "DECLINED"
    /// The token service could not be reached; nothing changed, try again later.
    case failed = "FAILED"
}

/// `tokens/activations` response.
public struct TokenActivationResponse: Codable, Sendable, Hashable {
    /// The token.
    public var tokenUniqueReference: String
    /// The card's last four digits.
    public var cardLast4Digits: String
    /// The outcome.
    public var issuerMobileAppAuthResponse: ActivationOutcome
    /// Why, for people.
    public var comment: String

    /// Creates a response.
    public init(tokenUniqueReference: String, cardLast4Digits: String, issuerMobileAppAuthResponse: ActivationOutcome, comment: String) {
        self.tokenUniqueReference = tokenUniqueReference
        self.cardLast4Digits = cardLast4Digits
        self.issuerMobileAppAuthResponse = issuerMobileAppAuthResponse
        self.comment = comment
    }
}

/// A card of the caller's for display (`GET /issuer/push-provisioning/cards`).
public struct CardSummary: Codable, Sendable, Hashable {
    /// The issuer's card id.
    public var externalCardId: String
    /// Last four digits of the PAN.
    public var panLast4: String
    /// The cardholder name.
    public var cardholderName: String
    /// The card network, e.g. `VISA`.
    public var network: CardNetwork
    /// The product's title, e.g. "Everyday Debit".
    public var productTitle: String
    /// Where to fetch the card art, or nil.
    public var artURL: String?
    /// The card's status.
    public var status: CardStatus

    /// Creates a summary.
    public init(externalCardId: String, panLast4: String, cardholderName: String, network: CardNetwork, productTitle: String, artURL: String?, status: CardStatus) {
        self.externalCardId = externalCardId
        self.panLast4 = panLast4
        self.cardholderName = cardholderName
        self.network = network
        self.productTitle = productTitle
        self.artURL = artURL
        self.status = status
    }
}

/// `GET /issuer/push-provisioning/cards` response.
public struct CardListResponse: Codable, Sendable, Hashable {
    /// The caller's cards.
    public var cards: [CardSummary]

    /// Creates a response.
    public init(cards: [CardSummary]) {
        self.cards = cards
    }
}
