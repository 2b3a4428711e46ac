// iOS and visionOS PassKit (Mac Catalyst included), or the Linux shim: macOS's PassKit lacks the add sheet and
// the Watch's passes, and watchOS and tvOS have no issuer provisioning API (and no shim is linked there).
#if os(iOS) || os(visionOS) || os(Linux)
#if canImport(PassKit)
import PassKit
#else
import PassKitShim
#endif
import Foundation
import ProvisioningModels
import ProvisioningSDK

/// The principal class of an issuer's non-UI Wallet extension, all but the configuration.
/// Subclass it and supply the configuration; nothing else:
///
/// ```swift
/// final class BankWalletExtensionHandler: IssuerProvisioningExtensionHandler {
///     override class var configuration: IssuerExtensionConfiguration {
///         IssuerExtensionConfiguration(
///             tmpURL: URL(string: "https://tmp.bank.example/")!,
///             appGroup: "group.com.bank.app.wallet",
///             keychainAccessGroup: "TEAMID.com.bank.app.wallet"
///         )
///     }
/// }
/// ```
///
/// Wallet makes the principal class with `init()`, which reads ``configuration`` once.
/// Each of Wallet's calls is delegated to the SDK's ``WalletExtension``: `status` from the
/// shared snapshot and the live pass library only; `passEntries` / `remotePassEntries` with
/// the cards not yet on that device; `generateAddPaymentPassRequest…` through `signed-cards`,
/// completing exactly once inside Wallet's 20 s.
///
/// Only the completion-handler forms are overridden. On iOS, Swift imports each of these
/// Objective-C methods twice (completion handler and `async`) for one selector, and a class
/// that overrides both forms of one selector does not compile; Wallet calls the selector,
/// which reaches these overrides either way. A subclass must not override the `async` forms
/// for the same reason.
open class IssuerProvisioningExtensionHandler: PKIssuerProvisioningExtensionHandler {
    /// The extension's logic.
    public let walletExtension: WalletExtension
    /// Card art → image.
    public let artLoader: CardArtLoader
    /// The PassKit pass library, when the handler made it (read directly by `status`).
    private let passKitLibrary: PassKitPassLibrary?

    /// The configuration `init()` uses: override it in the extension's principal class.
    open class var configuration: IssuerExtensionConfiguration {
        preconditionFailure("\(self) must override `class var configuration` (IssuerProvisioningExtensionHandler)")
    }

    /// The handler Wallet makes: with the subclass's ``configuration``.
    public override convenience init() {
        self.init(configuration: Self.configuration)
    }

    /// A handler with `configuration`, reading this device's passes through PassKit and the
    /// Watch's pairing through ``IssuerExtensionConfiguration/watchPairing``.
    public init(configuration: IssuerExtensionConfiguration) {
        let library = PassKitPassLibrary(watchPairing: configuration.watchPairing)
        walletExtension = WalletExtension(configuration: configuration.walletExtension(passLibrary: library))
        artLoader = configuration.artLoader
        passKitLibrary = library
        super.init()
    }

    /// A handler over a ready-made ``WalletExtension`` (tests, custom pass libraries).
    public init(walletExtension: WalletExtension, artLoader: CardArtLoader = .storedArt()) {
        self.walletExtension = walletExtension
        self.artLoader = artLoader
        passKitLibrary = nil
        super.init()
    }

    /// Wallet's `status`, from the snapshot and the live pass library (no network).
    ///
    /// Called on the main thread it answers before returning: PassKit is read right there and
    /// no task is started (a freshly launched extension would otherwise first spin up a thread
    /// for it). Elsewhere it hops to the main actor, which PassKit needs anyway.
    open override func status(completion: @escaping (PKIssuerProvisioningExtensionStatus) -> Void) {
        let walletExtension = walletExtension
        let completion = HandlerTransfer(completion)
        guard let library = passKitLibrary else {
            Task { completion.value(await walletExtension.status().passKitStatus()) }
            return
        }
        let answer = { @MainActor in
            let available = PKPassLibrary.isPassLibraryAvailable()
            let status = walletExtension.status(passLibraryAvailable: available, passes: available ? library.currentSecureElementPasses() : [], watchPaired: available ? library.currentWatchPairing() : nil)
            completion.value(status.passKitStatus())
        }
        if Thread.isMainThread {
            MainActor.assumeIsolated(answer)
        } else {
            Task { @MainActor in answer() }
        }
    }

