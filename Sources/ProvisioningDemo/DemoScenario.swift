#if !canImport(PassKit)
import Foundation
import PassKitShim
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import TokenPlatform
import WalletSimulator

/// The demo's sample data: two cardholders, each with test cards of the networks' published
/// test numbers.
public enum DemoData {
    /// This process's run: ids carry it, so runs against one shared database (`--database
    /// postgres://…`) never meet each other's cards, users or tokens.
    public static let run = String(UUID().uuidString.prefix(6)).lowercased()
    /// The first cardholder (iPhone with a paired Apple Watch).
    public static let alice = "alice-\(run)"
    /// The second cardholder, who tries to reach Alice's token.
    public static let bob = "bob-\(run)"
    /// Alice's Visa card, added in the app.
    public static let visaCard = "card-visa-alice-\(run)"
    /// Alice's Mastercard, added from inside Wallet.
    public static let mastercardCard = "card-mc-alice-\(run)"
    /// Bob's own card.
    public static let bobCard = "card-visa-bob-\(run)"
    /// The card art both of Alice's cards use.
    public static let artId = "art-everyday-\(run)"

    /// Loads the art and the three cards through the Lifecycle API; returns a line per card.
    public static func load(into platform: DemoPlatform) async throws -> [String] {
        try await platform.putCardArt(artId, png: DemoArt.png())
        var loaded: [String] = []
        for (id, card) in try cards() {
            let resource = try await platform.putCard(id, card)
            loaded.append("\(id) \(resource.network.rawValue) …\(resource.panLast4) for \(resource.userId)")
        }
        return loaded
    }

    /// The sample cards by id.
    public static func cards() throws -> [(String, CardUpsertRequest)] {
        let expiration = try CardExpiration("12/30")
        return [
            (visaCard, CardUpsertRequest(userId: alice, primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: expiration, cardholderName: "Alice Appleseed", network: .visa, productTitle: "Everyday Visa Debit", artId: artId)),
            (mastercardCard, CardUpsertRequest(userId: alice, primaryAccountNumber: try PrimaryAccountNumber("5555555555554444"), expiration: expiration, cardholderName: "Alice Appleseed", network: .mastercard, productTitle: "World Mastercard", artId: artId)),
            (bobCard, CardUpsertRequest(userId: bob, primaryAccountNumber: try PrimaryAccountNumber("4012888888881881"), expiration: expiration, cardholderName: "Bob Baker", network: .visa, productTitle: "Everyday Visa Debit")),
        ]
    }
}

/// The UI extension's view controller, reduced to what Wallet sees of it.
final class DemoSignInViewController: NSObject, PKIssuerProvisioningExtensionAuthorizationProviding {
    var completionHandler: ((PKIssuerProvisioningExtensionAuthorizationResult) -> Void)?
}

/// The demo's scenario: the README's first command and the end-to-end tests' backbone.
///
/// Everything the issuer writes is the project's real code — the SDK, its PassKit adapters
/// (compiled against the PassKit shim), the TMP server over real HTTP with its real storage —
/// and the parties the issuer cannot be are the simulators: Apple Wallet (device, add sheet,
/// Apple's servers opening the card data) and the card network's token service.
public struct DemoScenario: Sendable {
    /// How long the simulated Wallet waits for the issuer's code, and the clock of the
    /// extension's own budgets.
    ///
    /// `pushprov demo` holds the issuer's code to Apple's budgets (``apple``). A test on a
    /// loaded machine widens them: there each answer can wait behind other work for longer
    /// than Apple allows, and what the test checks is the scenario, not the machine's speed.
    public struct WalletTiming: Sendable {
        /// Wallet's wait for the extension's `status` (Apple: 100 ms).
        public var statusBudget: Duration
        /// Wallet's wait for `passEntries` and `remotePassEntries` (Apple: 20 s).
        public var entriesBudget: Duration
        /// Wallet's wait for the add request, from the extension and from the in-app sheet's
        /// delegate (Apple: 20 s).
        public var requestBudget: Duration
        /// The clock the extension's refresh, art and generation budgets run on.
        public var extensionClock: any Clock<Duration>

