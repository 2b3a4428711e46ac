#if !canImport(PassKit)
import Foundation
import PassKitShim
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import Testing

/// The README's model, run: buttons from the status, a card added, then activated from its link.
@Suite("README model on the Linux shim")
@MainActor
struct ReadmeModelTests {
    struct FixedSession: CardholderSession {
        func accessToken() async throws -> String { "cardholder-jwt" }
        func userId() async -> String? { "alice" }
    }

    @Test(.timeLimit(.minutes(1))) func theModelShowsButtonsAddsACardAndActivatesIt() async throws {
        let shim = ShimWallet()
        let tokens = Locked<[TokenSearchResult]>([])
        let scripted = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: [])
        let server = ScriptedTransport { request, index in
            // The scripted TMP, but with the tokens this test has made so far.
            if ScriptedTransport.operation(of: request) == .searchTokens {
                let asked = Set(try ScriptedTransport.body(of: request, as: TokenSearchRequest.self).tokenUniqueReferences)
                return ScriptedTransport.json(tokens.current.filter { asked.contains($0.tokenUniqueReference) })
            }
            return try await scripted.send(request)
        }
        try await PassKitShim.withBackend(shim) {
            let client = TMPClient(configuration: .init(baseURL: Fixtures.baseURL), transport: server, clock: ManualClock(), cardholderToken: { try await FixedSession().accessToken() })
            let model = WalletCardsModel(wallet: IssuerWallet(client: client, passLibrary: PassKitPassLibrary(), activationLinks: ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation")))
            // The README's own initializer builds the same pieces, sharing with the extension.
            let fromReadme = WalletCardsModel(tmpURL: Fixtures.baseURL, session: FixedSession())
            #expect(await fromReadme.wallet.client.configuration.baseURL == Fixtures.baseURL)
            #expect(fromReadme.wallet.sharedStorage != nil)

            await model.reload()
            let card = try #require(model.cards.first)
            #expect(WalletCardsModel.buttonTitle(for: card.phone) == "Add to Apple Wallet")
            #expect(WalletCardsModel.buttonTitle(for: card.watch) == nil)

            var sheet: PKAddPaymentPassViewController?
            await model.addToWallet(card, on: .phone) { sheet = $0 }
            let presented = try #require(sheet)
            let delegate = try #require(presented.delegate)
            let answered = await withCheckedContinuation { continuation in
                delegate.addPaymentPassViewController(presented, generateRequestWithCertificateChain: [Data([1])], nonce: Data([2]), nonceSignature: Data([3])) {
                    continuation.resume(returning: $0.encryptedPassData)
                }
            }
            #expect(answered == Fixtures.signedCard.encryptedData.data)

            // Wallet made an inactive token and a pass that needs activation.
            let pass = ShimWallet.pass(serial: "SER-1", reference: "DA-1", account: "PAI-1", state: .requiresActivation)
            shim.update { $0.phone = [pass] }
            tokens.withValue { $0 = [Fixtures.token("DA-1", card: "card-1", status: .inactive)] }
            delegate.addPaymentPassViewController(presented, didFinishAdding: pass, error: nil)
            while model.cards.first?.phone.state != .requiresActivation { await Task.yield() }
            #expect(WalletCardsModel.buttonTitle(for: try #require(model.cards.first).phone) == "Activate card")
            #expect(WalletCardsModel.buttonTitle(for: try #require(model.cards.first).watch) == "Add to Apple Wallet")

            tokens.withValue { $0 = [Fixtures.token("DA-1", card: "card-1", status: .active)] }
            await model.open(URL(string: "bankapp://wallet-activation?serialNumber=SER-1")!)
            #expect(model.message == "Your card is ready for Apple Pay.")
            #expect(WalletCardsModel.buttonTitle(for: try #require(model.cards.first).phone) == "In Wallet")

            await model.open(URL(string: "bankapp://wallet-activation?serialNumber=SER-UNKNOWN")!)
            #expect(model.message == "no pass with that serial number on this iPhone or the paired Apple Watch")
        }
    }

    @Test func theREADMEsSignInScreenReportsAuthorizedOnceAndLeavesASession() async throws {
        let container = AppGroupContainer.url(for: "group.com.bank.app.wallet")
        defer { try? FileManager.default.removeItem(at: container) }
        let screen = BankSignInViewController()
        var results: [PKIssuerProvisioningExtensionAuthorizationResult] = []
        screen.completionHandler = { results.append($0) }
        await screen.signInWithBiometrics()
        screen.cancelTapped()
        #expect(results == [.authorized])
        #expect(screen.error == nil)
        let session = ExtensionSessionStore(secrets: IssuerExtensionConfiguration.bank.secrets).validSession(at: Date())
        #expect(session?.cardholderToken == "jwt-from-face-id")
        #expect(session?.userId == "alice")

        // Signed in before Wallet set the handler: its `didSet` hands the result over.
        let late = BankSignInViewController()
        await late.signInWithBiometrics()
        var lateResults: [PKIssuerProvisioningExtensionAuthorizationResult] = []
        late.completionHandler = { lateResults.append($0) }
        late.cancelTapped()
        #expect(lateResults == [.authorized])
    }
}
#endif
