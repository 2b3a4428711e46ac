#if !canImport(PassKit)
import Foundation

/// What Wallet's add sheet asks of the issuer app: the encrypted card data for Wallet's
/// certificates and nonce, then how adding ended.
public protocol PKAddPaymentPassViewControllerDelegate: NSObjectProtocol {
    /// Asks for the card data; `handler` must be called within 20 seconds.
    func addPaymentPassViewController(
        _ controller: PKAddPaymentPassViewController,
        generateRequestWithCertificateChain certificates: [Data],
        nonce: Data,
        nonceSignature: Data,
        completionHandler handler: @escaping (PKAddPaymentPassRequest) -> Void
    )

    /// Reports the end of the flow: the pass added, or the error (`PKPassKitErrorDomain`).
    func addPaymentPassViewController(_ controller: PKAddPaymentPassViewController, didFinishAdding pass: PKPaymentPass?, error: (any Error)?)
}

/// Wallet's add sheet for in-app provisioning. (On iOS a `UIViewController`; on Linux the
/// Apple Wallet simulator plays it.)
@MainActor
open class PKAddPaymentPassViewController: NSObject {
    /// Whether this device can add payment passes at all.
    open class func canAddPaymentPass() -> Bool {
        PassKitShim.backend?.canAddPaymentPass() ?? false
    }

    /// The object Wallet asks for card data.
    open weak var delegate: (any PKAddPaymentPassViewControllerDelegate)?

    /// NOT PART OF APPLE'S PASSKIT: the configuration the sheet was made with, for the
    /// simulator that plays the sheet (Linux only, package-internal).
    package let passKitShimRequestConfiguration: PKAddPaymentPassRequestConfiguration

    /// NOT PART OF APPLE'S PASSKIT: objects the sheet keeps until it is deallocated, as an
    /// Objective-C associated object (`OBJC_ASSOCIATION_RETAIN`) is kept on iOS (Linux only,
    /// package-internal).
    package var passKitShimRetainedObjects: [AnyObject] = []

    /// Creates the sheet; nil when the app may not add payment passes (no entitlement).
    public init?(requestConfiguration configuration: PKAddPaymentPassRequestConfiguration, delegate: (any PKAddPaymentPassViewControllerDelegate)?) {
        guard PassKitShim.backend?.allowsAddPaymentPassViewController(configuration: configuration) == true else { return nil }
        passKitShimRequestConfiguration = configuration
        self.delegate = delegate
        super.init()
    }
}
#endif
