import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// A card as stored: the PAN only encrypted (``encryptedPAN``) and as a keyed hash.
public struct CardRecord: Sendable, Hashable {
    /// The issuer's card id.
    public var externalCardId: String
    /// The owner (cardholder JWT `sub`).
    public var userId: String
    /// `EncryptedPAN.serialized`.
    public var encryptedPAN: String
    /// HMAC-SHA256 of the PAN (PAN vault lookup hash).
    public var panLookupHash: String
    /// Last four digits.
    public var panLast4: String
    /// The card's reference towards the network; random, stable while the PAN is unchanged.
    public var panUniqueReference: String
    /// `MM/YY`.
    public var expiration: CardExpiration
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
    /// Created.
    public var createdAt: Date
    /// Last changed.
    public var updatedAt: Date

    /// Creates a record.
    public init(externalCardId: String, userId: String, encryptedPAN: String, panLookupHash: String, panLast4: String, panUniqueReference: String, expiration: CardExpiration, cardholderName: String, network: CardNetwork, productTitle: String, artId: String?, status: CardStatus, createdAt: Date, updatedAt: Date) {
        self.externalCardId = externalCardId
        self.userId = userId
        self.encryptedPAN = encryptedPAN
        self.panLookupHash = panLookupHash
        self.panLast4 = panLast4
        self.panUniqueReference = panUniqueReference
        self.expiration = expiration
        self.cardholderName = cardholderName
        self.network = network
        self.productTitle = productTitle
        self.artId = artId
        self.status = status
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// The Lifecycle API's view (no PAN).
    public var resource: CardResource {
        CardResource(externalCardId: externalCardId, userId: userId, panLast4: panLast4, panUniqueReference: panUniqueReference, expiration: expiration.text, cardholderName: cardholderName, network: network, productTitle: productTitle, artId: artId, status: status)
    }
}

extension CardRecord {
    /// What `TMPStore.putCard(_:audit:)` (the requirement) stores for `card` over `previous`, the card as stored
    /// and locked: the PAN's reference is decided on `previous`, not on the caller's read.
    ///
    /// - Parameter referenceIsRetired: whether `card`'s `panUniqueReference` is one the store
    ///   keeps as retired (a replacement committed since the caller read the card retired it).
    /// - Throws: ``StoreError/concurrentChange(externalCardId:)`` when `previous` has another
    ///   PAN but `card` carries its reference, or a reference a replacement retired since
    ///   (either way `card` was decided on a read from before a replacement: it would put back
    ///   a retired reference, or skip ending the tokens of the PAN it replaces).
    static func replacing(_ previous: CardRecord?, with card: CardRecord, referenceIsRetired: Bool) throws -> CardRecord {
        guard let previous else { return card }
        var stored = card
        if constantTimeEquals(previous.panLookupHash, card.panLookupHash) {
            stored.panUniqueReference = previous.panUniqueReference
        } else if previous.panUniqueReference == card.panUniqueReference || referenceIsRetired {
            throw StoreError.concurrentChange(externalCardId: card.externalCardId)
        }
        return stored
    }
}
