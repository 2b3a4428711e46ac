#if !canImport(PassKit)
import Crypto
import Foundation
import PassKitShim
import ProvisioningCrypto
import ProvisioningModels
import Synchronization
import Testing
import WalletSimulator

/// A network that answers as told and remembers what it was asked.
final class ScriptedNetwork: SimulatedPaymentNetwork {
    private let answer: NetworkTokenization
    private let asked = Mutex<[(PassDataPayload, Data?, DeviceType)]>([])
    /// Runs inside each tokenization, before the answer (a change the network makes meanwhile).
    private let meanwhile: (@Sendable () async -> Void)?

    init(_ answer: NetworkTokenization, meanwhile: (@Sendable () async -> Void)? = nil) {
        self.answer = answer
        self.meanwhile = meanwhile
    }

    var requests: [(card: PassDataPayload, activationData: Data?, device: DeviceType)] {
        asked.withLock { $0.map { (card: $0.0, activationData: $0.1, device: $0.2) } }
    }

    func tokenize(_ card: PassDataPayload, activationData: Data?, deviceType: DeviceType) async -> NetworkTokenization {
        asked.withLock { $0.append((card, activationData, deviceType)) }
        await meanwhile?()
        return answer
    }

    func activationLink(tokenUniqueReference: String, serialNumber: String) async -> URL? {
        URL(string: "bank://activate?serialNumber=\(serialNumber)")
    }
}

/// An issuer delegate written by hand: seals the card for the leaf it is given, as TMP would.
@MainActor
final class SealingDelegate: NSObject, @preconcurrency PKAddPaymentPassViewControllerDelegate {
    enum Behaviour {
        case seal
        case sealWithOtherNonce
        case answerEmpty
        case answerTwice
        /// Answers, then calls the handler again once the sheet has finished (a late answer
        /// behind a deadline).
        case answerAgainLater
        /// Answers only once the sheet has finished (the cardholder cancelled meanwhile);
        /// once, or twice.
        case answerAfterTheFinish
        case answerTwiceAfterTheFinish
        case neverAnswer
    }

    let behaviour: Behaviour
    let leaf: P256.KeyAgreement.PublicKey
    private(set) var finished: [(pass: PKPaymentPass?, error: NSError?)] = []
    /// For each finish, whether the handler Wallet last gave was still uncalled then.
    private(set) var handlerPendingAtFinish: [Bool] = []
    private var pendingHandler = false
    /// The handler and request ``Behaviour/answerAgainLater`` calls again after the finish.
    private var again: (handler: (PKAddPaymentPassRequest) -> Void, request: PKAddPaymentPassRequest)?

    /// `leaf` is the key of the certificate Wallet hands over (TMP reads it from the chain).
    init(_ behaviour: Behaviour = .seal, leaf: P256.KeyAgreement.PublicKey) {
        self.behaviour = behaviour
        self.leaf = leaf
    }

    func addPaymentPassViewController(_ controller: PKAddPaymentPassViewController, generateRequestWithCertificateChain certificates: [Data], nonce: Data, nonceSignature: Data, completionHandler wallets: @escaping (PKAddPaymentPassRequest) -> Void) {
        pendingHandler = true
        let handler = { [self] (request: PKAddPaymentPassRequest) in
            pendingHandler = false
            wallets(request)
        }
        let request = PKAddPaymentPassRequest()
        switch behaviour {
        case .neverAnswer:
            return
        case .answerEmpty:
            handler(request)
            return
        case .seal, .sealWithOtherNonce, .answerTwice, .answerAgainLater, .answerAfterTheFinish, .answerTwiceAfterTheFinish:
            let payload = try! PassDataPayload(
                primaryAccountNumber: PrimaryAccountNumber("4111111111111111"), expiration: CardExpiration("12/30"), name: "Alice Appleseed",
                nonce: behaviour == .sealWithOtherNonce ? Data("another nonce".utf8) : nonce, nonceSignature: nonceSignature
            )
            let sealed = try! ECCV2.seal(payload.jsonData(), for: leaf)
            request.encryptedPassData = sealed.encryptedData
            request.ephemeralPublicKey = sealed.ephemeralPublicKey
            request.activationData = Data("activation".utf8)
            if behaviour == .answerAfterTheFinish || behaviour == .answerTwiceAfterTheFinish {
                again = (handler, request)
                return
            }
            handler(request)
            if behaviour == .answerTwice { handler(request) }
            if behaviour == .answerAgainLater { again = (handler, request) }
        }
    }

