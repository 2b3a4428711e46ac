#if !canImport(PassKit)
import Crypto
import Foundation
import PassKitShim
import ProvisioningCrypto
import ProvisioningModels
import Testing
import WalletSimulator

/// An issuer's non-UI extension written by hand, with knobs for misbehaving.
final class HandwrittenExtension: PKIssuerProvisioningExtensionHandler, @unchecked Sendable {
    var statusDelay: Duration = .zero
    var answerStatusTwice = false
    var answerGenerate = true
    let leaf: P256.KeyAgreement.PublicKey

    init(leaf: P256.KeyAgreement.PublicKey) {
        self.leaf = leaf
        super.init()
    }

    override func status(completion: @escaping (PKIssuerProvisioningExtensionStatus) -> Void) {
        let status = PKIssuerProvisioningExtensionStatus()
        status.passEntriesAvailable = true
        if answerStatusTwice {
            // Both answers before `status` returns: the misuse is seen whatever the load on
            // the machine (from a task, the second could come after the host has looked).
            completion(status)
            completion(status)
            return
        }
        let delay = statusDelay
        let transfer = UncheckedBox((completion, status))
        Task {
            if delay > .zero { try? await Task.sleep(for: delay) }
            transfer.value.0(transfer.value.1)
        }
    }

    override func passEntries(completion: @escaping ([PKIssuerProvisioningExtensionPassEntry]) -> Void) {
        let configuration = PKAddPaymentPassRequestConfiguration(encryptionScheme: .ECC_V2)!
        configuration.cardholderName = "Alice Appleseed"
        configuration.primaryAccountSuffix = "4444"
        let art = CGImage(passKitShimWidth: 1536, height: 969, data: Data())
        completion([PKIssuerProvisioningExtensionPaymentPassEntry(identifier: "card-mc", title: "World Mastercard", art: art, addRequestConfiguration: configuration)!])
    }

    override func generateAddPaymentPassRequestForPassEntryWithIdentifier(_ identifier: String, configuration: PKAddPaymentPassRequestConfiguration, certificateChain certificates: [Data], nonce: Data, nonceSignature: Data, completionHandler completion: @escaping (PKAddPaymentPassRequest?) -> Void) {
        guard answerGenerate else { return }
        let payload = try! PassDataPayload(primaryAccountNumber: PrimaryAccountNumber("5555555555554444"), expiration: CardExpiration("12/30"), name: "Alice Appleseed", nonce: nonce, nonceSignature: nonceSignature)
        let sealed = try! ECCV2.seal(payload.jsonData(), for: leaf)
        let request = PKAddPaymentPassRequest()
        request.encryptedPassData = sealed.encryptedData
        request.ephemeralPublicKey = sealed.ephemeralPublicKey
        completion(request)
    }
}

/// Carries a non-Sendable value into a task, for the hand-written extension above.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

@Suite("Simulated extension host", .serialized)
@MainActor
struct ExtensionHostTests {
    let pki: SimulatedApplePKI
    let wallet = SimulatedWallet()

    init() throws {
        pki = try SimulatedApplePKI()
    }

    func host(statusBudget: Duration = .milliseconds(100), generateBudget: Duration = .seconds(20)) -> SimulatedExtensionHost {
        SimulatedExtensionHost(wallet: wallet, pki: pki, network: ScriptedNetwork(.approved(tokenUniqueReference: "DNITHEX", tokenLast4: "4321")), statusBudget: statusBudget, generateBudget: generateBudget)
    }

    @Test func statusInsideTheBudgetIsUsedAndMeasured() async throws {
        // A generous budget: this checks the answer is used and timed, not how fast a loaded
        // test machine schedules it (the 100 ms default is what the demo enforces). The answer
        // comes from a main-actor task, queued behind the main-actor work of every other
        // suite running meanwhile: on two busy cores that once took more than 10 s.
        let call = await host(statusBudget: .seconds(60)).status(of: HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey))
        #expect(call.value == .init(requiresAuthentication: false, passEntriesAvailable: true, remotePassEntriesAvailable: false))
        #expect(call.elapsed != nil)
        #expect(call.violations.isEmpty)
    }

    @Test func aLateStatusIsIgnoredAndReported() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.statusDelay = .milliseconds(400)
        let call = await host(statusBudget: .milliseconds(20)).status(of: handler)
        #expect(call.value == nil)
        #expect(call.violations == ["status's completion handler was not called within 0.02 seconds"])
    }

    @Test func aStatusAnsweredTwiceIsReported() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.answerStatusTwice = true
        let call = await host(statusBudget: .seconds(10)).status(of: handler)
        #expect(call.value != nil)
        #expect(call.violations == ["status's completion handler was called 2 times"])
    }

    @Test func anEntryIsAddedThroughGenerateAppleAndTheNetwork() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        let host = host()
        let entries = await host.entries(of: handler, for: .phone)
        let entry = try #require(entries.value?.first)
        #expect(entry.identifier == "card-mc")
        #expect(entry.artWidth == 1536 && entry.artHeight == 969)
        let added = await host.add(entry, handler: handler)
        #expect(added.failure == nil)
        #expect(added.call.value?.deviceAccountIdentifier == "DNITHEX")
        #expect(added.call.value?.primaryAccountNumberSuffix == "4444")
        #expect(wallet.passes(on: .phone).count == 1)
        // Wallet does not offer the same card on the same device again.
        let account = try #require(added.call.value?.primaryAccountIdentifier)
        var again = entry
        again.primaryAccountIdentifier = account
        #expect(await host.add(again, handler: handler).failure == "the entry is for a card already on the iPhone")
    }

    @Test func aMissingRequestFailsAtTheBudget() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.answerGenerate = false
        let host = host(generateBudget: .milliseconds(30))
        let entry = try #require(await host.entries(of: handler, for: .phone).value?.first)
        let added = await host.add(entry, handler: handler)
        #expect(added.failure == "the extension did not answer within 0.03 seconds")
        #expect(added.call.violations == ["generateAddPaymentPassRequest's completion handler was not called within 0.03 seconds"])
        #expect(wallet.allPasses.isEmpty)
    }
}
#endif
