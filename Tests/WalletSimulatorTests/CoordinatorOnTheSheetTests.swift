#if !canImport(PassKit)
import Foundation
import PassKitShim
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import Testing
import WalletSimulator

/// The SDK's in-app coordinator answering the simulated add sheet, with TMP scripted.
@Suite("Add-pass coordinator on the simulated sheet", .serialized)
@MainActor
struct CoordinatorOnTheSheetTests {
    let pki: SimulatedApplePKI

    init() throws {
        pki = try SimulatedApplePKI()
    }

    @Test func cancellingWhileTheCardIsBeingSealedIsOneCancelledOutcomeAndAddsNothing() async throws {
        // signed-cards never answers: the app's answer is still on its way when the
        // cardholder cancels, whichever of the two reaches the session first.
        let transport = ScriptedTransport { request, _ in
            switch ScriptedTransport.operation(of: request) {
            case .listCards: return ScriptedTransport.json(CardListResponse(cards: [Fixtures.card("card-1")]))
            case .signCard: return try await ScriptedTransport.hang()
            default: return ScriptedTransport.json([TokenSearchResult]())
            }
        }
        let wallet = SimulatedWallet()
        let network = ScriptedNetwork(.approved(tokenUniqueReference: "DNITHEC", tokenLast4: "1234"))
        try await wallet.withInstalled {
            let app = IssuerWallet(client: Fixtures.client(transport), passLibrary: PassKitPassLibrary(), activationLinks: ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation"))
            #expect(try await app.refreshStatus()["card-1"]?.phone.action == .addToWallet)
            let session = try await app.beginProvisioning(externalCardId: "card-1", target: .phone)
            let reported = Locked<[ProvisioningOutcome]>([])
            let (outcomes, outcome) = AsyncStream.makeStream(of: ProvisioningOutcome.self)
            let coordinator = AddPaymentPassCoordinator(session: session) { result, _ in
                reported.withValue { $0.append(result) }
                outcome.yield(result)
            }
            var presented: PKAddPaymentPassViewController?
            #expect(coordinator.start { presented = $0 })
            // Budget-bounded, so a handler the app never calls cannot hold the test.
            let sheet = SimulatedAddPaymentPassSheet(wallet: wallet, pki: pki, network: network, budget: .seconds(10))
            let result = await sheet.present(try #require(presented), user: .cancelWhileGenerating)

            #expect(result.outcome == .failed(code: .userCancelled, reason: "the user cancelled while the issuer prepared the card data"))
            // The app answered Wallet's pending handler once, after the cancel, and Wallet
            // ignored it; no rule broken.
            #expect(result.ignoredAnswers.count == 1)
            #expect(result.violations.isEmpty)
            var iterator = outcomes.makeAsyncIterator()
            #expect(await iterator.next() == .cancelled)
            // Reported once: give any second report the main actor's turns to arrive.
            for _ in 0..<3 {
                await MainActor.run {}
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(reported.current == [.cancelled])
            #expect(coordinator.outcome == .cancelled)
            #expect(wallet.laterViolations.isEmpty)
            #expect(network.requests.isEmpty)
            #expect(wallet.allPasses.isEmpty)
        }
    }
}
#endif