    func addPaymentPassViewController(_ controller: PKAddPaymentPassViewController, didFinishAdding pass: PKPaymentPass?, error: (any Error)?) {
        finished.append((pass, error.map { $0 as NSError }))
        handlerPendingAtFinish.append(pendingHandler)
        // After the finish whatever the machine's load (a fixed delay once came before it).
        if let again {
            self.again = nil
            let twice = behaviour == .answerTwiceAfterTheFinish
            Task { @MainActor in
                again.handler(again.request)
                if twice { again.handler(again.request) }
            }
        }
    }
}

@Suite("Simulated add sheet", .serialized)
@MainActor
struct AddPaymentPassSheetTests {
    let pki: SimulatedApplePKI

    init() throws {
        pki = try SimulatedApplePKI()
    }

    var leaf: P256.KeyAgreement.PublicKey { pki.leafPrivateKey.publicKey }

    func configuration(scheme: PKEncryptionScheme = .ECC_V2, name: String? = "Alice Appleseed", suffix: String? = "1111", account: String? = nil) -> PKAddPaymentPassRequestConfiguration {
        let configuration = PKAddPaymentPassRequestConfiguration(encryptionScheme: scheme)!
        configuration.cardholderName = name
        configuration.primaryAccountSuffix = suffix
        configuration.primaryAccountIdentifier = account
        return configuration
    }

    func present(_ delegate: SealingDelegate, wallet: SimulatedWallet, network: ScriptedNetwork, configuration: PKAddPaymentPassRequestConfiguration? = nil, user: SimulatedAddPaymentPassSheet.UserAction = .add(preferring: .phone), budget: Duration = .seconds(20)) async throws -> SimulatedAddPaymentPassSheet.Result {
        try await wallet.withInstalled {
            let controller = try #require(PKAddPaymentPassViewController(requestConfiguration: configuration ?? self.configuration(), delegate: delegate))
            return await SimulatedAddPaymentPassSheet(wallet: wallet, pki: pki, network: network, budget: budget).present(controller, user: user)
        }
    }

    @Test func yellowPathAddsAPassAwaitingActivationAndOpensTheActivationLink() async throws {
        let wallet = SimulatedWallet()
        let network = ScriptedNetwork(.requiresActivation(tokenUniqueReference: "DNITHE1", tokenLast4: "9876"))
        let delegate = SealingDelegate(leaf: leaf)
        let result = try await present(delegate, wallet: wallet, network: network)
        let pass = try #require(result.pass)
        #expect(result.violations.isEmpty)
        #expect(pass.activationState == .requiresActivation)
        #expect(pass.deviceAccountIdentifier == "DNITHE1")
        #expect(pass.primaryAccountNumberSuffix == "1111")
        #expect(pass.deviceAccountNumberSuffix == "9876")
        #expect(pass.device == .phone)
        #expect(wallet.openedLinks == [URL(string: "bank://activate?serialNumber=\(pass.serialNumber)")!])
        // The network got the card Apple opened and the issuer's activation data.
        #expect(network.requests.count == 1)
        #expect(network.requests.first?.card.primaryAccountNumber.last4 == "1111")
        #expect(network.requests.first?.activationData == Data("activation".utf8))
        // The issuer's delegate heard of it once, with the pass.
        #expect(delegate.finished.count == 1)
        #expect(delegate.finished.first?.pass?.deviceAccountIdentifier == "DNITHE1")
        #expect(delegate.finished.first?.error == nil)
        // And PassKit now lists it on the iPhone.
        let listed = wallet.withInstalled { PKPassLibrary().passes(of: .secureElement) }
        #expect(listed.map(\.serialNumber) == [pass.serialNumber])
    }

