#if !canImport(PassKit)
import Foundation
import PassKitShim
import ProvisioningModels
import SDKTestSupport

/// A Wallet in memory behind the PassKit shim: passes on this iPhone and a paired Watch, and
/// whether the app has the provisioning entitlement.
final class ShimWallet: PassKitShimBackend {
    struct State {
        var phone: [PKPaymentPass] = []
        var watch: [PKPaymentPass] = []
        var available = true
        var entitled = true
    }

    // Passes are immutable once made; the state is only read and replaced under the lock.
    let state = Locked(UncheckedBox(State()))

    func update(_ change: (inout State) -> Void) {
        state.withValue { change(&$0.value) }
    }

    static func pass(serial: String, reference: String, account: String, last4: String = "1111", state: PKSecureElementPass.PassActivationState, remote: Bool = false) -> PKPaymentPass {
        PKPaymentPass(
            passKitShimValues: .init(passType: .secureElement, serialNumber: serial, passTypeIdentifier: "paymentpass.com.apple", isRemotePass: remote, deviceName: remote ? "Apple Watch" : "iPhone"),
            account: .init(primaryAccountIdentifier: account, primaryAccountNumberSuffix: last4, deviceAccountIdentifier: reference, deviceAccountNumberSuffix: "9876", passActivationState: state)
        )
    }

    func isPassLibraryAvailable() -> Bool { state.current.value.available }
    func passes() -> [PKPass] { state.current.value.phone }
    func remoteSecureElementPasses() -> [PKSecureElementPass] { state.current.value.watch }
    func isSecureElementPassActivationAvailable() -> Bool { true }
    func canAddPaymentPass() -> Bool { state.current.value.available }

    func canAddSecureElementPass(primaryAccountIdentifier: String) -> Bool {
        let state = state.current.value
        let live = { (passes: [PKPaymentPass]) in passes.contains { $0.primaryAccountIdentifier == primaryAccountIdentifier && $0.passActivationState != .deactivated } }
        return state.available && (!live(state.phone) || !live(state.watch))
    }

    func allowsAddPaymentPassViewController(configuration: PKAddPaymentPassRequestConfiguration) -> Bool {
        state.current.value.entitled
    }
}

/// Holds non-Sendable PassKit objects inside `Locked`.
struct UncheckedBox<Value>: @unchecked Sendable {
    // @unchecked: only reached through `Locked`, and the passes inside are never mutated.
    var value: Value
    init(_ value: Value) { self.value = value }
}
#endif
