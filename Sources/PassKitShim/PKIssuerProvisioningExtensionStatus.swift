#if !canImport(PassKit)
import Foundation

/// What the issuer's Wallet extension tells Wallet up front.
open class PKIssuerProvisioningExtensionStatus: NSObject {
    /// Whether the user must authenticate before passes can be added.
    open var requiresAuthentication: Bool = false
    /// Whether at least one pass can be added to this iPhone.
    open var passEntriesAvailable: Bool = false
    /// Whether at least one pass can be added to a paired Apple Watch.
    open var remotePassEntriesAvailable: Bool = false

    /// Creates a status with everything false.
    public override init() {
        super.init()
    }
}
#endif