    @Test func theSameCardIsKnownByOneAccountIdentifierAndTheSheetOffersOnlyDevicesWithoutIt() async throws {
        let wallet = SimulatedWallet()
        let network = ScriptedNetwork(.approved(tokenUniqueReference: "DNITHE2", tokenLast4: "1234"))
        let first = try await present(SealingDelegate(leaf: leaf), wallet: wallet, network: network)
        let account = try #require(first.pass?.primaryAccountIdentifier)
        // Targeted by the account: the iPhone has it, so only the Watch is offered.
        let second = try await present(SealingDelegate(leaf: leaf), wallet: wallet, network: network, configuration: configuration(account: account), user: .add(preferring: .phone))
        #expect(second.device == .watch)
        #expect(second.pass?.primaryAccountIdentifier == account)
        #expect(second.pass?.activationState == .activated)
        // On both now: nothing left to offer.
        let third = try await present(SealingDelegate(leaf: leaf), wallet: wallet, network: network, configuration: configuration(account: account))
        #expect(third.outcome == .failed(code: .unsupported, reason: "this card is already in Wallet on every device"))
        #expect(network.requests.count == 2)
    }

    @Test func withoutTheAccountIdentifierTheSameCardIsRefusedOnADeviceThatHasIt() async throws {
        let wallet = SimulatedWallet()
        let network = ScriptedNetwork(.approved(tokenUniqueReference: "DNITHE3", tokenLast4: "1234"))
        _ = try await present(SealingDelegate(leaf: leaf), wallet: wallet, network: network)
        let again = try await present(SealingDelegate(leaf: leaf), wallet: wallet, network: network, user: .add(preferring: .phone))
        guard case .failed(let code, let reason) = again.outcome else { Issue.record("added twice"); return }
        #expect(code == .unsupported)
        #expect(reason.contains("already in Wallet on the iPhone"))
        #expect(network.requests.count == 1, "the network is not asked for a card already on the device")
    }

    @Test(arguments: [
        (PKEncryptionScheme.RSA_V2, "Alice", "1111", "encryption scheme RSA_V2 is not ECC_V2"),
        (.ECC_V2, nil, nil, "the configuration names neither the cardholder nor the card's last digits"),
    ] as [(PKEncryptionScheme, String?, String?, String)])
    func refusesAConfigurationWalletWouldNotShow(scheme: PKEncryptionScheme, name: String?, suffix: String?, reason: String) async throws {
        let network = ScriptedNetwork(.approved(tokenUniqueReference: "T", tokenLast4: "1234"))
        let delegate = SealingDelegate(leaf: leaf)
        let result = try await present(delegate, wallet: SimulatedWallet(), network: network, configuration: configuration(scheme: scheme, name: name, suffix: suffix))
        #expect(result.outcome == .failed(code: .unsupported, reason: reason))
        #expect(delegate.finished.count == 1)
        #expect(delegate.finished.first?.error?.domain == PKPassKitErrorDomain)
        #expect(delegate.finished.first?.error?.code == PKAddPaymentPassError.unsupported.rawValue)
        #expect(network.requests.isEmpty)
    }

    @Test func aMissingAnswerEndsTheFlowAtTheBudgetAsSystemCancelled() async throws {
        let delegate = SealingDelegate(.neverAnswer, leaf: leaf)
        let result = try await present(delegate, wallet: SimulatedWallet(), network: ScriptedNetwork(.declined(reason: "unused")), budget: .milliseconds(50))
        #expect(result.outcome == .failed(code: .systemCancelled, reason: "the issuer did not answer within 0.05 seconds"))
        #expect(result.violations.count == 1)
        #expect(result.generateRequestTime == nil)
        #expect(delegate.finished.first?.error?.code == PKAddPaymentPassError.systemCancelled.rawValue)
    }

    @Test func aSecondCallOfTheCompletionHandlerIsAViolation() async throws {
        let result = try await present(SealingDelegate(.answerTwice, leaf: leaf), wallet: SimulatedWallet(), network: ScriptedNetwork(.approved(tokenUniqueReference: "T2", tokenLast4: "1234")))
        #expect(result.pass != nil)
        #expect(result.violations == ["the generateRequest completion handler was called 2 times"])
    }

