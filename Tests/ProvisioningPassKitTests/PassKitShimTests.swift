#if !canImport(PassKit)
import Foundation
import PassKitShim
import Testing

/// The shim's one piece of structure: PKIssuerProvisioningExtensionHandler's two forms of
/// each method reach each other, as the Objective-C runtime makes them on iOS.
@Suite("PassKit shim")
struct PassKitShimTests {
    final class AsyncHandler: PKIssuerProvisioningExtensionHandler {
        override func status() async -> PKIssuerProvisioningExtensionStatus {
            let status = PKIssuerProvisioningExtensionStatus()
            status.passEntriesAvailable = true
            return status
        }

        override func generateAddPaymentPassRequestForPassEntryWithIdentifier(_ identifier: String, configuration: PKAddPaymentPassRequestConfiguration, certificateChain certificates: [Data], nonce: Data, nonceSignature: Data) async -> PKAddPaymentPassRequest? {
            let request = PKAddPaymentPassRequest()
            request.activationData = Data(identifier.utf8) + nonce
            return request
        }
    }

    final class CompletionHandler: PKIssuerProvisioningExtensionHandler {
        override func passEntries(completion: @escaping ([PKIssuerProvisioningExtensionPassEntry]) -> Void) {
            let art = CGImage(passKitShimWidth: 1536, height: 969, data: Data())
            let configuration = PKAddPaymentPassRequestConfiguration(encryptionScheme: .ECC_V2)!
            completion([PKIssuerProvisioningExtensionPaymentPassEntry(identifier: "card-1", title: "Everyday Debit", art: art, addRequestConfiguration: configuration)!])
        }
    }

    /// Wallet's side: the completion form, awaited.
    func status(of handler: PKIssuerProvisioningExtensionHandler) async -> (Bool, Bool) {
        await withCheckedContinuation { continuation in
            handler.status { continuation.resume(returning: ($0.passEntriesAvailable, $0.requiresAuthentication)) }
        }
    }

    @Test func walletsCompletionCallReachesAnAsyncOverride() async {
        let handler = AsyncHandler()
        #expect(await status(of: handler) == (true, false))
        let configuration = PKAddPaymentPassRequestConfiguration(encryptionScheme: .ECC_V2)!
        let activation = await withCheckedContinuation { continuation in
            handler.generateAddPaymentPassRequestForPassEntryWithIdentifier("card-1", configuration: configuration, certificateChain: [], nonce: Data("-n".utf8), nonceSignature: Data()) {
                continuation.resume(returning: $0?.activationData)
            }
        }
        #expect(activation == Data("card-1-n".utf8))
    }

    @Test func anAsyncCallReachesACompletionOverride() async {
        let entries = await CompletionHandler().passEntries()
        #expect(entries.map(\.identifier) == ["card-1"])
        #expect(entries.first?.art.width == 1536)
        #expect((entries.first as? PKIssuerProvisioningExtensionPaymentPassEntry)?.addRequestConfiguration.encryptionScheme == .ECC_V2)
    }

    @Test func aMethodOverriddenInNeitherFormAnswersEmpty() async {
        let handler = PKIssuerProvisioningExtensionHandler()
        #expect(await status(of: handler) == (false, false))
        #expect(await handler.remotePassEntries().isEmpty)
        let configuration = PKAddPaymentPassRequestConfiguration(encryptionScheme: .ECC_V2)!
        #expect(await handler.generateAddPaymentPassRequestForPassEntryWithIdentifier("x", configuration: configuration, certificateChain: [], nonce: Data(), nonceSignature: Data()) == nil)
    }

    @Test func onlyTheSchemesPassKitDeclaresMakeAConfiguration() {
        #expect(PKAddPaymentPassRequestConfiguration(encryptionScheme: .ECC_V2) != nil)
        #expect(PKAddPaymentPassRequestConfiguration(encryptionScheme: .RSA_V2) != nil)
        #expect(PKAddPaymentPassRequestConfiguration(encryptionScheme: PKEncryptionScheme(rawValue: "ECC_V1")) == nil)
    }

    @Test func aSecureElementPassIsFoundByTypeAndAsItsSubclass() {
        let pass: PKPass = PKPaymentPass(
            passKitShimValues: .init(passType: .barcode, serialNumber: "S", passTypeIdentifier: "paymentpass.com.apple"),
            account: .init(primaryAccountIdentifier: "PAI", primaryAccountNumberSuffix: "1111", deviceAccountIdentifier: "DA", deviceAccountNumberSuffix: "9876", passActivationState: .suspended)
        )
        #expect(pass.passType == .secureElement)
        #expect(pass.secureElementPass?.passActivationState == .suspended)
        #expect(pass.secureElementPass?.deviceAccountIdentifier == "DA")
    }
}
#endif
