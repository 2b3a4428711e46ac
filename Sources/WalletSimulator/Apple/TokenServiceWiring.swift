#if !canImport(PassKit)
import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// Apple's servers handing opened cards to the token service simulator.
public struct TokenServicePaymentNetwork: SimulatedPaymentNetwork {
    /// The network's token service.
    public let tokenService: TokenServiceSimulator

    /// Connects Apple's side to `tokenService`.
    public init(_ tokenService: TokenServiceSimulator) {
        self.tokenService = tokenService
    }

    /// Implements ``SimulatedPaymentNetwork/tokenize(_:activationData:deviceType:)``: asks the token service simulator.
    public func tokenize(_ card: PassDataPayload, activationData: Data?, deviceType: DeviceType) async -> NetworkTokenization {
        do {
            switch try await tokenService.tokenize(TokenizationRequest(card: card, activationData: activationData, deviceType: deviceType)) {
            case .approved(let token): return .approved(tokenUniqueReference: token.tokenUniqueReference, tokenLast4: token.tokenLast4)
            case .requiresActivation(let token): return .requiresActivation(tokenUniqueReference: token.tokenUniqueReference, tokenLast4: token.tokenLast4)
            case .declined(let decline): return .declined(reason: decline.reason)
            }
        } catch {
            return .declined(reason: "\(error)")
        }
    }

    /// Implements ``SimulatedPaymentNetwork/activationLink(tokenUniqueReference:serialNumber:)``.
    public func activationLink(tokenUniqueReference: String, serialNumber: String) async -> URL? {
        try? await tokenService.activationLink(forToken: tokenUniqueReference, serialNumber: serialNumber)
    }

    /// The cardholder removes a pass from `wallet`: the pass leaves the device, and the
    /// network deactivates its token, which TMP hears of by its event. Returns the pass
    /// removed, nil when `wallet` has no pass with that serial number.
    ///
    /// - Throws: the token service's error when it does not know the pass's token (the pass
    ///   is removed all the same, as on a device).
    @discardableResult
    public func removePass(serialNumber: String, from wallet: SimulatedWallet) async throws(TokenServiceSimulatorError) -> SimulatedPass? {
        guard let pass = wallet.removePass(serialNumber: serialNumber) else { return nil }
        try await tokenService.change(.passRemoved, tokenUniqueReference: pass.deviceAccountIdentifier)
        return pass
    }
}

/// The simulated device learning of the network's token changes: the pass of the token takes
/// the matching activation state, on whichever device it is.
public struct WalletTokenObserver: TokenStateObserver {
    /// The device's Wallet.
    public let wallet: SimulatedWallet

    /// Observes on behalf of `wallet`.
    public init(wallet: SimulatedWallet) {
        self.wallet = wallet
    }

    /// Implements ``TokenStateObserver/tokenStateDidChange(tokenUniqueReference:to:)``.
    public func tokenStateDidChange(tokenUniqueReference: String, to status: TokenStatus) {
        wallet.setActivationState(SimulatedPass.ActivationState(status), deviceAccountIdentifier: tokenUniqueReference)
    }
}
#endif