    @Test func aSecondCallLongAfterTheFirstIsRecordedOnTheWallet() async throws {
        let wallet = SimulatedWallet()
        let result = try await present(SealingDelegate(.answerAgainLater, leaf: leaf), wallet: wallet, network: ScriptedNetwork(.approved(tokenUniqueReference: "T9", tokenLast4: "1234")))
        #expect(result.pass != nil)
        #expect(result.violations.isEmpty, "not yet called again when the sheet finished")
        let deadline = ContinuousClock.now + .seconds(10)
        while wallet.laterViolations.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(wallet.laterViolations == ["the generateRequest completion handler was called 2 times"])
    }

    @Test func anEmptyRequestOrAnotherNonceAddsNothing() async throws {
        let network = ScriptedNetwork(.approved(tokenUniqueReference: "T3", tokenLast4: "1234"))
        let empty = try await present(SealingDelegate(.answerEmpty, leaf: leaf), wallet: SimulatedWallet(), network: network)
        #expect(empty.outcome == .failed(code: .unsupported, reason: "the issuer returned no card data"))
        let replayed = try await present(SealingDelegate(.sealWithOtherNonce, leaf: leaf), wallet: SimulatedWallet(), network: network)
        #expect(replayed.outcome == .failed(code: .unsupported, reason: "the card data does not carry the nonce and signature Wallet sent"))
        #expect(network.requests.isEmpty)
    }

    @Test func aDeclineAddsNothingAndTheUserCanCancel() async throws {
        let wallet = SimulatedWallet()
        let declined = try await present(SealingDelegate(leaf: leaf), wallet: wallet, network: ScriptedNetwork(.declined(reason: "card_blocked")))
        #expect(declined.outcome == .failed(code: .unsupported, reason: "the card network declined the card (card_blocked)"))
        let cancelled = try await present(SealingDelegate(leaf: leaf), wallet: wallet, network: ScriptedNetwork(.declined(reason: "unused")), user: .cancel)
        #expect(cancelled.outcome == .failed(code: .userCancelled, reason: "the user cancelled"))
        #expect(wallet.allPasses.isEmpty)
    }

    @Test func cancellingWhileTheIssuerPreparesTheCardIgnoresItsLaterAnswer() async throws {
        let wallet = SimulatedWallet()
        let network = ScriptedNetwork(.approved(tokenUniqueReference: "T6", tokenLast4: "1234"))
        let delegate = SealingDelegate(.answerAfterTheFinish, leaf: leaf)
        let result = try await present(delegate, wallet: wallet, network: network, user: .cancelWhileGenerating)
        #expect(result.outcome == .failed(code: .userCancelled, reason: "the user cancelled while the issuer prepared the card data"))
        #expect(result.generateRequestCalls == 1)
        // Wallet finished with the handler still pending, once, as cancelled.
        #expect(delegate.handlerPendingAtFinish == [true])
        #expect(delegate.finished.count == 1)
        #expect(delegate.finished.first?.pass == nil)
        #expect(delegate.finished.first?.error?.domain == PKPassKitErrorDomain)
        #expect(delegate.finished.first?.error?.code == PKAddPaymentPassError.userCancelled.rawValue)
        // The answer that came afterwards was ignored, which is no fault.
        #expect(result.ignoredAnswers == ["the generateRequest completion handler was called after the cardholder cancelled; Wallet ignored it"])
        #expect(result.violations.isEmpty)
        #expect(wallet.laterViolations.isEmpty)
        #expect(network.requests.isEmpty)
        #expect(wallet.allPasses.isEmpty)
    }

    @Test func aPendingHandlerCalledTwiceAfterTheCancelIsAViolation() async throws {
        let wallet = SimulatedWallet()
        let result = try await present(SealingDelegate(.answerTwiceAfterTheFinish, leaf: leaf), wallet: wallet, network: ScriptedNetwork(.declined(reason: "unused")), user: .cancelWhileGenerating)
        #expect(result.outcome == .failed(code: .userCancelled, reason: "the user cancelled while the issuer prepared the card data"))
        #expect(result.violations + wallet.laterViolations == ["the generateRequest completion handler was called 2 times"])
        #expect(wallet.allPasses.isEmpty)
    }

