#if !canImport(PassKit)
/// NOT PART OF APPLE'S PASSKIT. Linux only, package-internal.
///
/// What stands behind the shim's PassKit types on Linux: the Apple Wallet simulator
/// implements it to give passes, the pass library and the add sheet their behaviour. With no
/// backend, the shim behaves like a device without Wallet: no pass library, no passes,
/// nothing can be added, and `PKAddPaymentPassViewController` cannot be created.
package protocol PassKitShimBackend: Sendable {
    /// `PKPassLibrary.isPassLibraryAvailable()`.
    func isPassLibraryAvailable() -> Bool
    /// `PKPassLibrary.passes()`: the passes on this device.
    func passes() -> [PKPass]
    /// `PKPassLibrary.remoteSecureElementPasses`: the passes on paired devices (Apple Watch).
    func remoteSecureElementPasses() -> [PKSecureElementPass]
    /// `PKPassLibrary.canAddSecureElementPass(primaryAccountIdentifier:)`.
    func canAddSecureElementPass(primaryAccountIdentifier: String) -> Bool
    /// `PKPassLibrary.isSecureElementPassActivationAvailable`.
    func isSecureElementPassActivationAvailable() -> Bool
    /// `PKAddPaymentPassViewController.canAddPaymentPass()`.
    func canAddPaymentPass() -> Bool
    /// Whether `PKAddPaymentPassViewController(requestConfiguration:delegate:)` succeeds, as
    /// it does on a device for an app with the payment-pass-provisioning entitlement.
    func allowsAddPaymentPassViewController(configuration: PKAddPaymentPassRequestConfiguration) -> Bool
}

/// NOT PART OF APPLE'S PASSKIT. Linux only, package-internal: where the shim finds its backend.
///
/// A backend bound to the current task (``withBackend(_:operation:)``, inherited by child and
/// unstructured tasks) wins over the process-wide one (``install(_:)``), so parallel tests
/// can each have their own Wallet.
package enum PassKitShim {
    @TaskLocal package static var scopedBackend: (any PassKitShimBackend)?

    private static let installed = ShimLock<(any PassKitShimBackend)?>(nil)

    /// Makes `backend` the process-wide backend (nil removes it).
    package static func install(_ backend: (any PassKitShimBackend)?) {
        installed.withLock { $0 = backend }
    }

    /// The backend in force for the current task.
    package static var backend: (any PassKitShimBackend)? {
        scopedBackend ?? installed.withLock { $0 }
    }

    /// Runs `operation` with `backend` bound to the current task and the tasks it starts.
    package static func withBackend<T>(
        _ backend: any PassKitShimBackend,
        isolation: isolated (any Actor)? = #isolation,
        operation: () async throws -> T
    ) async rethrows -> T {
        try await $scopedBackend.withValue(backend, operation: operation, isolation: isolation)
    }
}
#endif
