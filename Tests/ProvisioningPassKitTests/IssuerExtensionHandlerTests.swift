#if !canImport(PassKit)
import Foundation
import PassKitShim
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import TestSupport
import Testing

/// The issuer's extensions through the `PKIssuerProvisioningExtensionHandler` and
/// authorization APIs, on the PassKit shim, with a scripted TMP. (Against the real TMP, the
/// token service and the simulated Wallet host: WalletSimulatorTests.)
@Suite("Wallet extension adapters on the shim")
struct IssuerExtensionHandlerTests {
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

    /// A view controller whose `completionHandler` Wallet sets only when the test says so.
    final class LateHandlerViewController: NSObject, PKIssuerProvisioningExtensionAuthorizationProviding {
        var completionHandler: ((PKIssuerProvisioningExtensionAuthorizationResult) -> Void)?
        let results = Locked<[PKIssuerProvisioningExtensionAuthorizationResult]>([])

        /// What Wallet does, late.
        func setHandler() {
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

    @Test func aSubclassAnswersWalletThroughTheSDK() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let shim = ShimWallet()
        shim.update { $0.phone = [ShimWallet.pass(serial: "S1", reference: "DA-1", account: "PAI-1", state: .activated)] }
        let server = Fixtures.server(cards: [Fixtures.card("card-1"), Fixtures.card("card-2", last4: "2222")], tokens: [Fixtures.token("DA-1", card: "card-1", status: .active)])
        try await PassKitShim.withBackend(shim) {
            var configuration = IssuerExtensionConfiguration(tmpURL: Fixtures.baseURL, containerURL: folder.url, secrets: FileSecretStore(directory: folder.url.appendingPathComponent("keychain")))
            configuration.transport = server
            // Budgets that never run out: a loaded machine cannot turn a slow step into a
            // missing entry. Their ends are tested with a manual clock (ExtensionEntriesTests).
            configuration.clock = ManualClock()
            try configuration.directory.storeArt(TestPDF.onePage().data, externalCardId: "card-2")
            try ExtensionSessionStore(secrets: configuration.secrets).save(Fixtures.session(now: Date(), lifetime: 300))
            let handler = IssuerProvisioningExtensionHandler(configuration: configuration)

            // card-1 is on the iPhone, so offered for the Watch only; card-2 has PDF art.
            let phone = await entries(handler, remote: false)
            #expect(phone.map(\.identifier) == ["card-2"])
            let entry = try #require(phone.first)
            #expect(entry.art.width == 1536 && entry.art.height == 969)
            #expect(entry.art.passKitShimData == TestPDF.onePage().data)
            #expect(entry.addRequestConfiguration.primaryAccountSuffix == "2222")
            let watch = await entries(handler, remote: true)
            #expect(watch.map(\.identifier) == ["card-1:WATCH", "card-2:WATCH"])
            // card-1 has no art and the issuer no fallback: the plain card stands in, so the
            // entry `status` counted is there (the shim's stand-in carries no bytes).
            let plain = try #require(watch.first { $0.identifier == "card-1:WATCH" })
            #expect(plain.art.width == 1536 && plain.art.height == 969 && plain.art.passKitShimData.isEmpty)

            let onWatch = try #require(watch.first { $0.identifier == "card-2:WATCH" })
            let sealed = try #require(await generate(handler, onWatch, certificates: [Data([1])]))
            #expect(sealed.encryptedPassData == Fixtures.signedCard.encryptedData.data)
            let sent = try ScriptedTransport.body(of: try #require(server.requests(for: .signCard).first), as: SignedCardRequest.self)
            #expect(sent.externalCardId == "card-2")
            #expect(sent.deviceType == .watch)
            let answer = await status(handler)
            #expect(!answer.requiresAuthentication && answer.passEntriesAvailable && answer.remotePassEntriesAvailable)

            // The `async` forms (final on Linux, as overriding them cannot compile on iOS)
            // answer through the completion forms, the SDK's.
            let asyncStatus = await handler.status()
            #expect(!asyncStatus.requiresAuthentication && asyncStatus.passEntriesAvailable && asyncStatus.remotePassEntriesAvailable)
            #expect(await handler.passEntries().map(\.identifier) == ["card-2"])
            #expect(await handler.remotePassEntries().map(\.identifier) == ["card-1:WATCH", "card-2:WATCH"])

            // A loader of the issuer's that gives no image leaves its entry out: Wallet needs art.
            var storedOnly = configuration
            storedOnly.artLoader = CardArtLoader { $0.art.flatMap(CardArtImage.image(from:)) }
            let withoutPlaceholder = IssuerProvisioningExtensionHandler(configuration: storedOnly)
            #expect(await entries(withoutPlaceholder, remote: true).map(\.identifier) == ["card-2:WATCH"])
        }
    }

    @Test(arguments: [(Bool?.some(false), false), (true, true), (nil, true)])
    func theConfigurationsWatchPairingDecidesWhetherTheWatchIsOffered(_ paired: Bool?, _ offered: Bool) async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let shim = ShimWallet()
        try await PassKitShim.withBackend(shim) {
            var configuration = IssuerExtensionConfiguration(tmpURL: Fixtures.baseURL, containerURL: folder.url, secrets: FileSecretStore(directory: folder.url.appendingPathComponent("keychain")))
            configuration.transport = Fixtures.server(cards: [], tokens: [])
            configuration.clock = ManualClock()
            configuration.watchPairing = { paired }
            // No session: the entries come from the snapshot the app left.
            try configuration.directory.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
            try configuration.directory.storeArt(TestPDF.onePage().data, externalCardId: "card-1")
            let handler = IssuerProvisioningExtensionHandler(configuration: configuration)

            #expect(await entries(handler, remote: false).map(\.identifier) == ["card-1"])
            #expect(await entries(handler, remote: true).map(\.identifier) == (offered ? ["card-1:WATCH"] : []))
            let answer = await status(handler)
            #expect(answer.passEntriesAvailable)
            #expect(answer.remotePassEntriesAvailable == offered)
            // Called on the main thread, `status` reads PassKit and the pairing right there.
            let box = UncheckedBox(handler)
            let onMain = await withCheckedContinuation { continuation in
                Task { @MainActor in box.value.status { continuation.resume(returning: UncheckedBox($0)) } }
            }
            #expect(onMain.value.remotePassEntriesAvailable == offered)
        }
    }

