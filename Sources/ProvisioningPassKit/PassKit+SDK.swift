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

// Conversions between PassKit's types and the SDK's. No decisions here: the SDK makes them.

extension WalletPass {
    /// The SDK's view of a PassKit secure-element pass on `device`.
    public init(_ pass: PKSecureElementPass, device: DeviceType) {
        self.init(
            serialNumber: pass.serialNumber,
            deviceAccountIdentifier: pass.deviceAccountIdentifier,
            primaryAccountIdentifier: pass.primaryAccountIdentifier,
            primaryAccountNumberSuffix: pass.primaryAccountNumberSuffix,
            activationState: ActivationState(pass.passActivationState),
            device: device
        )
    }
}

extension WalletPass.ActivationState {
    // A table rather than a switch: PassKit's enum is open to new cases on iOS, and this
    // stays warning-free against both PassKit and the Linux shim.
    private static let passKitStates: [(PKSecureElementPass.PassActivationState, WalletPass.ActivationState)] = [
        (.activated, .activated),
        (.requiresActivation, .requiresActivation),
        (.activating, .activating),
        (.suspended, .suspended),
        (.deactivated, .deactivated),
    ]

    /// PassKit's state; a state this SDK does not know is treated as still activating.
    public init(_ state: PKSecureElementPass.PassActivationState) {
        self = Self.passKitStates.first { $0.0 == state }?.1 ?? .activating
    }
}

extension CardNetwork {
    /// PassKit's name of the network, for the add sheet's introduction.
    public var paymentNetwork: PKPaymentNetwork {
        switch self {
        case .visa: .visa
        case .mastercard: .masterCard
        case .amex: .amex
        case .discover: .discover
        case .jcb: .JCB
        case .unionPay: .chinaUnionPay
        case .maestro: .maestro
        case .interac: .interac
        case .eftpos: .eftpos
        case .cartesBancaires: .cartesBancaires
        }
    }
}

extension AddPassConfiguration {
    /// `PKAddPaymentPassRequestConfiguration` with these values (nil only if PassKit refuses ECC_V2).
    public func passKitConfiguration() -> PKAddPaymentPassRequestConfiguration? {
        let scheme: PKEncryptionScheme = encryptionScheme == Self.eccV2 ? .ECC_V2 : PKEncryptionScheme(rawValue: encryptionScheme)
        guard let configuration = PKAddPaymentPassRequestConfiguration(encryptionScheme: scheme) else { return nil }
        configuration.style = .payment
        configuration.cardholderName = cardholderName
        configuration.primaryAccountSuffix = primaryAccountSuffix
        configuration.localizedDescription = localizedDescription
        configuration.primaryAccountIdentifier = primaryAccountIdentifier
        configuration.paymentNetwork = paymentNetwork?.paymentNetwork
        return configuration
    }
}

extension AddPassRequest {
    /// `PKAddPaymentPassRequest` with these values (all nil for ``AddPassRequest/empty``).
    public func passKitRequest() -> PKAddPaymentPassRequest {
        let request = PKAddPaymentPassRequest()
        request.encryptedPassData = encryptedPassData
        request.activationData = activationData
        request.ephemeralPublicKey = ephemeralPublicKey
        return request
    }
}

extension WalletAddError {
    private static let addPaymentPassErrors: [(PKAddPaymentPassError, Reason)] = [
        (.unsupported, .unsupported),
        (.userCancelled, .userCancelled),
        (.systemCancelled, .systemCancelled),
    ]

    /// The SDK's view of the error Wallet's add sheet finished with.
    public init(_ error: any Error) {
        let error = error as NSError
        let known = error.domain == PKPassKitErrorDomain ? Self.addPaymentPassErrors.first { $0.0.rawValue == error.code }?.1 : nil
        self.init(known ?? .other(domain: error.domain, code: error.code))
    }
}
#endif
