#if !canImport(PassKit)
/// The error domain of PassKit's errors, including the add sheet's (`PKAddPaymentPassError`).
public let PKPassKitErrorDomain: String = "PKPassKitErrorDomain"

/// Why Wallet's add sheet ended without adding a pass (codes in ``PKPassKitErrorDomain``).
public enum PKAddPaymentPassError: Int, Sendable {
    /// The device cannot add this pass.
    case unsupported = 0
    /// The user cancelled.
    case userCancelled = 1
    /// The system cancelled.
    case systemCancelled = 2
}
#endif