    /// Wallet's `passEntries`: the cards that can be added to this iPhone.
    open override func passEntries(completion: @escaping ([PKIssuerProvisioningExtensionPassEntry]) -> Void) {
        entries(for: .phone, completion: completion)
    }

    /// Wallet's `remotePassEntries`: the cards that can be added to the paired Apple Watch;
    /// none when ``IssuerExtensionConfiguration/watchPairing`` says no Watch is paired.
    open override func remotePassEntries(completion: @escaping ([PKIssuerProvisioningExtensionPassEntry]) -> Void) {
        entries(for: .watch, completion: completion)
    }

    /// Wallet's request for the card data of the entry the cardholder picked: `completion`
    /// runs exactly once, within the generation budget, with nil on any failure.
    open override func generateAddPaymentPassRequestForPassEntryWithIdentifier(
        _ identifier: String,
        configuration: PKAddPaymentPassRequestConfiguration,
        certificateChain certificates: [Data],
        nonce: Data,
        nonceSignature: Data,
        completionHandler completion: @escaping (PKAddPaymentPassRequest?) -> Void
    ) {
        let completion = HandlerTransfer(completion)
        walletExtension.generateRequest(identifier: identifier, certificates: certificates, nonce: nonce, nonceSignature: nonceSignature) { request in
            completion.value(request?.passKitRequest())
        }
    }

    #if !canImport(PassKit)
    // On iOS a subclass overriding an `async` form does not compile: it would be a second
    // override of the selector these completion forms override. The shim's two forms are
    // separate methods, so without these a subclass's `async` override would compile here and
    // never be called; final, it fails to compile on Linux as it does on iOS.

    /// Wallet's `status`, answered by the completion form (final: override that one).
    public final override func status() async -> PKIssuerProvisioningExtensionStatus { await super.status() }

    /// Wallet's `passEntries`, answered by the completion form (final: override that one).
    public final override func passEntries() async -> [PKIssuerProvisioningExtensionPassEntry] { await super.passEntries() }

    /// Wallet's `remotePassEntries`, answered by the completion form (final: override that one).
    public final override func remotePassEntries() async -> [PKIssuerProvisioningExtensionPassEntry] { await super.remotePassEntries() }

    /// Wallet's request for card data, answered by the completion form (final: override that one).
    public final override func generateAddPaymentPassRequestForPassEntryWithIdentifier(
        _ identifier: String,
        configuration: PKAddPaymentPassRequestConfiguration,
        certificateChain certificates: [Data],
        nonce: Data,
        nonceSignature: Data
    ) async -> PKAddPaymentPassRequest? {
        await super.generateAddPaymentPassRequestForPassEntryWithIdentifier(identifier, configuration: configuration, certificateChain: certificates, nonce: nonce, nonceSignature: nonceSignature)
    }
    #endif

    private func entries(for device: DeviceType, completion: @escaping ([PKIssuerProvisioningExtensionPassEntry]) -> Void) {
        let walletExtension = walletExtension
        let artLoader = artLoader
        let completion = HandlerTransfer(completion)
        Task {
            let entries = await walletExtension.passEntries(for: device)
            completion.value(entries.compactMap { $0.passKitEntry(art: artLoader) })
        }
    }
}

extension ExtensionStatus {
    /// `PKIssuerProvisioningExtensionStatus` with these values.
    public func passKitStatus() -> PKIssuerProvisioningExtensionStatus {
        let status = PKIssuerProvisioningExtensionStatus()
        status.requiresAuthentication = requiresAuthentication
        status.passEntriesAvailable = passEntriesAvailable
        status.remotePassEntriesAvailable = remotePassEntriesAvailable
        return status
    }
}

extension ExtensionPassEntry {
    /// `PKIssuerProvisioningExtensionPaymentPassEntry` for this entry; nil when `art` gives no
    /// image (Wallet requires one) or PassKit refuses the configuration.
    public func passKitEntry(art loader: CardArtLoader) -> PKIssuerProvisioningExtensionPaymentPassEntry? {
        guard let image = loader.image(for: self), let configuration = configuration.passKitConfiguration() else { return nil }
        return PKIssuerProvisioningExtensionPaymentPassEntry(identifier: identifier.rawValue, title: title, art: image, addRequestConfiguration: configuration)
    }
}

/// Carries one of Wallet's completion handlers into the task that calls it.
///
/// @unchecked: the iOS 17/18 SDKs declare these handlers without `@Sendable`, though Wallet
/// accepts a call from any thread; each handler is called once, from one task, and never
/// touched again by the code that handed it over.
struct HandlerTransfer<Value>: @unchecked Sendable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }
}
#endif
