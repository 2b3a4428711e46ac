import Foundation
import ProvisioningModels

/// What the add-pass sheet is configured with for one card and one target device: the
/// values of `PKAddPaymentPassRequestConfiguration` (ProvisioningPassKit converts), plus
/// the card and device the request data will be sealed for.
public struct AddPassConfiguration: Sendable, Hashable, Codable {
    /// The only scheme TMP seals for.
    public static let eccV2 = "ECC_V2"

    /// The card to add.
    public var externalCardId: String
    /// The device to add it to; sent to `signed-cards` as `deviceType`. With the card on
    /// neither device, Wallet's sheet still lets the cardholder pick the other one; TMP's
    /// activation data does not depend on it, and the outcome names where the card went.
    public var target: DeviceType
    /// Always ``eccV2``.
    public var encryptionScheme: String
    /// The cardholder name shown on the sheet.
    public var cardholderName: String?
    /// The PAN's last four digits shown on the sheet.
    public var primaryAccountSuffix: String?
    /// The product title, e.g. "Everyday Debit".
    public var localizedDescription: String?
    /// The card account already in Wallet; set, it restricts the sheet to devices that lack
    /// this account (how the Watch is targeted for a card already on the iPhone).
    public var primaryAccountIdentifier: String?
    /// The card network, to pick the sheet's introduction.
    public var paymentNetwork: CardNetwork?

    /// Creates a configuration from explicit values.
    public init(externalCardId: String, target: DeviceType, cardholderName: String?, primaryAccountSuffix: String?, localizedDescription: String?, primaryAccountIdentifier: String?, paymentNetwork: CardNetwork?) {
        self.externalCardId = externalCardId
        self.target = target
        self.encryptionScheme = Self.eccV2
        self.cardholderName = cardholderName
        self.primaryAccountSuffix = primaryAccountSuffix
        self.localizedDescription = localizedDescription
        self.primaryAccountIdentifier = primaryAccountIdentifier
        self.paymentNetwork = paymentNetwork
    }

    /// The configuration for adding `status`'s card to `target`, or why it cannot be added.
    ///
    /// The card must be `ACTIVE` at the issuer and not yet usable on `target`. For the Watch
    /// the card must already be on the iPhone: its pass's `primaryAccountIdentifier` is what
    /// lets the sheet target the Watch. Whenever the account is known it is set, so Wallet
    /// offers only the device that lacks the card.
    public init(for status: CardWalletStatus, target: DeviceType) throws(ProvisioningFailure) {
        let card = status.card
        guard card.status == .active else {
            throw .notEligible("card \(card.externalCardId) is \(card.status.rawValue.lowercased()) at the issuer and cannot be added")
        }
        guard status[target].state == .notAdded else {
            throw .notEligible("card \(card.externalCardId) is already in Wallet on the \(target.displayName)")
        }
        if target == .watch, status.primaryAccountIdentifier == nil || status.phone.state == .notAdded {
            throw .notEligible("card \(card.externalCardId) must be on the iPhone before it can be added to the Apple Watch")
        }
        self.init(
            card: card.externalCardId, cardholderName: card.cardholderName, panLast4: card.panLast4, productTitle: card.productTitle, network: card.network,
            target: target, primaryAccountIdentifier: status.primaryAccountIdentifier
        )
    }

    /// The one mapping from a card's display fields to the sheet's, shared by in-app
    /// provisioning and the Wallet extension: the name (when there is one), the last four
    /// digits, the product title as description, the network.
    init(card externalCardId: String, cardholderName: String, panLast4: String, productTitle: String, network: CardNetwork, target: DeviceType, primaryAccountIdentifier: String?) {
        self.init(
            externalCardId: externalCardId,
            target: target,
            cardholderName: cardholderName.isEmpty ? nil : cardholderName,
            primaryAccountSuffix: panLast4,
            localizedDescription: productTitle,
            primaryAccountIdentifier: primaryAccountIdentifier,
            paymentNetwork: network
        )
    }

    /// The `signed-cards` request for what Wallet handed over.
    public func signedCardRequest(certificates: [Data], nonce: Data, nonceSignature: Data) -> SignedCardRequest {
        SignedCardRequest(externalCardId: externalCardId, deviceType: target, certificates: certificates, nonce: nonce, nonceSignature: nonceSignature)
    }
}

extension DeviceType {
    /// "iPhone" or "Apple Watch", for messages.
    public var displayName: String {
        self == .phone ? "iPhone" : "Apple Watch"
    }
}
