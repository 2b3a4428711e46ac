// iOS and visionOS PassKit (Mac Catalyst included), or the Linux shim: macOS's PassKit lacks the add sheet and
// the Watch's passes, and watchOS and tvOS have no issuer provisioning API (and no shim is linked there).
#if os(iOS) || os(visionOS) || os(Linux)
#if canImport(PassKit)
import PassKit
#else
import PassKitShim
#endif
import ProvisioningModels
import ProvisioningSDK

/// The SDK's ``PassLibrary`` over `PKPassLibrary`: this iPhone's secure-element passes and
/// the paired Watch's (`remoteSecureElementPasses`). Main-actor bound, like the PassKit
/// objects it reads.
@MainActor
public final class PassKitPassLibrary: PassLibrary {
    // nonisolated(unsafe): assigned once by the nonisolated initializer, then read only by
    // this class's main-actor methods.
    nonisolated(unsafe) private let library: PKPassLibrary
    private let watchPairing: (@MainActor @Sendable () -> Bool?)?

    /// Wraps `library` (a fresh `PKPassLibrary` by default). Nonisolated, so a Wallet
    /// extension's handler can make one in its own initializer.
    ///
    /// `watchPairing` tells whether an Apple Watch is paired, or nil while the app does not
    /// know; PassKit cannot say. An app using WatchConnectivity passes, for instance,
    /// `{ WCSession.isSupported() && WCSession.default.activationState == .activated ? WCSession.default.isPaired : nil }`.
    /// Without it the Watch is offered as `canAddSecureElementPass` says. (A Wallet extension
    /// cannot use WatchConnectivity: see `IssuerExtensionConfiguration.watchPairing`.)
    nonisolated public init(library: PKPassLibrary = PKPassLibrary(), watchPairing: (@MainActor @Sendable () -> Bool?)? = nil) {
        self.library = library
        self.watchPairing = watchPairing
    }

    /// The app's `watchPairing` answer (nil without one).
    public func isWatchPaired() async -> Bool? {
        currentWatchPairing()
    }

    /// ``isWatchPaired()`` without suspending, for callers already on the main actor.
    public func currentWatchPairing() -> Bool? {
        watchPairing?()
    }

    /// `PKPassLibrary.isPassLibraryAvailable()`.
    public func isPassLibraryAvailable() async -> Bool {
        PKPassLibrary.isPassLibraryAvailable()
    }

    /// This iPhone's secure-element passes, then the paired Watch's.
    public func secureElementPasses() async -> [WalletPass] {
        currentSecureElementPasses()
    }

    /// ``secureElementPasses()`` without suspending, for callers already on the main actor.
    public func currentSecureElementPasses() -> [WalletPass] {
        let local = library.passes(of: .secureElement).compactMap(\.secureElementPass).map { WalletPass($0, device: .phone) }
        let remote = library.remoteSecureElementPasses.map { WalletPass($0, device: .watch) }
        return local + remote
    }

    /// `PKPassLibrary.canAddSecureElementPass(primaryAccountIdentifier:)`.
    public func canAddSecureElementPass(primaryAccountIdentifier: String) async -> Bool {
        library.canAddSecureElementPass(primaryAccountIdentifier: primaryAccountIdentifier)
    }
}
#endif
