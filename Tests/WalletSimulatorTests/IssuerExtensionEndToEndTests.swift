#if !canImport(PassKit)
import Foundation
import PassKitShim
import ProvisioningCrypto
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import Testing
import TestSupport
import TokenPlatform
import WalletSimulator

/// The issuer's two Wallet extensions as Wallet runs them: the simulated extension host
/// (Apple's budgets, double answers reported) calls the issuer's handler — a subclass that
/// supplies only its configuration — and its sign-in screen; the app, the extensions and the
/// token service talk to the real TMP over loopback HTTP; added cards become tokens at the
/// token service simulator and passes in the simulated Wallet.
@Suite("Wallet extensions end to end", .serialized)
@MainActor
struct IssuerExtensionEndToEndTests {
    /// The issuer's whole non-UI extension: its configuration.
    final class BankWalletExtensionHandler: IssuerProvisioningExtensionHandler {
        @TaskLocal static var current: IssuerExtensionConfiguration?

        override class var configuration: IssuerExtensionConfiguration {
            current!
        }
    }

    /// The issuer's sign-in screen, as far as Wallet sees it.
    final class SignInViewController: NSObject, PKIssuerProvisioningExtensionAuthorizationProviding {
        var completionHandler: ((PKIssuerProvisioningExtensionAuthorizationResult) -> Void)?
    }

    /// Apple's servers hand the opened card to the token service simulator, and this
    /// remembers whether each tokenization carried the issuer's activation data.
    struct TokenServiceNetwork: SimulatedPaymentNetwork {
        let network: TokenServicePaymentNetwork
        let activationData = Locked<[Data?]>([])

        init(simulator: TokenServiceSimulator) {
            network = TokenServicePaymentNetwork(simulator)
        }

        func tokenize(_ card: PassDataPayload, activationData: Data?, deviceType: DeviceType) async -> NetworkTokenization {
            self.activationData.withValue { $0.append(activationData) }
            return await network.tokenize(card, activationData: activationData, deviceType: deviceType)
        }

        func activationLink(tokenUniqueReference: String, serialNumber: String) async -> URL? {
            await network.activationLink(tokenUniqueReference: tokenUniqueReference, serialNumber: serialNumber)
        }
    }

