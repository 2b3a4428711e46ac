import Foundation
import ProvisioningModels

/// One card the non-UI extension offers Wallet for one device: what
/// `PKIssuerProvisioningExtensionPaymentPassEntry` is made of (ProvisioningPassKit converts).
public struct ExtensionPassEntry: Sendable, Hashable, Identifiable {
    /// Card art that passed `CardArtValidator`, with what the validator measured.
    public struct Art: Sendable, Hashable {
        /// The PNG or PDF file.
        public var data: Data
        /// Its format and size.
        public var info: CardArtInfo

        /// Creates art.
        public init(data: Data, info: CardArtInfo) {
            self.data = data
            self.info = info
        }
    }

    /// What Wallet hands back when the cardholder picks this entry.
    public var identifier: ExtensionEntryIdentifier
    /// The entry's title: the card's product title.
    public var title: String
    /// The card as the snapshot (or the refresh) describes it.
    public var card: ExtensionSnapshot.Card
    /// The add-request configuration: ECC_V2, cardholder name, last four digits, network,
    /// product title and, for the Watch, the account already in Wallet when known.
    public var configuration: AddPassConfiguration
    /// The card art, if the shared folder holds valid art for the card.
    public var art: Art?

    /// Creates an entry.
    public init(identifier: ExtensionEntryIdentifier, title: String, card: ExtensionSnapshot.Card, configuration: AddPassConfiguration, art: Art?) {
        self.identifier = identifier
        self.title = title
        self.card = card
        self.configuration = configuration
        self.art = art
    }

    /// The identifier as Wallet sees it.
    public var id: String { identifier.rawValue }
}

extension AddPassConfiguration {
    /// The configuration of a Wallet-extension entry for `card` on `target`: what the add
    /// sheet shows, and — for the Watch — the card's account in Wallet when it is known, so
    /// Wallet targets the device that lacks it.
    public init(entryFor card: ExtensionSnapshot.Card, target: DeviceType) {
        self.init(
            card: card.externalCardId, cardholderName: card.cardholderName, panLast4: card.panLast4, productTitle: card.productTitle, network: card.network,
            target: target, primaryAccountIdentifier: target == .watch ? card.primaryAccountIdentifier : nil
        )
    }
}
