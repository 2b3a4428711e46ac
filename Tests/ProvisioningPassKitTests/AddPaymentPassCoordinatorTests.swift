#if !canImport(PassKit)
import Foundation
import PassKitShim
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import Testing

/// The coordinator's delegate path, end to end: the test plays Wallet through the shim,
/// the SDK answers through a scripted TMP.
@Suite("Add-pass coordinator on the Linux shim")
@MainActor
struct AddPaymentPassCoordinatorTests {
    static let route = ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation")

    typealias Finish = (outcome: ProvisioningOutcome, status: WalletStatusSnapshot?)

    /// Plays Wallet asking for the card data; returns what the delegate answered.
    func ask(_ sheet: PKAddPaymentPassViewController, nonce: String) async throws -> AddPassRequest {
        let delegate = try #require(sheet.delegate)
        return await withCheckedContinuation { continuation in
            delegate.addPaymentPassViewController(sheet, generateRequestWithCertificateChain: [Data("leaf".utf8), Data("intermediate".utf8)], nonce: Data(nonce.utf8), nonceSignature: Data("signature".utf8)) { request in
                continuation.resume(returning: AddPassRequest(encryptedPassData: request.encryptedPassData, activationData: request.activationData, ephemeralPublicKey: request.ephemeralPublicKey))
            }
        }
    }

    @Test func walletGetsTheSealedCardAndTheAppGetsTheOutcomeAndFreshStatus() async throws {
        let shim = ShimWallet()
        let server = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: [Fixtures.token("DA-NEW", card: "card-1", status: .inactive)])
        try await PassKitShim.withBackend(shim) {
            let wallet = IssuerWallet(client: Fixtures.client(server), passLibrary: PassKitPassLibrary(), activationLinks: Self.route)
            #expect(try await wallet.refreshStatus()["card-1"]?.phone.action == .addToWallet)
            let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)

            let (finished, finish) = AsyncStream.makeStream(of: Finish.self)
            var presented: PKAddPaymentPassViewController?
            let coordinator = AddPaymentPassCoordinator(session: session) { finish.yield(($0, $1)) }
            #expect(coordinator.start { presented = $0 })
            let sheet = try #require(presented)
            let configuration = sheet.passKitShimRequestConfiguration
            #expect(configuration.encryptionScheme == .ECC_V2)
            #expect(configuration.primaryAccountSuffix == "1111")
            #expect(configuration.cardholderName == "Jane Appleseed")
            #expect(configuration.paymentNetwork == .visa)
            #expect(configuration.primaryAccountIdentifier == nil)