    @Test func aPendingHandlerNeverCalledAfterTheCancelIsNoFault() async throws {
        let wallet = SimulatedWallet()
        let result = try await present(SealingDelegate(.neverAnswer, leaf: leaf), wallet: wallet, network: ScriptedNetwork(.declined(reason: "unused")), user: .cancelWhileGenerating, budget: .milliseconds(50))
        #expect(result.outcome == .failed(code: .userCancelled, reason: "the user cancelled while the issuer prepared the card data"))
        #expect(result.violations.isEmpty)
        #expect(result.ignoredAnswers.isEmpty)
    }

    @Test func aTokenTheNetworkChangesWhileItsPassIsBeingAddedArrivesInItsNewState() async throws {
        // TMP may suspend or deactivate a token while it hears of its creation (its card was
        // blocked or closed meanwhile): the device is told before the pass exists.
        let wallet = SimulatedWallet()
        let network = ScriptedNetwork(.approved(tokenUniqueReference: "DNITHE5", tokenLast4: "1234")) {
            #expect(!wallet.setActivationState(.suspended, deviceAccountIdentifier: "DNITHE5"), "no pass yet")
        }
        let result = try await present(SealingDelegate(leaf: leaf), wallet: wallet, network: network)
        #expect(result.pass?.activationState == .suspended)
        #expect(wallet.pass(deviceAccountIdentifier: "DNITHE5")?.activationState == .suspended)
        // A yellow token deactivated meanwhile: the pass is deactivated, and the sheet opens
        // no activation link for it.
        let closed = SimulatedWallet()
        let yellow = ScriptedNetwork(.requiresActivation(tokenUniqueReference: "DNITHE6", tokenLast4: "1234")) {
            closed.setActivationState(.deactivated, deviceAccountIdentifier: "DNITHE6")
        }
        let deactivated = try await present(SealingDelegate(leaf: leaf), wallet: closed, network: yellow)
        #expect(deactivated.pass?.activationState == .deactivated)
        #expect(closed.openedLinks.isEmpty)
    }

    @Test func twoAddsOfOneCardToOneDeviceAtOnceAddItOnce() async throws {
        let wallet = SimulatedWallet(configuration: .init(hasPairedWatch: false))
        let (entered, enter) = AsyncStream.makeStream(of: Void.self)
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        // The first add waits inside its tokenization until the second has ended; a second
        // tokenization (the defect) does not wait, so the test fails rather than hangs.
        let calls = Mutex(0)
        let network = ScriptedNetwork(.approved(tokenUniqueReference: "DNITHE7", tokenLast4: "1234")) {
            guard calls.withLock({ $0 += 1; return $0 }) == 1 else { return }
            enter.yield()
            for await _ in gate { break }
        }
        async let first = present(SealingDelegate(leaf: leaf), wallet: wallet, network: network)
        for await _ in entered { break }
        let second = try await present(SealingDelegate(leaf: leaf), wallet: wallet, network: network)
        open.yield()
        let firstResult = try await first
        #expect(firstResult.pass?.deviceAccountIdentifier == "DNITHE7")
        guard case .failed(let code, let reason) = second.outcome else { Issue.record("added twice: \(second.outcome)"); return }
        #expect(code == .unsupported)
        #expect(reason == "this card is being added to the iPhone already")
        #expect(network.requests.count == 1, "the second add asked the network nothing")
        #expect(wallet.passes(on: .phone).count == 1)
    }

    @Test func withoutTheEntitlementTheSheetCannotBeCreated() async throws {
        let wallet = SimulatedWallet(configuration: .init(hasProvisioningEntitlement: false))
        let made = wallet.withInstalled { PKAddPaymentPassViewController(requestConfiguration: configuration(), delegate: nil) }
        #expect(made == nil)
    }
}
#endif