        /// Explicit budgets.
        public init(statusBudget: Duration, entriesBudget: Duration, requestBudget: Duration, extensionClock: any Clock<Duration>) {
            self.statusBudget = statusBudget
            self.entriesBudget = entriesBudget
            self.requestBudget = requestBudget
            self.extensionClock = extensionClock
        }

        /// Apple's budgets on the real clock.
        public static var apple: WalletTiming {
            WalletTiming(statusBudget: .milliseconds(100), entriesBudget: .seconds(20), requestBudget: .seconds(20), extensionClock: ContinuousClock())
        }
    }

    /// Where TMP stores its data (`--database`); nil for a temporary SQLite file.
    public var database: String?
    /// Wallet's budgets; Apple's unless a test widens them.
    public var walletTiming: WalletTiming

    /// Creates the scenario.
    public init(database: String? = nil, walletTiming: WalletTiming = .apple) {
        self.database = database
        self.walletTiming = walletTiming
    }

    /// Runs every step, recording each in `trace`. Returns whether all came out as expected.
    @MainActor
    public func run(trace: DemoTrace) async -> Bool {
        let platform: DemoPlatform
        do {
            platform = try await DemoPlatform.start(database: database)
        } catch {
            await trace.step("start", "Start TMP with the token service simulator") { throw error }
            return false
        }
        await run(on: platform, trace: trace)
        await platform.stop()
        return trace.passed
    }

    @MainActor
    private func run(on platform: DemoPlatform, trace: DemoTrace) async {
        let wallet = SimulatedWallet()
        await platform.tokenService.addObserver(WalletTokenObserver(wallet: wallet))
        // Behind PassKit for this task and its children only: installed for the whole
        // process, it would also answer code running beside the demo (another test in the
        // same test process that expects no Wallet).
        await wallet.withInstalled {
            await run(on: platform, wallet: wallet, trace: trace)
        }
    }

