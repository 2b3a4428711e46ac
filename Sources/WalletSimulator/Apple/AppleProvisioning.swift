#if !canImport(PassKit)
import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// What Apple's servers do with the issuer's answer, for the add sheet and the Wallet
/// extension alike: open `encryptedPassData` with the leaf's private key, check the five
/// fields and that nonce and signature are the ones Wallet sent, check the card may go on the
/// device, hand card and activation data to the network, and put the pass on the device.
struct AppleProvisioning {
    let wallet: SimulatedWallet
    let pki: SimulatedApplePKI
    let network: any SimulatedPaymentNetwork

    enum Outcome {
        case added(SimulatedPass, activationLink: URL?)
        case failed(String)
    }

    func complete(_ request: IssuerRequest, nonce: Data, nonceSignature: Data, configuredAccount: String?, device: DeviceType, passName: String) async -> Outcome {
        guard let encrypted = request.encryptedPassData, !encrypted.isEmpty, let ephemeral = request.ephemeralPublicKey, !ephemeral.isEmpty else {
            return .failed("the issuer returned no card data")
        }
        let opened: Data
        do {
            opened = try ECCV2.open(SealedPassData(encryptedData: encrypted, ephemeralPublicKey: ephemeral), with: pki.leafPrivateKey)
        } catch {
            return .failed("the card data could not be opened with Apple's key (\(error))")
        }
        let card: PassDataPayload
        do {
            card = try PassDataPayload(jsonData: opened)
        } catch {
            return .failed("the opened card data is invalid: \(error)")
        }
        guard constantTimeEquals(card.nonce, nonce), constantTimeEquals(card.nonceSignature, nonceSignature) else {
            return .failed("the card data does not carry the nonce and signature Wallet sent")
        }
        let account = wallet.primaryAccountIdentifier(forCardNumber: card.primaryAccountNumber.digits)
        if let configuredAccount, configuredAccount != account {
            return .failed("the card data is for another card than the configured primaryAccountIdentifier")
        }
        let deviceName = device == .watch ? "Apple Watch" : "iPhone"
        guard wallet.canAdd(primaryAccountIdentifier: account, to: device) else {
            return .failed("this card is already in Wallet on the \(deviceName)")
        }
        guard wallet.beginAdding(primaryAccountIdentifier: account, to: device) else {
            return .failed("this card is being added to the \(deviceName) already")
        }
        let state: SimulatedPass.ActivationState
        let token: String
        let tokenLast4: String
        switch await network.tokenize(card, activationData: request.activationData, deviceType: device) {
        case .declined(let reason):
            wallet.endAdding(primaryAccountIdentifier: account, to: device)
            return .failed("the card network declined the card (\(reason))")
        case .approved(let reference, let last4):
            (state, token, tokenLast4) = (.activated, reference, last4)
        case .requiresActivation(let reference, let last4):
            (state, token, tokenLast4) = (.requiresActivation, reference, last4)
        }
        let made = SimulatedPass(
            serialNumber: "SN" + SimulatedWallet.randomHex(10), deviceAccountIdentifier: token, primaryAccountIdentifier: account,
            primaryAccountNumberSuffix: card.primaryAccountNumber.last4, deviceAccountNumberSuffix: tokenLast4,
            activationState: state, device: device, localizedName: passName
        )
        // As added: in the token's latest state if the network changed it meanwhile.
        let pass = wallet.add(made)
        var link: URL?
        if pass.activationState == .requiresActivation {
            link = await network.activationLink(tokenUniqueReference: token, serialNumber: pass.serialNumber)
            if let link { wallet.open(link) }
        }
        return .added(pass, activationLink: link)
    }
}
#endif
