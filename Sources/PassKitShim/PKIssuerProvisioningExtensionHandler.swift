#if !canImport(PassKit)
import Foundation

/// The principal class of the issuer's non-UI Wallet extension: Wallet asks it for its
/// status, the cards it can add to this iPhone and to a paired Apple Watch, and the card data
/// for the card the user picked.
///
/// Subclasses override either the completion-handler or the `async` form of each method, as
/// with the Objective-C class. Wallet (here: its simulator) calls the completion-handler
/// form; the base class bridges it to the `async` form and back, and a method overridden in
/// neither form answers an empty status, no entries, or no request.
open class PKIssuerProvisioningExtensionHandler: NSObject {
    /// Creates the handler.
    public override init() {
        super.init()
    }

    /// Reports whether authentication is required and whether entries are available.
    open func status(completion: @escaping (PKIssuerProvisioningExtensionStatus) -> Void) {
        bridgeToAsync("status", fallback: PKIssuerProvisioningExtensionStatus(), completion: completion) { await $0.status() }
    }

    /// Reports whether authentication is required and whether entries are available.
    open func status() async -> PKIssuerProvisioningExtensionStatus {
        await bridgeToCompletion("status") { handler, completion in handler.status(completion: completion) }
    }

    /// The cards that can be added to this iPhone.
    open func passEntries(completion: @escaping ([PKIssuerProvisioningExtensionPassEntry]) -> Void) {
        bridgeToAsync("passEntries", fallback: [], completion: completion) { await $0.passEntries() }
    }

    /// The cards that can be added to this iPhone.
    open func passEntries() async -> [PKIssuerProvisioningExtensionPassEntry] {
        await bridgeToCompletion("passEntries") { handler, completion in handler.passEntries(completion: completion) }
    }

    /// The cards that can be added to a paired Apple Watch.
    open func remotePassEntries(completion: @escaping ([PKIssuerProvisioningExtensionPassEntry]) -> Void) {
        bridgeToAsync("remotePassEntries", fallback: [], completion: completion) { await $0.remotePassEntries() }
    }

    /// The cards that can be added to a paired Apple Watch.
    open func remotePassEntries() async -> [PKIssuerProvisioningExtensionPassEntry] {
        await bridgeToCompletion("remotePassEntries") { handler, completion in handler.remotePassEntries(completion: completion) }
    }

    /// The encrypted card data for the entry the user picked; `completion` must be called
    /// within 20 seconds.
    open func generateAddPaymentPassRequestForPassEntryWithIdentifier(
        _ identifier: String,
        configuration: PKAddPaymentPassRequestConfiguration,
        certificateChain certificates: [Data],
        nonce: Data,
        nonceSignature: Data,
        completionHandler completion: @escaping (PKAddPaymentPassRequest?) -> Void
    ) {
        let arguments = UncheckedTransfer(value: configuration)
        bridgeToAsync("generateAddPaymentPassRequest", fallback: nil, completion: completion) { handler in
            await handler.generateAddPaymentPassRequestForPassEntryWithIdentifier(identifier, configuration: arguments.value, certificateChain: certificates, nonce: nonce, nonceSignature: nonceSignature)
        }
    }

    /// The encrypted card data for the entry the user picked.
    open func generateAddPaymentPassRequestForPassEntryWithIdentifier(
        _ identifier: String,
        configuration: PKAddPaymentPassRequestConfiguration,
        certificateChain certificates: [Data],
        nonce: Data,
        nonceSignature: Data
    ) async -> PKAddPaymentPassRequest? {
        let arguments = UncheckedTransfer(value: configuration)
        return await bridgeToCompletion("generateAddPaymentPassRequest") { handler, completion in
            handler.generateAddPaymentPassRequestForPassEntryWithIdentifier(identifier, configuration: arguments.value, certificateChain: certificates, nonce: nonce, nonceSignature: nonceSignature, completionHandler: completion)
        }
    }

    // MARK: Bridging between the two forms (what the Objective-C runtime does on iOS)

    /// Which base-class bridges are running in this task: a completion form reached from its
    /// own async bridge means the subclass overrides neither form.
    @TaskLocal private static var bridging: Set<BridgeKey> = []

    private struct BridgeKey: Hashable, Sendable {
        let handler: ObjectIdentifier
        let method: String
    }

    private func bridgeToAsync<Value>(
        _ method: String,
        fallback: @autoclosure () -> Value,
        completion: @escaping (Value) -> Void,
        body: @escaping (PKIssuerProvisioningExtensionHandler) async -> Value
    ) {
        if Self.bridging.contains(BridgeKey(handler: ObjectIdentifier(self), method: method)) {
            completion(fallback())
            return
        }
        let handler = UncheckedTransfer(value: self)
        let completion = UncheckedTransfer(value: completion)
        let body = UncheckedTransfer(value: body)
        Task {
            let value = await body.value(handler.value)
            completion.value(value)
        }
    }

    private func bridgeToCompletion<Value>(
        _ method: String,
        _ call: (PKIssuerProvisioningExtensionHandler, @escaping (Value) -> Void) -> Void
    ) async -> Value {
        let key = BridgeKey(handler: ObjectIdentifier(self), method: method)
        let transfer = await withCheckedContinuation { (continuation: CheckedContinuation<UncheckedTransfer<Value>, Never>) in
            Self.$bridging.withValue(Self.bridging.union([key])) {
                call(self) { continuation.resume(returning: UncheckedTransfer(value: $0)) }
            }
        }
        return transfer.value
    }
}
#endif
