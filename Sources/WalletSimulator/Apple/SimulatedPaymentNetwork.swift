import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// What Apple's servers ask of the card network once they have opened the card data: the
/// link between the Apple side of the simulator and the token service provider's side.
public protocol SimulatedPaymentNetwork: Sendable {
    /// Tokenizes the card Apple opened for `deviceType`, with the issuer's activation data.
    func tokenize(_ card: PassDataPayload, activationData: Data?, deviceType: DeviceType) async -> NetworkTokenization
    /// The issuer-app deep link that activates the yellow-path pass `serialNumber` of token
    /// `tokenUniqueReference`; nil when the network has none to send.
    func activationLink(tokenUniqueReference: String, serialNumber: String) async -> URL?
}

/// How the network answered a tokenization.
public enum NetworkTokenization: Sendable, Hashable {
    /// Green path: the token is active at once.
    case approved(tokenUniqueReference: String, tokenLast4: String)
    /// Yellow path: the token waits for the issuer's in-app activation.
    case requiresActivation(tokenUniqueReference: String, tokenLast4: String)
    /// No token; `reason` says why (the issuer's or the network's).
    case declined(reason: String)
}