    @Test(.timeLimit(.minutes(5))) func cardsAreOfferedPerDeviceAndAddedFromInsideWallet() async throws {
        let tmp = try await LiveTMP()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-e2e-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let back = LifecycleService(environment: tmp.environment)
        _ = try await back.putCardArt(artId: "everyday", data: TestPNG.file(), contentType: "image/png")
        for (id, user, pan, art) in [("card-1", "alice", "4111111111111111", "everyday"), ("card-2", "alice", "5555555555554444", nil), ("card-3", "bob", "4000056655665556", nil)] {
            let request = CardUpsertRequest(userId: user, primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"), cardholderName: "Jane Appleseed", network: .visa, productTitle: "Everyday Debit", artId: art)
            _ = try await back.putCard(externalCardId: id, request: request)
        }
        let wallet = SimulatedWallet()
        // Apple's budgets (100 ms for status, 20 s for the rest) are not wall-clock assertions
        // here: each answer comes through the main actor, queued behind every other suite's
        // main-actor work, and on two busy cores that has taken more than the 100 ms. This test
        // checks what Wallet is answered and that each completion handler is called once; the
        // host's budget logic is ExtensionHostTests', and status's speed is measured by
        // Benchmarks/extension-status.sh.
        let network = TokenServiceNetwork(simulator: tmp.simulator)
        let host = SimulatedExtensionHost(wallet: wallet, pki: tmp.pki, network: network, statusBudget: .seconds(60), entriesBudget: .seconds(60), generateBudget: .seconds(60))

        try await tmp.run { @MainActor session in
            let base = URL(string: "http://127.0.0.1:\(try #require(session.client.port))/")!
            let aliceToken = try DevelopmentTokenIssuer(key: tmp.cardholderKey).token(userId: "alice", lifetime: 3600, now: tmp.clock.current)
            try await wallet.withInstalled {
                var configuration = IssuerExtensionConfiguration(
                    tmpURL: base,
                    containerURL: folder,
                    secrets: FileSecretStore(directory: folder.appendingPathComponent("keychain")),
                    artLoader: .storedArt(fallback: { CGImage(passKitShimWidth: 1536, height: 969, data: Data("generic".utf8)) })
                )
                configuration.now = { tmp.clock.current }
                // The SDK's own budgets never run out either (their ends are tested with a
                // manual clock in ProvisioningSDKTests), so a slow step cannot drop an entry.
                configuration.clock = ManualClock()

                // The app, signed in as alice, reads the status; IssuerWallet shares it.
                let app = IssuerWallet(
                    client: TMPClient(configuration: configuration.tmp, cardholderToken: { aliceToken }),
                    passLibrary: PassKitPassLibrary(),
                    activationLinks: ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation"),
                    sharing: configuration.sharing(userId: { "alice" })
                )
                try await app.refreshStatus()
                await app.sharedStorage?.artFetched()

                // Wallet launches the extension the way the system does.
                let handler = BankWalletExtensionHandler.$current.withValue(configuration) { BankWalletExtensionHandler() }
                let first = await host.status(of: handler)
                #expect(first.violations.isEmpty)
                #expect(first.value == .init(requiresAuthentication: true, passEntriesAvailable: true, remotePassEntriesAvailable: true))

                // The UI extension: the app's login, reported once.
                let screen = SignInViewController()
                let flow = ExtensionAuthorizationFlow(reportingTo: screen, configuration: configuration)
                let authorized = await host.authorize(screen) {
                    _ = try? await flow.signIn { SignedInCardholder(cardholderToken: aliceToken, userId: "alice") }
                }
                #expect(authorized.value == .authorized)
                #expect(authorized.violations.isEmpty)
                // status answers from the snapshot alone, signed in too: TMP's app routes
                // served nothing meanwhile, by TMP's own count (loopback would fit in any budget).
                @Sendable func appRequests() async throws -> [Substring] {
                    let metrics = try await session.client.reply(.get, "/metrics", headers: [:], body: nil).text
                    return metrics.split(separator: "\n").filter { $0.hasPrefix("pushprov_http_requests_total") && $0.contains("/issuer/push-provisioning") }
                }
                let beforeStatus = try await appRequests()
                #expect(await host.status(of: handler).value?.requiresAuthentication == false)
                #expect(try await appRequests() == beforeStatus, "status asked TMP")

                // iPhone: alice's two cards, never bob's; the art the app stored, or the issuer's generic one.
                let phone = await host.entries(of: handler, for: .phone)
                #expect(phone.violations.isEmpty)
                let entries = try #require(phone.value)
                #expect(entries.map(\.identifier) == ["card-1", "card-2"])
                #expect(entries.allSatisfy { $0.device == .phone }, "passEntries offers for the iPhone")
                let card1 = try #require(entries.first)
                #expect(card1.title == "Everyday Debit")
                #expect(card1.artWidth == 1536 && card1.artHeight == 969)
                #expect(card1.artData == TestPNG.file(), "card-1 shows the art the app stored")
                #expect(entries.last?.artData == Data("generic".utf8), "card-2, which has none, the issuer's generic art")
                #expect(card1.encryptionScheme == "ECC_V2")
                #expect(card1.cardholderName == "Jane Appleseed")
                #expect(card1.primaryAccountSuffix == "1111")
                #expect(card1.paymentNetwork == "Visa")
                #expect(card1.localizedDescription == "Everyday Debit")

                // The cardholder adds card-1 to the iPhone: signed-cards, Apple, the token service.
                let onPhone = await host.add(card1, handler: handler)
                #expect(onPhone.failure == nil)
                #expect(onPhone.call.violations.isEmpty)
                let phonePass = try #require(onPhone.call.value)
                #expect(try await session.tmpToken(phonePass.deviceAccountIdentifier)?.deviceType == .phone)

                // Now card-1 is on the iPhone: offered for the Watch only, with its account.
                #expect(try #require(await host.entries(of: handler, for: .phone).value).map(\.identifier) == ["card-2"])
                let watchEntries = try #require(await host.entries(of: handler, for: .watch).value)
                #expect(watchEntries.map(\.identifier) == ["card-1:WATCH", "card-2:WATCH"])
                #expect(watchEntries.allSatisfy { $0.device == .watch }, "remotePassEntries offers for the Apple Watch")
                let card1OnWatch = try #require(watchEntries.first)
                #expect(card1OnWatch.primaryAccountIdentifier == phonePass.primaryAccountIdentifier)
                let onWatch = await host.add(card1OnWatch, handler: handler)
                #expect(onWatch.failure == nil)
                #expect(onWatch.call.violations.isEmpty)
                let watchPass = try #require(onWatch.call.value)
                #expect(watchPass.primaryAccountIdentifier == phonePass.primaryAccountIdentifier)
                #expect(try await session.tmpToken(watchPass.deviceAccountIdentifier)?.deviceType == .watch)

                // Both adds handed the network the activation data TMP issued (the token
                // service verified it, or it would have declined): without it TMP would still
                // answer yellow (activation_data_missing), and the adds would look the same.
                let handed = network.activationData.current
                #expect(handed.count == 2 && handed.allSatisfy { $0?.isEmpty == false }, "\(handed.map { $0?.count ?? -1 })")

                // card-1 is on both devices; card-2 is still to add on each.
                #expect(try #require(await host.entries(of: handler, for: .watch).value).map(\.identifier) == ["card-2:WATCH"])
                let beforeLast = try await appRequests()
                let last = await host.status(of: handler)
                #expect(try await appRequests() == beforeLast, "status asked TMP")
                #expect(last.violations.isEmpty)
                #expect(last.value == .init(requiresAuthentication: false, passEntriesAvailable: true, remotePassEntriesAvailable: true))
            }
        }
    }
}
#endif
