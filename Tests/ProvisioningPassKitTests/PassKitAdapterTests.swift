#if !canImport(PassKit)
import Foundation
import PassKitShim
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import Testing

@Suite("PassKit adapters on the Linux shim")
@MainActor
struct PassKitAdapterTests {
    @Test func thePassLibraryReadsThisIPhoneAndThePairedWatch() async {
        let wallet = ShimWallet()
        wallet.update {
            $0.phone = [ShimWallet.pass(serial: "S-P", reference: "DA-P", account: "PAI-1", state: .requiresActivation)]
            $0.watch = [ShimWallet.pass(serial: "S-W", reference: "DA-W", account: "PAI-1", last4: "1111", state: .activated, remote: true)]
        }
        await PassKitShim.withBackend(wallet) {
            let library = PassKitPassLibrary()
            #expect(await library.isPassLibraryAvailable())
            let passes = await library.secureElementPasses()
            #expect(passes == [
                WalletPass(serialNumber: "S-P", deviceAccountIdentifier: "DA-P", primaryAccountIdentifier: "PAI-1", primaryAccountNumberSuffix: "1111", activationState: .requiresActivation, device: .phone),
                WalletPass(serialNumber: "S-W", deviceAccountIdentifier: "DA-W", primaryAccountIdentifier: "PAI-1", primaryAccountNumberSuffix: "1111", activationState: .activated, device: .watch),
            ])
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "PAI-1") == false)
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "PAI-2"))
        }
    }

    @Test func withoutWalletThereIsNoLibraryAndNoSheet() async {
        let library = PassKitPassLibrary()
        #expect(await library.isPassLibraryAvailable() == false)
        #expect(await library.secureElementPasses().isEmpty)
        #expect(PKAddPaymentPassViewController.canAddPaymentPass() == false)
    }

    @Test func theWatchPairingIsTheAppsAnswerAndUnknownWithoutOne() async {
        #expect(await PassKitPassLibrary().isWatchPaired() == nil)
        let answer = Locked<Bool?>(nil)
        let library = PassKitPassLibrary(watchPairing: { answer.current })
        #expect(await library.isWatchPaired() == nil)
        answer.withValue { $0 = true }
        #expect(await library.isWatchPaired() == true)
        answer.withValue { $0 = false }
        #expect(await library.isWatchPaired() == false)
    }

    @Test func everyActivationStateMapsOneToOne() {
        let states: [PKSecureElementPass.PassActivationState] = [.activated, .requiresActivation, .activating, .suspended, .deactivated]
        #expect(states.map(WalletPass.ActivationState.init) == [.activated, .requiresActivation, .activating, .suspended, .deactivated])
    }

    @Test func theConfigurationCarriesTheSDKsValues() throws {
        let configuration = AddPassConfiguration(externalCardId: "card-1", target: .watch, cardholderName: "Jane Appleseed", primaryAccountSuffix: "1111", localizedDescription: "Everyday Debit", primaryAccountIdentifier: "PAI-1", paymentNetwork: .mastercard)
        let passKit = try #require(configuration.passKitConfiguration())
        #expect(passKit.encryptionScheme == .ECC_V2)
        #expect(passKit.style == .payment)
        #expect(passKit.cardholderName == "Jane Appleseed")
        #expect(passKit.primaryAccountSuffix == "1111")
        #expect(passKit.localizedDescription == "Everyday Debit")
        #expect(passKit.primaryAccountIdentifier == "PAI-1")
        #expect(passKit.paymentNetwork == .masterCard)
    }

    @Test func everyNetworkHasAPassKitName() {
        #expect(Set(CardNetwork.allCases.map(\.paymentNetwork)).count == CardNetwork.allCases.count)
        #expect(CardNetwork.jcb.paymentNetwork == .JCB)
        #expect(CardNetwork.unionPay.paymentNetwork == .chinaUnionPay)
    }

    @Test func theRequestCarriesTheSealedDataAndEmptyStaysEmpty() {
        let request = AddPassRequest(Fixtures.signedCard).passKitRequest()
        #expect(request.encryptedPassData == Fixtures.signedCard.encryptedData.data)
        #expect(request.activationData == Fixtures.signedCard.activationData.data)
        #expect(request.ephemeralPublicKey == Fixtures.signedCard.ephemeralPublicKey.data)
        #expect(request.wrappedKey == nil)
        let empty = AddPassRequest.empty.passKitRequest()
        #expect(empty.encryptedPassData == nil && empty.activationData == nil && empty.ephemeralPublicKey == nil)
    }

    @Test func walletsErrorsMapToTheSDKsReasons() {
        func reason(_ code: Int, _ domain: String = PKPassKitErrorDomain) -> WalletAddError.Reason {
            WalletAddError(NSError(domain: domain, code: code)).reason
        }
        #expect(reason(PKAddPaymentPassError.userCancelled.rawValue) == .userCancelled)
        #expect(reason(PKAddPaymentPassError.systemCancelled.rawValue) == .systemCancelled)
        #expect(reason(PKAddPaymentPassError.unsupported.rawValue) == .unsupported)
        #expect(reason(1, "OtherDomain") == .other(domain: "OtherDomain", code: 1))
    }
}
#endif
