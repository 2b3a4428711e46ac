#if !canImport(PassKit)
import Foundation

/// The device's library of Wallet passes.
open class PKPassLibrary: NSObject {
    // The backend in force when the library was made, so a library made inside a scoped
    // backend keeps it wherever it is used later.
    private let boundBackend: (any PassKitShimBackend)?

    /// Opens the pass library.
    public override init() {
        boundBackend = PassKitShim.backend
        super.init()
    }

    private var backend: (any PassKitShimBackend)? {
        boundBackend ?? PassKitShim.backend
    }

    /// Whether the device has a pass library.
    open class func isPassLibraryAvailable() -> Bool {
        PassKitShim.backend?.isPassLibraryAvailable() ?? false
    }

    /// Whether secure-element passes can be activated on this device.
    open var isSecureElementPassActivationAvailable: Bool {
        backend?.isSecureElementPassActivationAvailable() ?? false
    }

    /// The passes on this device.
    open func passes() -> [PKPass] {
        backend?.passes() ?? []
    }

    /// The pass with this type identifier and serial number, if present.
    open func pass(withPassTypeIdentifier identifier: String, serialNumber: String) -> PKPass? {
        passes().first { $0.passTypeIdentifier == identifier && $0.serialNumber == serialNumber }
    }

    /// The passes of one type on this device.
    open func passes(of passType: PKPassType) -> [PKPass] {
        passType == .any ? passes() : passes().filter { $0.passType == passType }
    }

    /// The secure-element passes on paired devices (Apple Watch).
    open var remoteSecureElementPasses: [PKSecureElementPass] {
        backend?.remoteSecureElementPasses() ?? []
    }

    /// Whether a pass for this card account can be added to this device or a paired one.
    open func canAddSecureElementPass(primaryAccountIdentifier: String) -> Bool {
        backend?.canAddSecureElementPass(primaryAccountIdentifier: primaryAccountIdentifier) ?? false
    }
}
#endif