    @Test func theConfigurationsSessionMarginIsBoundedAndReachesTheSDK() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        var configuration = IssuerExtensionConfiguration(tmpURL: Fixtures.baseURL, containerURL: folder.url, secrets: FileSecretStore(directory: folder.url))
        #expect(configuration.sessionMargin == .seconds(120))
        configuration.sessionMargin = .seconds(60)
        #expect(configuration.walletExtension(passLibrary: FakePassLibrary()).sessionMargin == .seconds(60))
        configuration.sessionMargin = .seconds(900)
        #expect(configuration.sessionMargin == WalletExtensionConfiguration.maximumSessionMargin)
        configuration.sessionMargin = .seconds(-1)
        #expect(configuration.sessionMargin == .zero)
    }

    @Test func theConfigurationsBudgetsAreBoundedByWallets() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        var configuration = IssuerExtensionConfiguration(tmpURL: Fixtures.baseURL, containerURL: folder.url, secrets: FileSecretStore(directory: folder.url))
        configuration.generationBudget = .seconds(25)
        #expect(configuration.generationBudget == .seconds(19))
        configuration.artBudget = .seconds(20)
        #expect(configuration.artBudget == .seconds(14))
        configuration.refreshBudget = .seconds(30)
        #expect(configuration.refreshBudget == .seconds(19) && configuration.artBudget == .zero)
        configuration.refreshBudget = .seconds(-3)
        #expect(configuration.refreshBudget == .zero)
        let sdk = configuration.walletExtension(passLibrary: FakePassLibrary())
        #expect(sdk.generationBudget == .seconds(19) && sdk.refreshBudget == .zero && sdk.artBudget == .zero)
    }

    /// Linux's stand-in for an App Group container is in the user's own data home: a folder
    /// in the shared temporary directory could be made first by another user, who would then
    /// own what the extension stores.
    @Test func linuxAppGroupContainersAreInTheUsersDataHome() {
        let environment = ProcessInfo.processInfo.environment
        let dataHome =
            environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? URL(fileURLWithPath: $0, isDirectory: true) : nil }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share", isDirectory: true)
        let container = AppGroupContainer.url(for: "group.com.bank.app.wallet")
        #expect(container.standardizedFileURL.path == dataHome.appendingPathComponent("pushprov-app-groups/group.com.bank.app.wallet").standardizedFileURL.path)
        // By default; a data home set on purpose (CI's, a folder of its run) is the user's call.
        if environment["XDG_DATA_HOME"] == nil {
            #expect(!container.standardizedFileURL.path.hasPrefix(FileManager.default.temporaryDirectory.standardizedFileURL.path))
        }
        let secrets = AppGroupContainer.secretStore(keychainAccessGroup: "TEAM.com.bank.shared", container: container)
        #expect(secrets is FileSecretStore)
    }

    @Test func withoutAnAppGroupSnapshotNothingIsOffered() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        await PassKitShim.withBackend(ShimWallet()) {
            let configuration = IssuerExtensionConfiguration(tmpURL: Fixtures.baseURL, containerURL: folder.url, secrets: FileSecretStore(directory: folder.url.appendingPathComponent("keychain")))
            let handler = IssuerProvisioningExtensionHandler(configuration: configuration)
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

    @MainActor @Test func aResultReachedBeforeTheHandlerIsSetIsDeliveredOnceItIs() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let viewController = LateHandlerViewController()
        let secrets = FileSecretStore(directory: folder.url)
        let flow = ExtensionAuthorizationFlow(reportingTo: viewController, secrets: secrets)
        // Signed in before Wallet set the handler: nothing could be told, so nothing counts as told.
        #expect(try await flow.signIn { SignedInCardholder(cardholderToken: "jwt", userId: "alice") } == false)
        #expect(flow.result == .authorized)
        #expect(!flow.isDelivered)
        #expect(try secrets.secret(for: ExtensionSessionStore.key) != nil)

        viewController.setHandler()
        #expect(flow.deliverPendingResult())
        #expect(flow.isDelivered)
        #expect(viewController.results.current == [.authorized])
        // Delivered once: later events change nothing.
        #expect(!flow.deliverPendingResult())
        #expect(!flow.cancel())
        #expect(try await flow.signIn { SignedInCardholder(cardholderToken: "again", userId: "alice") } == false)
        #expect(viewController.results.current == [.authorized])
    }

    @MainActor @Test func aPendingResultIsDeliveredByTheNextAttempt() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let viewController = LateHandlerViewController()
        let secrets = FileSecretStore(directory: folder.url)
        let flow = ExtensionAuthorizationFlow(reportingTo: viewController, secrets: secrets)
        #expect(!flow.cancel())
        #expect(flow.result == .canceled && !flow.isDelivered)

        viewController.setHandler()
        let signInRan = Locked(false)
        // The cardholder taps again: the pending cancel reaches Wallet; no sign-in runs.
        #expect(try await flow.signIn {
            signInRan.withValue { $0 = true }
            return SignedInCardholder(cardholderToken: "jwt", userId: "alice")
        } == false)
        #expect(viewController.results.current == [.canceled])
        #expect(flow.isDelivered)
        #expect(!signInRan.current)
        #expect(try secrets.secret(for: ExtensionSessionStore.key) == nil)
        #expect(!flow.cancel())
        #expect(viewController.results.current == [.canceled])
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
}
#endif