            let request = try await ask(sheet, nonce: "nonce-1")
            #expect(request == AddPassRequest(Fixtures.signedCard))
            let sent = try ScriptedTransport.body(of: try #require(server.requests(for: .signCard).first), as: SignedCardRequest.self)
            #expect(sent.externalCardId == "card-1")
            #expect(sent.deviceType == .phone)
            #expect(sent.certificates.map(\.data) == [Data("leaf".utf8), Data("intermediate".utf8)])
            #expect(sent.nonce.data == Data("nonce-1".utf8))

            // Wallet adds the pass and closes the sheet.
            let pass = ShimWallet.pass(serial: "S-NEW", reference: "DA-NEW", account: "PAI-1", state: .requiresActivation)
            shim.update { $0.phone = [pass] }
            try #require(sheet.delegate).addPaymentPassViewController(sheet, didFinishAdding: pass, error: nil)
            var iterator = finished.makeAsyncIterator()
            let end = try #require(await iterator.next())
            #expect(end.outcome == .added(.phone))
            #expect(coordinator.outcome == .added(.phone))
            #expect(end.status?["card-1"]?.phone.state == .requiresActivation)
            #expect(end.status?["card-1"]?.phone.action == .activate)
            #expect(end.status?["card-1"]?.primaryAccountIdentifier == "PAI-1")
        }
    }

    @Test func aSecondRequestFromWalletIsAnsweredAndTheFirstCompletesEmptyOnce() async throws {
        let shim = ShimWallet()
        let gate = AsyncGate()
        let answeredLate = AsyncGate()
        let server = ScriptedTransport { request, _ in
            switch ScriptedTransport.operation(of: request) {
            case .listCards: return ScriptedTransport.json(CardListResponse(cards: [Fixtures.card("card-1")]))
            case .signCard:
                let nonce = try ScriptedTransport.body(of: request, as: SignedCardRequest.self).nonce.data
                if nonce == Data("nonce-1".utf8) {
                    // The first request's answer comes, but only after the second was answered.
                    await gate.wait()
                    defer { answeredLate.open() }
                    return ScriptedTransport.json(Fixtures.signedCard)
                }
                return ScriptedTransport.json(Fixtures.signedCard)
            default: return ScriptedTransport.json([TokenSearchResult]())
            }
        }
        try await PassKitShim.withBackend(shim) {
            let wallet = IssuerWallet(client: Fixtures.client(server), passLibrary: PassKitPassLibrary(), activationLinks: Self.route)
            let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
            var presented: PKAddPaymentPassViewController?
            let coordinator = AddPaymentPassCoordinator(session: session) { _, _ in }
            #expect(coordinator.start { presented = $0 })
            let sheet = try #require(presented)

            let (firstAnswers, firstAnswer) = AsyncStream.makeStream(of: AddPassRequest.self)
            let firstCalls = Locked(0)
            let delegate = try #require(sheet.delegate)
            delegate.addPaymentPassViewController(sheet, generateRequestWithCertificateChain: [Data([1])], nonce: Data("nonce-1".utf8), nonceSignature: Data([3])) { request in
                firstCalls.withValue { $0 += 1 }
                firstAnswer.yield(AddPassRequest(encryptedPassData: request.encryptedPassData, activationData: request.activationData, ephemeralPublicKey: request.ephemeralPublicKey))
            }
            await gate.waitForArrivals(1)
            let second = try await ask(sheet, nonce: "nonce-2")
            #expect(second == AddPassRequest(Fixtures.signedCard))
            var answers = firstAnswers.makeAsyncIterator()
            #expect(await answers.next() == .empty)
            // The first request's handler has run, empty; its answer, arriving now, does not
            // call it again (given time to: the main actor's queue is drained twice over).
            gate.open()
            await answeredLate.wait()
            for _ in 0..<2 { await MainActor.run {}; try await Task.sleep(for: .milliseconds(50)) }
            #expect(firstCalls.current == 1)
            coordinator.addPaymentPassViewController(sheet, didFinishAdding: nil, error: NSError(domain: PKPassKitErrorDomain, code: PKAddPaymentPassError.userCancelled.rawValue))
            firstAnswer.finish()
            #expect(await answers.next() == nil)
        }
    }

    @Test func aSheetFromMakeViewControllerKeepsItsCoordinatorThroughTheFlow() async throws {
        let shim = ShimWallet()
        let server = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: [])
        try await PassKitShim.withBackend(shim) {
            let wallet = IssuerWallet(client: Fixtures.client(server), passLibrary: PassKitPassLibrary(), activationLinks: Self.route)
            let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
            let (finished, finish) = AsyncStream.makeStream(of: Finish.self)
            weak var released: AddPaymentPassCoordinator?
            var sheet: PKAddPaymentPassViewController?
            do {
                // The app keeps the sheet it presents, not the coordinator.
                let coordinator = AddPaymentPassCoordinator(session: session) { finish.yield(($0, $1)) }
                released = coordinator
                sheet = coordinator.makeViewController()
            }
            #expect(released != nil, "the sheet keeps its coordinator")
            let presented = try #require(sheet)
            #expect(presented.delegate != nil)
            #expect(try await ask(presented, nonce: "nonce-1") == AddPassRequest(Fixtures.signedCard))
            #expect(server.requests(for: .signCard).count == 1)
            try #require(presented.delegate).addPaymentPassViewController(presented, didFinishAdding: nil, error: NSError(domain: PKPassKitErrorDomain, code: PKAddPaymentPassError.userCancelled.rawValue))
            var iterator = finished.makeAsyncIterator()
            #expect(try #require(await iterator.next()).outcome == .cancelled)
        }
    }

    @Test func aSheetMadeButNeverPresentedKeepsNothingAliveOnceDropped() async throws {
        let shim = ShimWallet()
        try await PassKitShim.withBackend(shim) {
            let wallet = IssuerWallet(client: Fixtures.client(Fixtures.server(cards: [Fixtures.card("card-1")], tokens: [])), passLibrary: PassKitPassLibrary(), activationLinks: Self.route)
            let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
            weak var released: AddPaymentPassCoordinator?
            var sheet: PKAddPaymentPassViewController?
            do {
                let coordinator = AddPaymentPassCoordinator(session: session) { _, _ in }
                released = coordinator
                sheet = coordinator.makeViewController()
            }
            #expect(sheet?.delegate != nil)
            #expect(released != nil)
            sheet = nil
            #expect(released == nil, "a sheet that never finishes must not keep its coordinator forever")
        }
    }

    @Test func withoutTheEntitlementNothingIsPresented() async throws {
        let shim = ShimWallet()
        shim.update { $0.entitled = false }
        try await PassKitShim.withBackend(shim) {
            let wallet = IssuerWallet(client: Fixtures.client(Fixtures.server(cards: [Fixtures.card("card-1")], tokens: [])), passLibrary: PassKitPassLibrary(), activationLinks: Self.route)
            let coordinator = AddPaymentPassCoordinator(session: try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)) { _, _ in }
            var presented = false
            #expect(coordinator.start { _ in presented = true } == false)
            #expect(presented == false)
        }
    }

    @Test func theUserCancellingIsACancelledOutcome() async throws {
        let shim = ShimWallet()
        try await PassKitShim.withBackend(shim) {
            let wallet = IssuerWallet(client: Fixtures.client(Fixtures.server(cards: [Fixtures.card("card-1")], tokens: [])), passLibrary: PassKitPassLibrary(), activationLinks: Self.route)
            let (finished, finish) = AsyncStream.makeStream(of: Finish.self)
            let coordinator = AddPaymentPassCoordinator(session: try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)) { finish.yield(($0, $1)) }
            var presented: PKAddPaymentPassViewController?
            #expect(coordinator.start { presented = $0 })
            let sheet = try #require(presented)
            try #require(sheet.delegate).addPaymentPassViewController(sheet, didFinishAdding: nil, error: NSError(domain: PKPassKitErrorDomain, code: PKAddPaymentPassError.userCancelled.rawValue))
            var iterator = finished.makeAsyncIterator()
            #expect(try #require(await iterator.next()).outcome == .cancelled)
        }
    }

    /// An app presenting the sheet its own way closes it its own way, once, as Wallet ends.
    @Test func theAppsOwnDismissalRunsOnceAsWalletEnds() async throws {
        let shim = ShimWallet()
        try await PassKitShim.withBackend(shim) {
            let wallet = IssuerWallet(client: Fixtures.client(Fixtures.server(cards: [Fixtures.card("card-1")], tokens: [])), passLibrary: PassKitPassLibrary(), activationLinks: Self.route)
            let (finished, finish) = AsyncStream.makeStream(of: Finish.self)
            let coordinator = AddPaymentPassCoordinator(session: try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)) { finish.yield(($0, $1)) }
            var dismissed: [PKAddPaymentPassViewController] = []
            coordinator.dismissSheet = { dismissed.append($0) }
            var presented: PKAddPaymentPassViewController?
            #expect(coordinator.start { presented = $0 })
            let sheet = try #require(presented)
            #expect(dismissed.isEmpty)
            try #require(sheet.delegate).addPaymentPassViewController(sheet, didFinishAdding: nil, error: NSError(domain: PKPassKitErrorDomain, code: PKAddPaymentPassError.userCancelled.rawValue))
            // At once, not after the outcome's status read.
            #expect(dismissed.count == 1 && dismissed.first === sheet)
            var iterator = finished.makeAsyncIterator()
            #expect(try #require(await iterator.next()).outcome == .cancelled)
            #expect(dismissed.count == 1)
        }
    }
}
#endif
