#if !canImport(PassKit)
import Foundation

/// Whether the pass added is a payment pass or an access pass.
public enum PKAddPaymentPassStyle: Int, Sendable {
    /// A payment pass.
    case payment = 0
    /// An access pass.
    case access = 1
}

/// A label and a value shown on Wallet's add sheet.
open class PKLabeledValue: NSObject {
    /// The label.
    open var label: String { storedLabel }
    /// The value.
    open var value: String { storedValue }

    private let storedLabel: String
    private let storedValue: String

    /// Creates a labeled value.
    public init(label: String, value: String) {
        storedLabel = label
        storedValue = value
        super.init()
    }
}

/// What Wallet's add sheet shows and which passes it considers, for in-app provisioning.
open class PKAddPaymentPassRequestConfiguration: NSObject {
    /// The scheme the card data will be encrypted with.
    open var encryptionScheme: PKEncryptionScheme { storedScheme }
    /// Payment or access.
    open var style: PKAddPaymentPassStyle = .payment
    /// The cardholder name shown on the sheet.
    open var cardholderName: String?
    /// The PAN suffix shown on the sheet.
    open var primaryAccountSuffix: String?
    /// Extra details shown on the sheet.
    open var cardDetails: [PKLabeledValue] = []
    /// A description of the card.
    open var localizedDescription: String?
    /// Restricts the sheet to devices without a pass for this account.
    open var primaryAccountIdentifier: String?
    /// Picks the sheet's introduction for a network.
    open var paymentNetwork: PKPaymentNetwork?
    /// Picks the sheet's introduction images.
    open var productIdentifiers: Set<String> = []
    /// Whether the card needs a FeliCa secure element.
    open var requiresFelicaSecureElement: Bool = false

    private let storedScheme: PKEncryptionScheme

    /// Creates a configuration; nil for a scheme PassKit does not declare (ECC_V2, RSA_V2).
    public init?(encryptionScheme: PKEncryptionScheme) {
        guard encryptionScheme == .ECC_V2 || encryptionScheme == .RSA_V2 else { return nil }
        storedScheme = encryptionScheme
        super.init()
    }
}

/// The encrypted card data the issuer hands Wallet.
open class PKAddPaymentPassRequest: NSObject {
    /// The encrypted card data.
    open var encryptedPassData: Data?
    /// Activation data for the token service provider.
    open var activationData: Data?
    /// The ephemeral public key (ECC_V2).
    open var ephemeralPublicKey: Data?
    /// The wrapped key (RSA_V2).
    open var wrappedKey: Data?

    /// Creates an empty request.
    public override init() {
        super.init()
    }
}
#endif
