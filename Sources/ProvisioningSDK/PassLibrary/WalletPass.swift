import ProvisioningModels

/// A secure-element (payment) pass in Wallet, on this iPhone or on the paired Apple Watch,
/// reduced to what the SDK needs. ProvisioningPassKit makes these from `PKSecureElementPass`.
public struct WalletPass: Sendable, Hashable, Codable {
    /// The pass's activation state as PassKit reports it (`PKSecureElementPass.PassActivationState`).
    public enum ActivationState: String, Sendable, Hashable, Codable, CaseIterable {
        /// Ready for payments.
        case activated
        /// Waits for the issuer's in-app activation.
        case requiresActivation
        /// Activation is in progress.
        case activating
        /// Temporarily unusable.
        case suspended
        /// Removed for good.
        case deactivated
    }

    /// The pass's serial number; activation deep links carry it.
    public var serialNumber: String
    /// The network token reference (TMP's `tokenUniqueReference`).
    public var deviceAccountIdentifier: String
    /// The card account's identifier; needed to add the same card to the other device.
    public var primaryAccountIdentifier: String
    /// The last digits of the card's PAN, for display.
    public var primaryAccountNumberSuffix: String
    /// The activation state.
    public var activationState: ActivationState
    /// Where the pass lives: this iPhone or the paired Apple Watch.
    public var device: DeviceType

    /// Creates a pass.
    public init(serialNumber: String, deviceAccountIdentifier: String, primaryAccountIdentifier: String, primaryAccountNumberSuffix: String, activationState: ActivationState, device: DeviceType) {
        self.serialNumber = serialNumber
        self.deviceAccountIdentifier = deviceAccountIdentifier
        self.primaryAccountIdentifier = primaryAccountIdentifier
        self.primaryAccountNumberSuffix = primaryAccountNumberSuffix
        self.activationState = activationState
        self.device = device
    }
}
