#if !canImport(PassKit)
import Foundation

/// How the issuer's authorization (UI) extension ended.
public enum PKIssuerProvisioningExtensionAuthorizationResult: Int, Sendable {
    /// The user cancelled.
    case canceled = 0
    /// The user authenticated.
    case authorized = 1
}

/// The issuer's authorization extension: reports its result through `completionHandler`.
public protocol PKIssuerProvisioningExtensionAuthorizationProviding: NSObjectProtocol {
    /// Called with the result of authentication.
    var completionHandler: ((PKIssuerProvisioningExtensionAuthorizationResult) -> Void)? { get set }
}
#endif
