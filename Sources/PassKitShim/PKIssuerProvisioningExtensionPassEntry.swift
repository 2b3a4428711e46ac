#if !canImport(PassKit)
import Foundation

/// A card the issuer's Wallet extension offers to add.
open class PKIssuerProvisioningExtensionPassEntry: NSObject {
    /// The identifier Wallet hands back when the user picks this entry.
    open var identifier: String { storedIdentifier }
    /// The title shown.
    open var title: String { storedTitle }
    /// The card art shown.
    open var art: CGImage { storedArt }

    private let storedIdentifier: String
    private let storedTitle: String
    private let storedArt: CGImage

    // Internal: Apple marks `init` unavailable; entries are made through a subclass.
    init(identifier: String, title: String, art: CGImage) {
        storedIdentifier = identifier
        storedTitle = title
        storedArt = art
        super.init()
    }
}

/// A payment card the issuer's Wallet extension offers to add.
open class PKIssuerProvisioningExtensionPaymentPassEntry: PKIssuerProvisioningExtensionPassEntry {
    /// The add-sheet configuration for this card.
    open var addRequestConfiguration: PKAddPaymentPassRequestConfiguration { storedConfiguration }

    private let storedConfiguration: PKAddPaymentPassRequestConfiguration

    /// Creates an entry.
    public init?(identifier: String, title: String, art: CGImage, addRequestConfiguration configuration: PKAddPaymentPassRequestConfiguration) {
        storedConfiguration = configuration
        super.init(identifier: identifier, title: title, art: art)
    }
}
#endif
