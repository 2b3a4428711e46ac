#if !canImport(PassKit)
import Foundation
import PassKitShim
import ProvisioningCrypto
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import TestSupport
import Testing

/// The issuer's two Wallet extensions as Wallet drives them, on the PassKit shim, against the
/// real TMP server over loopback HTTP: the app writes the snapshot, the UI extension signs the
/// cardholder in, the non-UI extension — a subclass supplying only its configuration — answers
/// Wallet through the `PKIssuerProvisioningExtensionHandler` API.
@Suite("Wallet extensions end to end")
struct IssuerExtensionHandlerTests {
    /// The whole non-UI extension of an issuer: its configuration.
    final class BankWalletExtensionHandler: IssuerProvisioningExtensionHandler {
        @TaskLocal static var current: IssuerExtensionConfiguration?

        override class var configuration: IssuerExtensionConfiguration {
            current!
        }
    }

    /// The authorization extension's view controller, as far as Wallet sees it; it records
    /// every result reported to Wallet.
    final class SignInViewController: NSObject, PKIssuerProvisioningExtensionAuthorizationProviding {
        var completionHandler: ((PKIssuerProvisioningExtensionAuthorizationResult) -> Void)?
        let results = Locked<[PKIssuerProvisioningExtensionAuthorizationResult]>([])

        override init() {
            super.init()
            let results = results
            completionHandler = { result in results.withValue { $0.append(result) } }
        }
    }

    // Wallet's side: the completion forms, awaited.
    func status(_ handler: PKIssuerProvisioningExtensionHandler) async -> PKIssuerProvisioningExtensionStatus {
        let box = await withCheckedContinuation { continuation in handler.status { continuation.resume(returning: UncheckedBox($0)) } }
        return box.value
    }

    func entries(_ handler: PKIssuerProvisioningExtensionHandler, remote: Bool) async -> [PKIssuerProvisioningExtensionPaymentPassEntry] {
        let box = await withCheckedContinuation { continuation in
            let done = { (entries: [PKIssuerProvisioningExtensionPassEntry]) in continuation.resume(returning: UncheckedBox(entries)) }
            remote ? handler.remotePassEntries(completion: done) : handler.passEntries(completion: done)
        }
        return box.value.compactMap { $0 as? PKIssuerProvisioningExtensionPaymentPassEntry }
    }

    func generate(_ handler: PKIssuerProvisioningExtensionHandler, _ entry: PKIssuerProvisioningExtensionPaymentPassEntry, certificates: [Data]) async -> PKAddPaymentPassRequest? {
        let calls = Locked(0)
        let box = await withCheckedContinuation { continuation in
            handler.generateAddPaymentPassRequestForPassEntryWithIdentifier(entry.identifier, configuration: entry.addRequestConfiguration, certificateChain: certificates, nonce: Data("wallet-nonce".utf8), nonceSignature: Data("wallet-signature".utf8)) { request in
                calls.withValue { $0 += 1 }
                continuation.resume(returning: UncheckedBox(request))
            }
        }
        #expect(calls.current == 1)
        return box.value
    }