    @MainActor
    private func run(on platform: DemoPlatform, wallet: SimulatedWallet, trace: DemoTrace) async {
        let sheet = SimulatedAddPaymentPassSheet(wallet: wallet, pki: platform.pki, network: TokenServicePaymentNetwork(platform.tokenService), budget: walletTiming.requestBudget)
        let route = ActivationLinkRoute(scheme: DemoPlatform.activationLink.scheme, host: DemoPlatform.activationLink.host, path: DemoPlatform.activationLink.path)
        // The App Group container the app shares with its Wallet extensions, and their
        // secret store (a 0600 file here; the Keychain access group on iOS).
        let container = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-appgroup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: container) }
        var extensionConfiguration = IssuerExtensionConfiguration(
            tmpURL: platform.baseURL, containerURL: container, secrets: FileSecretStore(directory: container.appendingPathComponent("secrets"))
        )
        extensionConfiguration.clock = walletTiming.extensionClock
        let alice: IssuerWallet
        let aliceToken: String
        do {
            let token = try platform.cardholderToken(userId: DemoData.alice)
            aliceToken = token
            alice = IssuerWallet(
                client: TMPClient(configuration: .init(baseURL: platform.baseURL), cardholderToken: { token }),
                passLibrary: PassKitPassLibrary(),
                activationLinks: route,
                sharing: WalletExtensionSharing(directory: extensionConfiguration.directory, secrets: extensionConfiguration.secrets, userId: { DemoData.alice })
            )
        } catch {
            await trace.step("start", "Sign Alice in") { throw error }
            return
        }

        let loaded = await trace.step("cards.load", "Back office loads three cards for two cardholders (Lifecycle API) and their art") {
            try await DemoData.load(into: platform).joined(separator: "; ")
        }
        guard loaded else { return }

        await trace.step("status.initial", "Alice's app reads wallet status: nothing added on iPhone or Watch") {
            let status = try await alice.refreshStatus()
            try expect(status.cards.count == 2, "expected Alice's 2 cards, got \(status.cards.count)")
            for card in status.cards {
                try expect(card.phone.state == .notAdded && card.watch.state == .notAdded, "\(card.id): \(card.phone.state)/\(card.watch.state)")
                try expect(card.phone.action == .addToWallet, "\(card.id) offers \(card.phone.action) on iPhone")
            }
            return Self.describe(status)
        }

        var phonePass: SimulatedPass?
        await trace.step("inapp.phone", "In-app: add the Visa card to the iPhone (Wallet's sheet, signed-cards, Apple opens the data, network tokenizes)") {
            let result = try await addInApp(alice, card: DemoData.visaCard, target: .phone, sheet: sheet)
            phonePass = result.pass
            try expect(result.pass?.activationState == .requiresActivation, "pass state \(String(describing: result.pass?.activationState))")
            let stored = try await platform.store.token(reference: result.pass?.deviceAccountIdentifier ?? "")
            try expect(stored?.status == .inactive && stored?.authorizationPath == .yellow, "TMP token \(String(describing: stored?.status))")
            return "yellow path: pass \(result.pass?.serialNumber ?? "?") added, token INACTIVE at TMP; generateRequest answered in \(Self.format(result.generateRequestTime))"
        }

        await trace.step("status.requiresActivation", "Status shows \"Activate card\" for the Visa card on the iPhone") {
            let status = try await alice.refreshStatus()
            let card = try Self.card(status, DemoData.visaCard)
            try expect(card.phone.state == .requiresActivation && card.phone.action == .activate, "\(card.phone.state) / \(card.phone.action)")
            return Self.describe(status)
        }

        await trace.step("activation.link", "The network's deep link opens the app, which activates the pass's token") {
            guard let link = wallet.openedLinks.last else { throw DemoExpectation("the network sent no activation link") }
            let result = try await alice.handleActivationLink(link)
            try expect(result.outcome == .approved, "TMP answered \(result.outcome.rawValue): \(result.comment)")
            await platform.tokenService.drainEvents()
            try expect(wallet.pass(serialNumber: phonePass?.serialNumber ?? "")?.activationState == .activated, "the pass was not activated on the device")
            return "\(link.absoluteString) → APPROVED; pass activated"
        }

        await trace.step("status.active", "Status shows \"In Wallet\" on the iPhone, \"Add to Apple Wallet\" on the Watch") {
            let status = try await alice.refreshStatus()
            let card = try Self.card(status, DemoData.visaCard)
            try expect(card.phone.state == .active && card.phone.action == .inWallet, "iPhone: \(card.phone.state)")
            try expect(card.watch.state == .notAdded && card.watch.action == .addToWallet, "Watch: \(card.watch.state)")
            try expect(card.primaryAccountIdentifier == phonePass?.primaryAccountIdentifier, "primaryAccountIdentifier not learnt from the iPhone pass")
            return Self.describe(status)
        }

        await trace.step("inapp.watch", "In-app: add the same card to the Watch, targeted by primaryAccountIdentifier (green path)") {
            let result = try await addInApp(alice, card: DemoData.visaCard, target: .watch, sheet: sheet, prefer: .phone)
            try expect(result.device == .watch, "the sheet chose \(String(describing: result.device))")
            try expect(result.pass?.activationState == .activated, "pass state \(String(describing: result.pass?.activationState))")
            try expect(result.pass?.primaryAccountIdentifier == phonePass?.primaryAccountIdentifier, "the Watch pass has another account identifier")
            return "green path: pass on the Watch active at once, same primaryAccountIdentifier \(result.pass?.primaryAccountIdentifier ?? "?")"
        }

        await trace.step("extension.add", "From inside Wallet: the extensions sign Alice in and add the Mastercard to the iPhone") {
            _ = try await alice.refreshStatus()
            await alice.sharedStorage?.artFetched()
            let host = SimulatedExtensionHost(
                wallet: wallet, pki: platform.pki, network: TokenServicePaymentNetwork(platform.tokenService),
                statusBudget: walletTiming.statusBudget, entriesBudget: walletTiming.entriesBudget, generateBudget: walletTiming.requestBudget
            )
            let handler = IssuerProvisioningExtensionHandler(configuration: extensionConfiguration)
            let before = await host.status(of: handler)
            try expect(before.violations.isEmpty, "status: \(before.violations.joined(separator: "; "))")
            try expect(before.value?.requiresAuthentication == true, "status before sign-in: \(String(describing: before.value))")
            // The UI extension: the app's own sign-in, then `.authorized` for Wallet.
            let viewController = DemoSignInViewController()
            let flow = ExtensionAuthorizationFlow(reportingTo: viewController, configuration: extensionConfiguration)
            let authorization = await host.authorize(viewController) {
                _ = try? await flow.signIn { SignedInCardholder(cardholderToken: aliceToken, userId: DemoData.alice) }
            }
            try expect(authorization.value == .authorized && authorization.violations.isEmpty, "authorization: \(String(describing: authorization.value)) \(authorization.violations)")
            let status = await host.status(of: handler)
            try expect(status.violations.isEmpty, "status: \(status.violations.joined(separator: "; "))")
            try expect(status.value == .init(requiresAuthentication: false, passEntriesAvailable: true, remotePassEntriesAvailable: true), "status: \(String(describing: status.value))")
            let entries = await host.entries(of: handler, for: .phone)
            try expect(entries.violations.isEmpty, "passEntries: \(entries.violations)")
            try expect(entries.value?.map(\.identifier) == [DemoData.mastercardCard], "iPhone entries: \(entries.value?.map(\.identifier) ?? [])")
            let entry = entries.value![0]
            let added = await host.add(entry, handler: handler)
            if let failure = added.failure { throw DemoExpectation("adding from Wallet failed: \(failure)") }
            guard let pass = added.call.value else { throw DemoExpectation("no pass") }
            // Yellow, like any first device: the network's link activates it in the app.
            guard let link = wallet.openedLinks.last, link.absoluteString.contains(pass.serialNumber) else {
                throw DemoExpectation("no activation link for the pass")
            }
            let activation = try await alice.handleActivationLink(link)
            try expect(activation.outcome == .approved, "activation: \(activation.outcome.rawValue)")
            await platform.tokenService.drainEvents()
            let card = try Self.card(try await alice.refreshStatus(), DemoData.mastercardCard)
            try expect(card.phone.state == .active, "Mastercard on the iPhone: \(card.phone.state)")
            return "status \(Self.format(status.elapsed)) (budget \(String(format: "%g ms", walletTiming.statusBudget / .milliseconds(1)))), entries \(Self.format(entries.elapsed)), request \(Self.format(added.call.elapsed)); \(entry.title) …\(pass.primaryAccountNumberSuffix) added and activated"
        }

        await trace.step("block", "Back office blocks the Visa card: its tokens are suspended on both devices") {
            try await platform.setCardStatus(DemoData.visaCard, .blocked)
            let passes = wallet.allPasses.filter { $0.primaryAccountIdentifier == phonePass?.primaryAccountIdentifier }
            try expect(passes.count == 2 && passes.allSatisfy { $0.activationState == .suspended }, "passes: \(passes.map(\.activationState))")
            let status = try await alice.refreshStatus()
            let card = try Self.card(status, DemoData.visaCard)
            try expect(card.phone.state == .suspended && card.watch.state == .suspended, "\(card.phone.state)/\(card.watch.state)")
            return "iPhone and Watch passes suspended; TMP tokens SUSPENDED"
        }

        await trace.step("unblock", "Back office unblocks it: both tokens active again") {
            try await platform.setCardStatus(DemoData.visaCard, .active)
            let passes = wallet.allPasses.filter { $0.primaryAccountIdentifier == phonePass?.primaryAccountIdentifier }
            try expect(passes.count == 2 && passes.allSatisfy { $0.activationState == .activated }, "passes: \(passes.map(\.activationState))")
            let status = try await alice.refreshStatus()
            let card = try Self.card(status, DemoData.visaCard)
            try expect(card.phone.state == .active && card.watch.state == .active, "\(card.phone.state)/\(card.watch.state)")
            return "both passes active; TMP tokens ACTIVE"
        }

        await trace.step("ownership", "Bob's app cannot see or activate Alice's token") {
            let token = try platform.cardholderToken(userId: DemoData.bob)
            let bob = TMPClient(configuration: .init(baseURL: platform.baseURL, retry: .none), cardholderToken: { token })
            guard let reference = phonePass?.deviceAccountIdentifier else { throw DemoExpectation("no token to try") }
            let found = try await bob.searchTokens([reference])
            try expect(found.isEmpty, "Bob's search returned Alice's token")
            do {
                _ = try await bob.activateToken(tokenUniqueReference: reference)
                throw DemoExpectation("Bob's activation of Alice's token was accepted")
            } catch let error as TMPClientError {
                try expect(error.kind == .server(status: 404), "expected 404, got \(error)")
                return "search: no result; activation: 404 \(error.code)"
            }
        }

        await trace.step("wallet.rules", "Wallet saw no completion handler called again after it had its answer") {
            // A second call after the step that made it had ended (a late answer behind the
            // SDK's own deadline) would crash a real app; each step saw only its own moment.
            await platform.tokenService.drainEvents()
            try expect(wallet.laterViolations.isEmpty, wallet.laterViolations.joined(separator: "; "))
            return "none"
        }
    }

    /// Runs the in-app flow for one card and target through the SDK, its PassKit coordinator
    /// and the simulated sheet: what the app reported and what the sheet saw.
    ///
    /// Throws when the app could not even start (the SDK refused the card or device, or the
    /// sheet could not be created).
    @MainActor
    public static func presentInApp(_ app: IssuerWallet, card: String, target: DeviceType, sheet: SimulatedAddPaymentPassSheet, user: SimulatedAddPaymentPassSheet.UserAction? = nil) async throws -> (outcome: ProvisioningOutcome?, sheet: SimulatedAddPaymentPassSheet.Result) {
        let session = try await app.beginProvisioning(externalCardId: card, target: target)
        let (outcomes, continuation) = AsyncStream.makeStream(of: ProvisioningOutcome.self)
        let coordinator = AddPaymentPassCoordinator(session: session) { outcome, _ in
            continuation.yield(outcome)
            continuation.finish()
        }
        var presented: PKAddPaymentPassViewController?
        guard coordinator.start(presentingWith: { presented = $0 }), let controller = presented else {
            throw DemoExpectation("the app could not create Wallet's add sheet")
        }
        let result = await sheet.present(controller, user: user ?? .add(preferring: target))
        var iterator = outcomes.makeAsyncIterator()
        return (await iterator.next(), result)
    }

    /// ``presentInApp(_:card:target:sheet:user:)`` expecting the card on `target` with no
    /// Wallet rule broken.
    @MainActor
    public func addInApp(_ app: IssuerWallet, card: String, target: DeviceType, sheet: SimulatedAddPaymentPassSheet, prefer: DeviceType? = nil) async throws -> SimulatedAddPaymentPassSheet.Result {
        let (outcome, result) = try await Self.presentInApp(app, card: card, target: target, sheet: sheet, user: .add(preferring: prefer ?? target))
        try expect(result.violations.isEmpty, "Wallet rules broken: \(result.violations.joined(separator: "; "))")
        guard case .added(let device)? = outcome else {
            throw DemoExpectation("the app reported \(String(describing: outcome)); the sheet: \(result.outcome)")
        }
        try expect(device == target, "added to \(device), expected \(target)")
        return result
    }

    /// The card `id` in `status`, or a failure naming it.
    public static func card(_ status: WalletStatusSnapshot, _ id: String) throws -> CardWalletStatus {
        guard let card = status[id] else { throw DemoExpectation("no card \(id) in the status") }
        return card
    }

    static func describe(_ status: WalletStatusSnapshot) -> String {
        status.cards.map { "\($0.id): iPhone \($0.phone.state.rawValue), Watch \($0.watch.state.rawValue)" }.joined(separator: "; ")
    }

    static func format(_ duration: Duration?) -> String {
        guard let duration else { return "—" }
        let milliseconds = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
        return String(format: "%.1f ms", milliseconds)
    }
}
#endif
