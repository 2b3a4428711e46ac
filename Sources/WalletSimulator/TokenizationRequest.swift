import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// What Apple's side hands the token service after it opened `encryptedPassData`: the card,
/// the activation data from `PKAddPaymentPassRequest`, and the target device.
public struct TokenizationRequest: Sendable, Hashable {
    /// The opened pass data: card number, expiration, cardholder name, and the nonce and
    /// nonce signature Apple sent (Apple's side has checked they are the ones it made).
    public var card: PassDataPayload
    /// `PKAddPaymentPassRequest.activationData`, as TMP issued it; nil when the issuer sent none.
    public var activationData: Data?
    /// Always Apple Pay.
    public var walletType: WalletType
    /// The device the pass is for.
    public var deviceType: DeviceType

    /// Creates a request.
    public init(card: PassDataPayload, activationData: Data?, walletType: WalletType = .applePay, deviceType: DeviceType) {
        self.card = card
        self.activationData = activationData
        self.walletType = walletType
        self.deviceType = deviceType
    }
}