    @Test(.timeLimit(.minutes(1))) func aCardIsOfferedPerDeviceAndSealedForTheDeviceWalletAskedFor() async throws {
        let tmp = try await LiveTMP()
        try await tmp.putCard("card-1", user: "alice", pan: "4111111111111111", art: SampleCardArt.png())
        try await tmp.putCard("card-2", user: "alice", pan: "5555555555554444")
        try await tmp.putCard("card-3", user: "bob", pan: "4000056655665556")
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let shim = ShimWallet()
        let aliceToken = try tmp.jwt("alice")

        try await tmp.run { base in
            try await PassKitShim.withBackend(shim) {
                // Cards without art at TMP get the issuer's generic image.
                let generic: CardArtLoader = .storedArt(fallback: { CGImage(passKitShimWidth: 1536, height: 969, data: Data("generic".utf8)) })
                let configuration = IssuerExtensionConfiguration(tmpURL: base, containerURL: folder.url, secrets: FileSecretStore(directory: folder.url.appendingPathComponent("keychain")), artLoader: generic)

                // The app, signed in as alice, reads the status and shares it with the extensions.
                let app = IssuerWallet(
                    client: TMPClient(configuration: configuration.tmp, cardholderToken: { aliceToken }),
                    passLibrary: PassKitPassLibrary(),
                    activationLinks: ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation"),
                    sharing: WalletExtensionSharing(directory: configuration.directory, secrets: configuration.secrets, userId: { "alice" })
                )
                try await app.refreshStatus()
                await app.sharedStorage?.artFetched()
                #expect(configuration.directory.readSnapshot()?.cards.map(\.externalCardId) == ["card-1", "card-2"])

                // Wallet makes the principal class the way the system does.
                let handler = BankWalletExtensionHandler.$current.withValue(configuration) { BankWalletExtensionHandler() }

                let before = await status(handler)
                #expect(before.requiresAuthentication)
                #expect(before.passEntriesAvailable && before.remotePassEntriesAvailable)

                // The UI extension: the app's sign-in, then `.authorized`, exactly once.
                let viewController = SignInViewController()
                let results = viewController.results
                let flow = await ExtensionAuthorizationFlow(reportingTo: viewController, configuration: configuration)
                #expect(try await flow.signIn { SignedInCardholder(cardholderToken: aliceToken, userId: "alice") })
                #expect(await flow.cancel() == false)
                #expect(results.current == [.authorized])

                let after = await status(handler)
                #expect(!after.requiresAuthentication)

                // iPhone entries, through the network: both of alice's cards, never bob's.
                let phone = await entries(handler, remote: false)
                #expect(phone.map(\.identifier) == ["card-1", "card-2"])
                let first = try #require(phone.first)
                #expect(first.title == "Everyday Debit")
                #expect(first.art.width == 1536 && first.art.height == 969)
                #expect(first.addRequestConfiguration.encryptionScheme == .ECC_V2)
                #expect(first.addRequestConfiguration.cardholderName == "Jane Appleseed")
                #expect(first.addRequestConfiguration.primaryAccountSuffix == "1111")
                #expect(first.addRequestConfiguration.paymentNetwork == .visa)
                #expect(first.addRequestConfiguration.localizedDescription == "Everyday Debit")
                #expect(first.addRequestConfiguration.primaryAccountIdentifier == nil)
                #expect(first.art.passKitShimData == SampleCardArt.png())
                #expect(phone.last?.art.passKitShimData == Data("generic".utf8))

                // Wallet seals card-1 for the iPhone; the token service makes the token.
                let sealed = try #require(await generate(handler, first, certificates: tmp.pki.walletCertificates))
                #expect(sealed.ephemeralPublicKey?.count == 65)
                #expect(try deviceType(of: sealed) == .phone)
                let decision = try await tmp.tokenize(pan: "4111111111111111", activationData: try #require(sealed.activationData), reference: "DAPL-1", device: .phone)
                #expect(decision.decision != .declined)
                shim.update { $0.phone = [ShimWallet.pass(serial: "S1", reference: "DAPL-1", account: "PAI-1", last4: "1111", state: .requiresActivation)] }

                // card-1 is now on the iPhone: it leaves the iPhone list and is offered for the
                // Watch, with the iPhone pass's account.
                #expect(await entries(handler, remote: false).map(\.identifier) == ["card-2"])
                #expect(configuration.directory.readSnapshot()?["card-1"]?.primaryAccountIdentifier == "PAI-1")
                let watch = await entries(handler, remote: true)
                #expect(watch.map(\.identifier) == ["card-1:WATCH", "card-2:WATCH"])
                let onWatch = try #require(watch.first)
                #expect(onWatch.addRequestConfiguration.primaryAccountIdentifier == "PAI-1")
                let sealedForWatch = try #require(await generate(handler, onWatch, certificates: tmp.pki.walletCertificates))
                #expect(try deviceType(of: sealedForWatch) == .watch)

                // Status from the snapshot the last refresh wrote: still something for each device.
                let later = await status(handler)
                #expect(later.passEntriesAvailable && later.remotePassEntriesAvailable)

                // An unknown chain is refused by TMP: Wallet gets nil, once.
                #expect(await generate(handler, first, certificates: [Data([0x30, 0x00])]) == nil)
            }
        }
    }

    @Test func withoutAnAppGroupSnapshotNothingIsOffered() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        await PassKitShim.withBackend(ShimWallet()) {
            let configuration = IssuerExtensionConfiguration(tmpURL: Fixtures.baseURL, containerURL: folder.url, secrets: FileSecretStore(directory: folder.url.appendingPathComponent("keychain")))
            let handler = BankWalletExtensionHandler.$current.withValue(configuration) { BankWalletExtensionHandler() }
            let answer = await status(handler)
            #expect(answer.requiresAuthentication)
            #expect(!answer.passEntriesAvailable && !answer.remotePassEntriesAvailable)
            #expect(await entries(handler, remote: true).isEmpty)
        }
    }

    @MainActor @Test func theAuthorizationFlowReportsCancelOnceAndKeepsTheScreenUpOnAFailedAttempt() async throws {
        struct FaceIDFailed: Error {}
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let viewController = SignInViewController()
        let secrets = FileSecretStore(directory: folder.url)
        let flow = ExtensionAuthorizationFlow(reportingTo: viewController, secrets: secrets)
        await #expect(throws: ExtensionSignIn.Failure.self) {
            try await flow.signIn { throw FaceIDFailed() }
        }
        #expect(viewController.results.current.isEmpty)
        #expect(flow.cancel())
        #expect(try await flow.signIn { SignedInCardholder(cardholderToken: "late", userId: "alice") } == false)
        #expect(viewController.results.current == [.canceled])
        #expect(try secrets.secret(for: ExtensionSessionStore.key) == nil)
    }

    @MainActor @Test func aSignInThatEndsAfterCancelLeavesNoSession() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let viewController = SignInViewController()
        let secrets = FileSecretStore(directory: folder.url)
        let flow = ExtensionAuthorizationFlow(reportingTo: viewController, secrets: secrets)
        let gate = AsyncGate()
        let slowSignIn = Task { @MainActor in
            try await flow.signIn {
                await gate.wait()
                return SignedInCardholder(cardholderToken: "slow", userId: "alice")
            }
        }
        await gate.waitForArrivals(1)
        #expect(flow.cancel())
        gate.open()
        #expect(try await slowSignIn.value == false)
        #expect(viewController.results.current == [.canceled])
        #expect(try secrets.secret(for: ExtensionSessionStore.key) == nil)
    }

    /// The device type TMP sealed for, from the activation data's claims.
    func deviceType(of request: PKAddPaymentPassRequest) throws -> DeviceType {
        let token = String(decoding: try #require(request.activationData), as: UTF8.self)
        let parts = try CompactJWS.parse(token)
        return try JSONDecoder().decode(ActivationDataClaims.self, from: parts.payload).deviceType
    }
}
#endif
