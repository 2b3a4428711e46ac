import Foundation
import ProvisioningModels

/// What Wallet receives back from the issuer: the values of `PKAddPaymentPassRequest`.
///
/// ``empty`` (all nil) is the answer when anything went wrong: Wallet then shows its error
/// instead of waiting for an answer that will never come.
public struct AddPassRequest: Sendable, Hashable {
    /// ECC_V2 ciphertext and tag of the card data.
    public var encryptedPassData: Data?
    /// Activation data for the token service provider.
    public var activationData: Data?
    /// The raw 65-byte ephemeral public key.
    public var ephemeralPublicKey: Data?

    /// Creates a request.
    public init(encryptedPassData: Data?, activationData: Data?, ephemeralPublicKey: Data?) {
        self.encryptedPassData = encryptedPassData
        self.activationData = activationData
        self.ephemeralPublicKey = ephemeralPublicKey
    }

    /// The request carrying `signed-cards`' answer.
    public init(_ response: SignedCardResponse) {
        self.init(encryptedPassData: response.encryptedData.data, activationData: response.activationData.data, ephemeralPublicKey: response.ephemeralPublicKey.data)
    }

    /// No data: tells Wallet that the issuer could not provide the card.
    public static let empty = AddPassRequest(encryptedPassData: nil, activationData: nil, ephemeralPublicKey: nil)

    /// Whether this is ``empty``.
    public var isEmpty: Bool {
        encryptedPassData == nil && activationData == nil && ephemeralPublicKey == nil
    }
}
