#if !canImport(PassKit)
import Foundation

/// A pass whose credential lives in the device's secure element (payment cards among them).
open class PKSecureElementPass: PKPass {
    /// The card account's identifier (the same on every device).
    open var primaryAccountIdentifier: String { account.primaryAccountIdentifier }
    /// The last digits of the card's PAN.
    open var primaryAccountNumberSuffix: String { account.primaryAccountNumberSuffix }
    /// The device account (network token) identifier.
    open var deviceAccountIdentifier: String { account.deviceAccountIdentifier }
    /// The last digits of the device account number.
    open var deviceAccountNumberSuffix: String { account.deviceAccountNumberSuffix }
    /// The pass's activation state.
    open var passActivationState: PKSecureElementPass.PassActivationState { account.passActivationState }
    /// The device's pass identifier.
    open var devicePassIdentifier: String? { account.devicePassIdentifier }
    /// The paired terminal's identifier.
    open var pairedTerminalIdentifier: String? { account.pairedTerminalIdentifier }

    private let account: Account

    /// NOT PART OF APPLE'S PASSKIT: the secure-element values a pass holds, for the Linux
    /// shim's constructors.
    package struct Account: Sendable, Hashable {
        /// The pass's `primaryAccountIdentifier`.
        package var primaryAccountIdentifier: String
        /// The pass's `primaryAccountNumberSuffix`.
        package var primaryAccountNumberSuffix: String
        /// The pass's `deviceAccountIdentifier`.
        package var deviceAccountIdentifier: String
        /// The pass's `deviceAccountNumberSuffix`.
        package var deviceAccountNumberSuffix: String
        /// The pass's `passActivationState`.
        package var passActivationState: PKSecureElementPass.PassActivationState
        /// The pass's `devicePassIdentifier`.
        package var devicePassIdentifier: String?
        /// The pass's `pairedTerminalIdentifier`.
        package var pairedTerminalIdentifier: String?

        /// Values for a secure-element pass.
        package init(primaryAccountIdentifier: String, primaryAccountNumberSuffix: String, deviceAccountIdentifier: String, deviceAccountNumberSuffix: String, passActivationState: PKSecureElementPass.PassActivationState, devicePassIdentifier: String? = nil, pairedTerminalIdentifier: String? = nil) {
            self.primaryAccountIdentifier = primaryAccountIdentifier
            self.primaryAccountNumberSuffix = primaryAccountNumberSuffix
            self.deviceAccountIdentifier = deviceAccountIdentifier
            self.deviceAccountNumberSuffix = deviceAccountNumberSuffix
            self.passActivationState = passActivationState
            self.devicePassIdentifier = devicePassIdentifier
            self.pairedTerminalIdentifier = pairedTerminalIdentifier
        }
    }

    /// NOT PART OF APPLE'S PASSKIT: a secure-element pass holding these values (its type is
    /// always `.secureElement`; Linux only, package-internal).
    package init(passKitShimValues values: PKPass.Values, account: Account) {
        self.account = account
        var values = values
        values.passType = .secureElement
        super.init(passKitShimValues: values)
    }
}

extension PKSecureElementPass {
    /// Where a secure-element pass stands.
    public enum PassActivationState: Int, Sendable {
        /// Ready for use.
        case activated = 0
        /// Waits for the issuer's activation.
        case requiresActivation = 1
        /// Being activated.
        case activating = 2
        /// Temporarily unusable.
        case suspended = 3
        /// Removed for good.
        case deactivated = 4
    }
}

/// The activation state of a payment pass (superseded by `PKSecureElementPass.PassActivationState`).
@available(*, deprecated, message: "Use PKSecureElementPassActivationState instead")
public enum PKPaymentPassActivationState: UInt, Sendable {
    /// Ready for use.
    case activated = 0
    /// Waits for the issuer's activation.
    case requiresActivation = 1
    /// Being activated.
    case activating = 2
    /// Temporarily unusable.
    case suspended = 3
    /// Removed for good.
    case deactivated = 4
}

/// A payment pass.
open class PKPaymentPass: PKSecureElementPass {
    /// The pass's activation state.
    @available(*, deprecated, message: "Use [PKSecureElementPass passActivationState] instead")
    open var activationState: PKPaymentPassActivationState {
        PKPaymentPassActivationState(rawValue: UInt(passActivationState.rawValue)) ?? .activated
    }
}
#endif
