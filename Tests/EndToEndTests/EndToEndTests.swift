#if !canImport(PassKit)
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PassKitShim
import ProvisioningCrypto
import ProvisioningDemo
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import Testing
import TokenPlatform
import WalletSimulator

/// One cardholder's world for an end-to-end test: TMP with the token service simulator, the
/// sample cards, an iPhone + Watch Wallet, Wallet's sheet and the issuer app's SDK.
@MainActor
final class World {
    let platform: DemoPlatform
    let wallet = SimulatedWallet()
    let sheet: SimulatedAddPaymentPassSheet
    let alice: IssuerWallet

    init(tokenServiceNow: @escaping @Sendable () -> Date = { Date() }, tokenEvents: TokenEventDeliveryMode = .background, network: ((DemoPlatform) -> any SimulatedPaymentNetwork)? = nil, pki: SimulatedApplePKI? = nil, recheckDelays: [Duration] = IssuerWallet.defaultRecheckDelays) async throws {
        platform = try await DemoPlatform.start(tokenServiceNow: tokenServiceNow, tokenEvents: tokenEvents)
        _ = try await DemoData.load(into: platform)
        await platform.tokenService.addObserver(WalletTokenObserver(wallet: wallet))
        sheet = SimulatedAddPaymentPassSheet(wallet: wallet, pki: pki ?? platform.pki, network: network?(platform) ?? TokenServicePaymentNetwork(platform.tokenService))
        alice = try Self.app(for: DemoData.alice, platform: platform, recheckDelays: recheckDelays)
    }

    static func app(for user: String, platform: DemoPlatform, recheckDelays: [Duration] = IssuerWallet.defaultRecheckDelays) throws -> IssuerWallet {
        let token = try platform.cardholderToken(userId: user)
        let link = DemoPlatform.activationLink
        return IssuerWallet(
            client: TMPClient(configuration: .init(baseURL: platform.baseURL, retry: .none), cardholderToken: { token }),
            passLibrary: PassKitPassLibrary(),
            activationLinks: ActivationLinkRoute(scheme: link.scheme, host: link.host, path: link.path),
            recheckDelays: recheckDelays
        )
    }

    /// Runs `body` with this world's Wallet behind PassKit, then stops the server.
    func run(_ body: @MainActor (World) async throws -> Void) async throws {
        do {
            try await wallet.withInstalled { try await body(self) }
        } catch {
            await platform.stop()
            throw error
        }
        await platform.stop()
    }

    func add(_ card: String = DemoData.visaCard, to target: DeviceType = .phone, user: SimulatedAddPaymentPassSheet.UserAction? = nil) async throws -> (outcome: ProvisioningOutcome?, sheet: SimulatedAddPaymentPassSheet.Result) {
        try await DemoScenario.presentInApp(alice, card: card, target: target, sheet: sheet, user: user)
    }

    func tokens(_ card: String = DemoData.visaCard) async throws -> [TokenRecord] {
        try await platform.store.tokens(externalCardId: card)
    }

    func audit(_ card: String = DemoData.visaCard) async throws -> [String] {
        try await platform.store.auditEntries(subject: "card:\(card)").map(\.action)
    }
}

/// A network that lets a test act just before the token service sees the card.
struct InterceptingNetwork: SimulatedPaymentNetwork {
    let inner: TokenServicePaymentNetwork
    let before: @Sendable (PassDataPayload, Data?) async -> Void
    var tokenizeTwice = false

    func tokenize(_ card: PassDataPayload, activationData: Data?, deviceType: DeviceType) async -> NetworkTokenization {
        await before(card, activationData)
        let first = await inner.tokenize(card, activationData: activationData, deviceType: deviceType)
        guard tokenizeTwice else { return first }
        return await inner.tokenize(card, activationData: activationData, deviceType: deviceType)
    }

    func activationLink(tokenUniqueReference: String, serialNumber: String) async -> URL? {
        await inner.activationLink(tokenUniqueReference: tokenUniqueReference, serialNumber: serialNumber)
    }
}

/// A network that turns the first `declines` cards away, then asks `inner`.
struct FlakyNetwork: SimulatedPaymentNetwork {
    let inner: any SimulatedPaymentNetwork
    let declines: Locked<Int>

    func tokenize(_ card: PassDataPayload, activationData: Data?, deviceType: DeviceType) async -> NetworkTokenization {
        let decline = declines.withValue { left -> Bool in
            guard left > 0 else { return false }
            left -= 1
            return true
        }
        if decline { return .declined(reason: "network_busy") }
        return await inner.tokenize(card, activationData: activationData, deviceType: deviceType)
    }

    func activationLink(tokenUniqueReference: String, serialNumber: String) async -> URL? {
        await inner.activationLink(tokenUniqueReference: tokenUniqueReference, serialNumber: serialNumber)
    }
}

@Suite("End to end", .serialized)
@MainActor
struct EndToEndTests {
    @Test func theDemoScenarioPassesEveryStep() async throws {
        let trace = DemoTrace()
        let passed = await DemoScenario(walletTiming: .lenient).run(trace: trace)
        #expect(passed, "\(trace.steps.filter { !$0.passed }.map { "\($0.name): \($0.detail)" })")
        #expect(trace.steps.map(\.name) == [
            "cards.load", "status.initial", "inapp.phone", "status.requiresActivation", "activation.link", "status.active",
            "inapp.watch", "extension.add", "block", "unblock", "ownership", "wallet.rules",
        ])
    }

    /// The demo's Wallet answers PassKit for the demo alone: code running beside it in the
    /// same process (another test, expecting no Wallet) sees none. (Before, the demo installed
    /// its Wallet for the whole process while it ran.)
    @Test func theDemosWalletIsNotSeenOutsideTheDemo() async throws {
        let done = Locked(false)
        let demo = Task.detached {
            defer { done.withValue { $0 = true } }
            return await DemoScenario(walletTiming: .lenient).run(trace: DemoTrace())
        }
        var looks = 0
        var sawWallet = false
        while !done.current {
            if PKPassLibrary.isPassLibraryAvailable() { sawWallet = true }
            looks += 1
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await demo.value, "the demo passed")
        #expect(looks > 10, "looked while the demo ran")
        #expect(!sawWallet, "a Wallet answered outside the demo")
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["PUSHPROV_TEST_POSTGRES_URL"] != nil, "set PUSHPROV_TEST_POSTGRES_URL (scripts/postgres-dev.sh start) to run the demo on PostgreSQL"))
    func theDemoScenarioPassesOnPostgreSQL() async throws {
        let url = try #require(ProcessInfo.processInfo.environment["PUSHPROV_TEST_POSTGRES_URL"])
        let trace = DemoTrace()
        let passed = await DemoScenario(database: url, walletTiming: .lenient).run(trace: trace)
        #expect(passed, "\(trace.steps.filter { !$0.passed }.map { "\($0.name): \($0.detail)" })")
    }

    @Test func aBlockedCardIsRefusedBeforeAnythingIsSealed() async throws {
        try await World().run { world in
            try await world.platform.setCardStatus(DemoData.visaCard, .blocked)
            _ = try await world.alice.refreshStatus()
            let failure = await #expect(throws: ProvisioningFailure.self) { try await world.add() }
            guard case .notEligible(let why) = failure else {
                Issue.record("refused for another reason than the card's status: \(String(describing: failure))")
                return
            }
            #expect(why.localizedCaseInsensitiveContains("blocked"), "\(why)")
            #expect(try await world.tokens().isEmpty)
            #expect(!(try await world.audit()).contains("card.seal"))
            #expect(world.wallet.allPasses.isEmpty)
        }
    }

    @Test func anExpiredCardIsRefusedBySignedCards() async throws {
        try await World().run { world in
            var card = try #require(try DemoData.cards().first { $0.0 == DemoData.visaCard }?.1)
            card.expiration = try CardExpiration("01/20")
            try await world.platform.putCard(DemoData.visaCard, card)
            let (outcome, sheet) = try await world.add()
            guard case .failed(.server(let error))? = outcome else { Issue.record("outcome \(String(describing: outcome))"); return }
            #expect(error.code == "card_expired")
            #expect(sheet.outcome == .failed(code: .unsupported, reason: "the issuer returned no card data"))
            #expect(try await world.tokens().isEmpty)
            #expect(!(try await world.audit()).contains("card.seal"))
        }
    }

    @Test func aCardUnknownToTMPAtDecisionTimeIsDeclined() async throws {
        // The back office replaces the card's number after Wallet got the sealed data: the
        // network asks TMP about a number it no longer has.
        try await World(network: { platform in
            InterceptingNetwork(inner: TokenServicePaymentNetwork(platform.tokenService), before: { _, _ in
                var card = try! DemoData.cards().first { $0.0 == DemoData.visaCard }!.1
                card.primaryAccountNumber = try! PrimaryAccountNumber("4000056655665556")
                _ = try? await platform.putCard(DemoData.visaCard, card)
            })
        }).run { world in
            let (outcome, sheet) = try await world.add()
            #expect(sheet.outcome == .failed(code: .unsupported, reason: "the card network declined the card (card_unknown)"))
            guard case .failed? = outcome else { Issue.record("outcome \(String(describing: outcome))"); return }
            #expect(try await world.tokens().isEmpty)
            #expect(world.wallet.allPasses.isEmpty)
        }
    }

    @Test func anUntrustedChainIsRefusedByTMP() async throws {
        try await World(pki: try SimulatedApplePKI()).run { world in
            let (outcome, sheet) = try await world.add()
            guard case .failed(.server(let error))? = outcome else { Issue.record("outcome \(String(describing: outcome))"); return }
            #expect(error.code == "certificate_chain_refused")
            #expect(error.message.hasPrefix("untrusted_root"))
            #expect(sheet.pass == nil)
            #expect(try await world.tokens().isEmpty)
            #expect(!(try await world.audit()).contains("card.seal"))
        }
    }

    @Test func theServerGoingAwayMidFlowEndsTheFlowWithAnErrorInsideWalletsBudget() async throws {
        let world = try await World()
        try await world.wallet.withInstalled {
            _ = try await world.alice.refreshStatus()
            await world.platform.stop()
            let (outcome, sheet) = try await world.add()
            guard case .failed(.server(let error))? = outcome else { Issue.record("outcome \(String(describing: outcome))"); return }
            #expect(error.kind == .unreachable)
            #expect(sheet.violations.isEmpty, "Wallet got its answer in time")
            #expect(sheet.outcome == .failed(code: .unsupported, reason: "the issuer returned no card data"))
        }
    }

    @Test func theNetworkDecliningOrTimingOutAddsNothing() async throws {
        try await World().run { world in
            await world.platform.tokenService.setFaults(TokenServiceFaults(declineTokenization: "risk_decline"))
            let declined = try await world.add()
            #expect(declined.sheet.outcome == .failed(code: .unsupported, reason: "the card network declined the card (risk_decline)"))
            await world.platform.tokenService.setFaults(TokenServiceFaults(timeOut: [.tokenizationDecision], hangDuration: .milliseconds(10)))
            let timedOut = try await world.add()
            #expect(timedOut.sheet.outcome == .failed(code: .unsupported, reason: "the card network declined the card (issuer_timeout)"))
            #expect(try await world.tokens().isEmpty)
            #expect(world.wallet.allPasses.isEmpty)
            // Both attempts were sealed and recorded; neither made a token.
            #expect(try await world.audit().filter { $0 == "card.seal" }.count == 2)
        }
    }

    @Test func replayedActivationDataMakesNoSecondToken() async throws {
        try await World(network: { platform in
            var network = InterceptingNetwork(inner: TokenServicePaymentNetwork(platform.tokenService), before: { _, _ in })
            network.tokenizeTwice = true
            return network
        }).run { world in
            let (_, sheet) = try await world.add()
            #expect(sheet.outcome == .failed(code: .unsupported, reason: "the card network declined the card (activation_data_replayed)"))
            // The first tokenization made one token; the replay made none.
            #expect(try await world.tokens().count == 1)
        }
    }

    @Test func expiredActivationDataIsDeclined() async throws {
        try await World(tokenServiceNow: { Date().addingTimeInterval(3600) }).run { world in
            let (_, sheet) = try await world.add()
            guard case .failed(_, let reason) = sheet.outcome else { Issue.record("added"); return }
            #expect(reason.contains("activation_data_expired"), "\(reason)")
            #expect(try await world.tokens().isEmpty)
        }
    }

    @Test func anotherCardholderCannotActivateTheToken() async throws {
        try await World().run { world in
            let (_, sheet) = try await world.add()
            let pass = try #require(sheet.pass)
            // Bob's app, on Bob's own iPhone, gets Alice's link: the pass is not on his devices…
            let bobsWallet = SimulatedWallet()
            let platform = world.platform
            let link = try #require(world.wallet.openedLinks.last)
            let (bob, refusal) = try await bobsWallet.withInstalled { () async throws -> (IssuerWallet, ActivationError.Kind?) in
                let bob = try World.app(for: DemoData.bob, platform: platform)
                do {
                    _ = try await bob.handleActivationLink(link)
                    return (bob, nil)
                } catch let error as ActivationError {
                    return (bob, error.kind)
                } catch {
                    return (bob, nil)
                }
            }
            #expect(refusal == .unknownPass)
            // …and asking TMP directly for Alice's token answers 404.
            let direct = await #expect(throws: TMPClientError.self) { try await bob.client.activateToken(tokenUniqueReference: pass.deviceAccountIdentifier) }
            #expect(direct?.kind == .server(status: 404) && direct?.code == "token_not_found", "\(String(describing: direct))")
            #expect(try await world.platform.store.token(reference: pass.deviceAccountIdentifier)?.status == .inactive)
            #expect(!(try await world.platform.store.auditEntries(subject: "token:\(pass.deviceAccountIdentifier)")).map(\.action).contains("token.activate"))
        }
    }

    @Test func theCardholderPickingTheWatchInWalletsSheetGetsTheCardOnTheWatch() async throws {
        // The app asks for the iPhone; the card is on neither device, so Wallet's sheet offers
        // both and the cardholder picks the Watch after the app sealed the card for "PHONE".
        try await World().run { world in
            _ = try await world.alice.refreshStatus()
            let (outcome, sheet) = try await world.add(to: .phone, user: .add(preferring: .watch))
            #expect(sheet.device == .watch)
            #expect(sheet.violations.isEmpty)
            #expect(outcome == .added(.watch))
            let pass = try #require(sheet.pass)
            #expect(world.wallet.passes(on: .watch).map(\.serialNumber) == [pass.serialNumber])
            #expect(world.wallet.passes(on: .phone).isEmpty)
            // TMP knows the token as the Watch's, waiting for activation in the app (the first
            // device of this card, so the yellow path), and the status says so per device.
            let token = try #require(try await world.platform.store.token(reference: pass.deviceAccountIdentifier))
            #expect(token.deviceType == .watch && token.status == .inactive)
            let card = try #require(try await world.alice.refreshStatus()[DemoData.visaCard])
            #expect(card.watch.state == .requiresActivation && card.phone.state == .notAdded)
        }
    }

    @Test func passKitsFalseNoForTheWatchIsOvercomeByTheAppsWordOnThePairing() async throws {
        // PassKit says the card cannot be added once it is on the iPhone, though the paired
        // Watch lacks it. Without the app's word, the Watch offers nothing; with it, "Add".
        try await World().run { world in
            world.wallet.setConfiguration(.init(canAddAnswersFalseWhileTheWatchLacksTheCard: true))
            _ = try await world.alice.refreshStatus()
            let (outcome, _) = try await world.add()
            #expect(outcome == .added(.phone))
            let unaware = try #require(try await world.alice.refreshStatus()[DemoData.visaCard])
            #expect(unaware.watch.state == .notAdded && unaware.watch.action == .none, "\(unaware.watch)")
            let token = try world.platform.cardholderToken(userId: DemoData.alice)
            let link = DemoPlatform.activationLink
            let aware = IssuerWallet(
                client: TMPClient(configuration: .init(baseURL: world.platform.baseURL, retry: .none), cardholderToken: { token }),
                passLibrary: PassKitPassLibrary(watchPairing: { true }),
                activationLinks: ActivationLinkRoute(scheme: link.scheme, host: link.host, path: link.path)
            )
            let told = try #require(try await aware.refreshStatus()[DemoData.visaCard])
            #expect(told.watch.state == .notAdded && told.watch.action == .addToWallet, "\(told.watch)")
            // And the sheet does put it on the Watch.
            let watch = try await DemoScenario.presentInApp(aware, card: DemoData.visaCard, target: .watch, sheet: world.sheet, user: nil)
            #expect(watch.outcome == .added(.watch))
        }
    }

    @Test func whereCanAddPaymentPassIsTrueButWalletCannotAddTheAddEndsUnsupportedAndSealsNothing() async throws {
        // Some iPads: a pass library, canAddPaymentPass true, the sheet made, nothing added.
        // PassKit gives the app no way to tell beforehand, so the status still offers the
        // add; the flow ends with Wallet's unsupported, which the app can show as such.
        try await World().run { world in
            world.wallet.setConfiguration(.init(hasPairedWatch: false, canAddPaymentPassAnswersTrueThoughNothingCanBeAdded: true))
            let before = try #require(try await world.alice.refreshStatus()[DemoData.visaCard])
            #expect(before.phone.action == .addToWallet)
            let (outcome, sheet) = try await world.add()
            #expect(sheet.outcome == .failed(code: .unsupported, reason: "this device cannot add payment cards to Wallet"))
            #expect(sheet.generateRequestCalls == 0)
            #expect(outcome == .failed(.wallet(WalletAddError(.unsupported))))
            guard case .failed(let failure)? = outcome else { return }
            #expect(failure.code == "wallet_unsupported")
            #expect(failure.description == "Wallet cannot add this card on this device")
            #expect(world.wallet.allPasses.isEmpty)
            #expect(try await world.tokens().isEmpty)
            #expect(!(try await world.audit()).contains("card.seal"), "the card was sealed for a device that cannot add it")
        }
    }

    @Test func walletAskingAgainInOneFlowGetsAFreshlySealedCardAndOneToken() async throws {
        // Apple may call generateRequest a second time in one flow: here after the network
        // turned the first card data away. The SDK seals again for the new nonce, answers each
        // handler once, and the flow ends added, with one token.
        try await World().run { world in
            let declines = Locked(1)
            let flaky = FlakyNetwork(inner: TokenServicePaymentNetwork(world.platform.tokenService), declines: declines)
            let sheet = SimulatedAddPaymentPassSheet(wallet: world.wallet, pki: world.platform.pki, network: flaky, generateRequestAttempts: 2)
            _ = try await world.alice.refreshStatus()
            let (outcome, result) = try await DemoScenario.presentInApp(world.alice, card: DemoData.visaCard, target: .phone, sheet: sheet, user: nil)
            #expect(outcome == .added(.phone))
            #expect(result.generateRequestCalls == 2)
            #expect(result.violations.isEmpty)
            #expect(world.wallet.laterViolations.isEmpty)
            #expect(try await world.audit().filter { $0 == "card.seal" }.count == 2)
            #expect(try await world.tokens().count == 1)
        }
    }

    @Test func aCardJustAddedIsNotOfferedAgainBeforeTMPHearsOfItsToken() async throws {
        // The network's events reach TMP after Wallet's sheet has closed (held back here until
        // the test lets them go): the pass is in Wallet, and TMP does not know its token yet.
        try await World(tokenEvents: .manual, recheckDelays: Array(repeating: .milliseconds(25), count: 400)).run { world in
            _ = try await world.alice.refreshStatus()
            let (outcome, sheet) = try await world.add()
            #expect(outcome == .added(.phone))
            let pass = try #require(sheet.pass)
            #expect(try await world.platform.store.token(reference: pass.deviceAccountIdentifier) == nil)
            // The window: an app that did not see the add (another instance) offers the card again.
            let unaware = try #require(try await World.app(for: DemoData.alice, platform: world.platform).refreshStatus()[DemoData.visaCard])
            #expect(unaware.phone.action == .addToWallet && unaware.primaryAccountIdentifier == nil)
            // The app that added it keeps the pass for the card: not offered again, not offered
            // for activation yet (TMP would not know the token), and the Watch can be added.
            let status = try #require(await world.alice.latestStatus?[DemoData.visaCard])
            #expect(status.phone.state == .requiresActivation && status.phone.action == .none && status.phone.awaitingIssuer)
            #expect(status.phone.pass?.deviceAccountIdentifier == pass.deviceAccountIdentifier)
            #expect(status.primaryAccountIdentifier == pass.primaryAccountIdentifier)
            #expect(status.watch.action == .addToWallet)
            let (watchOutcome, watchSheet) = try await world.add(to: .watch)
            #expect(watchOutcome == .added(.watch))
            #expect(watchSheet.violations.isEmpty)
            #expect(await world.alice.passesAwaitingIssuer.count == 2)

            // TMP hears of both tokens; the app's own rechecks publish TMP's word.
            await world.platform.tokenService.drainEvents()
            let deadline = ContinuousClock.now + .seconds(10)
            while await !world.alice.passesAwaitingIssuer.isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(await world.alice.passesAwaitingIssuer.isEmpty)
            let known = try #require(await world.alice.latestStatus?[DemoData.visaCard])
            #expect(known.phone.state == .requiresActivation && known.phone.action == .activate && !known.phone.awaitingIssuer)
            #expect(known.watch.pass?.serialNumber == watchSheet.pass?.serialNumber && !known.watch.awaitingIssuer)
            #expect(try await world.tokens().count == 2)
        }
    }

    @Test func anActivationLinkAheadOfTheNetworksEventWaitsForTMPToKnowTheToken() async throws {
        // Wallet opens the app's activation link right after the add, before the network's
        // CREATED event has reached TMP (held back here).
        try await World(tokenEvents: .manual).run { world in
            // Once told to, the token service's events go to TMP when TMP has just answered
            // an activation 404: the app then knows only by asking again.
            let releaseOnNotFound = Locked(false)
            let releases = Locked<[Task<Void, Never>]>([])
            let platform = world.platform
            let token = try platform.cardholderToken(userId: DemoData.alice)
            let link = DemoPlatform.activationLink
            let app = IssuerWallet(
                client: TMPClient(configuration: .init(baseURL: platform.baseURL, retry: .none), cardholderToken: { token }) { event in
                    guard event.operation == .activateToken, event.kind == .answered(status: 404), releaseOnNotFound.current else { return }
                    releases.withValue { $0.append(Task { await platform.tokenService.drainEvents() }) }
                },
                passLibrary: PassKitPassLibrary(),
                activationLinks: ActivationLinkRoute(scheme: link.scheme, host: link.host, path: link.path),
                recheckDelays: Array(repeating: .milliseconds(250), count: 3)
            )
            _ = try await app.refreshStatus()
            let (outcome, sheet) = try await DemoScenario.presentInApp(app, card: DemoData.visaCard, target: .phone, sheet: world.sheet)
            #expect(outcome == .added(.phone))
            let pass = try #require(sheet.pass)
            let activationLink = try #require(world.wallet.openedLinks.last)
            // TMP never hears of it within the retries: a clear error, nothing activated.
            let early = await #expect(throws: ActivationError.self) { try await app.handleActivationLink(activationLink) }
            #expect(early?.kind == .awaitingIssuer)
            #expect(early?.clientError?.code == "token_not_found")
            #expect(try await platform.store.token(reference: pass.deviceAccountIdentifier) == nil)
            // TMP hears of it after its first 404: the app's next try goes through.
            releaseOnNotFound.withValue { $0 = true }
            let result = try await app.handleActivationLink(activationLink)
            for release in releases.current { await release.value }
            #expect(!releases.current.isEmpty, "TMP never answered 404: the wait was not exercised")
            #expect(result.outcome == .approved)
            #expect(try await platform.store.token(reference: pass.deviceAccountIdentifier)?.status == .active)
            #expect(result.status?[DemoData.visaCard]?.phone.state == .active)
        }
    }

    @Test func changesTheDeviceOrTheCardholderMakeReachTMPAndTheApp() async throws {
        // Not TMP's commands: the network suspends a lost device's token and resumes it once
        // the device is found; the cardholder removes the pass from Wallet.
        try await World().run { world in
            _ = try await world.alice.refreshStatus()
            let (outcome, sheet) = try await world.add()
            #expect(outcome == .added(.phone))
            let pass = try #require(sheet.pass)
            let reference = pass.deviceAccountIdentifier
            let network = world.platform.tokenService
            #expect(try await world.alice.handleActivationLink(try #require(world.wallet.openedLinks.last)).outcome == .approved)

            try await network.change(.deviceLost, tokenUniqueReference: reference)
            await network.drainEvents()
            #expect(try await world.platform.store.token(reference: reference)?.status == .suspended)
            #expect(world.wallet.pass(serialNumber: pass.serialNumber)?.activationState == .suspended)
            let lost = try #require(try await world.alice.refreshStatus()[DemoData.visaCard])
            #expect(lost.phone.state == .suspended && lost.phone.action == .none)
            // The issuer's block and unblock leave the network's suspension alone.
            try await world.platform.setCardStatus(DemoData.visaCard, .blocked)
            try await world.platform.setCardStatus(DemoData.visaCard, .active)
            await network.drainEvents()
            #expect(try await world.platform.store.token(reference: reference)?.status == .suspended)
            #expect(await network.token(reference)?.status == .suspended)

            try await network.change(.deviceFound, tokenUniqueReference: reference)
            await network.drainEvents()
            #expect(try await world.platform.store.token(reference: reference)?.status == .active)
            #expect(try await world.alice.refreshStatus()[DemoData.visaCard]?.phone.action == .inWallet)

            let removed = try await TokenServicePaymentNetwork(network).removePass(serialNumber: pass.serialNumber, from: world.wallet)
            #expect(removed?.serialNumber == pass.serialNumber)
            #expect(world.wallet.pass(serialNumber: pass.serialNumber) == nil)
            await network.drainEvents()
            #expect(try await world.platform.store.token(reference: reference)?.status == .deactivated)
            let gone = try #require(try await world.alice.refreshStatus()[DemoData.visaCard])
            #expect(gone.phone.state == .notAdded && gone.phone.action == .addToWallet && gone.phone.pass == nil)
            // Every change is in the token's audit trail, none of them TMP's command.
            let trail = try await world.platform.store.auditEntries(subject: "token:\(reference)")
            #expect(trail.filter { $0.actor == "tsp" }.map(\.action).suffix(3) == ["token.event.suspended", "token.event.resumed", "token.event.deactivated"], "\(trail.map { "\($0.actor) \($0.action)" })")
            // And a change the token's state does not allow changes nothing.
            await #expect(throws: TokenServiceSimulatorError.self) { try await network.change(.deviceLost, tokenUniqueReference: reference) }
            #expect(await network.pendingEvents.isEmpty)
            #expect(await network.token(reference)?.status == .deactivated)
        }
    }

    @Test func theWatchCannotBeTargetedBeforeTheIPhoneHasTheCard() async throws {
        try await World().run { world in
            _ = try await world.alice.refreshStatus()
            let failure = await #expect(throws: ProvisioningFailure.self) { try await world.add(to: .watch) }
            guard case .notEligible = failure else {
                Issue.record("refused for another reason than the Watch not being eligible yet: \(String(describing: failure))")
                return
            }
            #expect(try await world.audit().contains("card.seal") == false)
            // Without the account identifier, Wallet cannot tell the devices apart: a card
            // already on the iPhone is refused there by Apple, and no second token is made.
            _ = try await world.add()
            let configuration = try #require(PKAddPaymentPassRequestConfiguration(encryptionScheme: .ECC_V2))
            configuration.cardholderName = "Alice Appleseed"
            configuration.primaryAccountSuffix = "1111"
            let session = ProvisioningSession(
                configuration: AddPassConfiguration(externalCardId: DemoData.visaCard, target: .watch, cardholderName: "Alice Appleseed", primaryAccountSuffix: "1111", localizedDescription: nil, primaryAccountIdentifier: nil, paymentNetwork: .visa),
                generator: await world.alice.generator, refresh: { nil }
            )
            let coordinator = AddPaymentPassCoordinator(session: session) { _, _ in }
            var controller: PKAddPaymentPassViewController?
            _ = coordinator.start { controller = $0 }
            let result = await world.sheet.present(try #require(controller), user: .add(preferring: .phone))
            #expect(result.outcome == .failed(code: .unsupported, reason: "this card is already in Wallet on the iPhone"))
            #expect(try await world.tokens().count == 1)
        }
    }

    @Test func extensionStatusWithoutASnapshotAsksForSignInAndOffersNothing() async throws {
        try await World().run { world in
            let container = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-e2e-appgroup-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: container) }
            let configuration = IssuerExtensionConfiguration(tmpURL: world.platform.baseURL, containerURL: container, secrets: FileSecretStore(directory: container.appendingPathComponent("secrets")))
            let handler = IssuerProvisioningExtensionHandler(configuration: configuration)
            // What TMP served the app's routes so far, by TMP's own count.
            @Sendable func appRequests() async throws -> [Substring] {
                let (data, _) = try await URLSession.shared.data(from: world.platform.baseURL.appendingPathComponent("metrics"))
                return String(decoding: data, as: UTF8.self).split(separator: "\n").filter {
                    $0.hasPrefix("pushprov_http_requests_total") && $0.contains("/issuer/push-provisioning")
                }
            }
            let before = try await appRequests()
            // A generous budget: this checks what the status says, not how fast a loaded test
            // machine schedules it (the demo runs with Apple's 100 ms; the answer comes through
            // the main actor, and on two busy cores that hop has taken more than 10 s).
            let host = SimulatedExtensionHost(wallet: world.wallet, pki: world.platform.pki, network: TokenServicePaymentNetwork(world.platform.tokenService), statusBudget: .seconds(60))
            let status = await host.status(of: handler)
            #expect(status.violations.isEmpty)
            #expect(status.value == .init(requiresAuthentication: true, passEntriesAvailable: false, remotePassEntriesAvailable: false))
            // Wallet, told nothing can be added, does not ask for entries.
            let entries = await host.entries(of: handler, for: .phone)
            #expect(entries.value == nil)
            #expect(entries.violations == ["Wallet does not ask passEntries: status said no cards can be added to the iPhone"])
            // Asked anyway (a session that ended between status and passEntries), the
            // extension offers nothing and asks TMP nothing without a session.
            #expect(await handler.walletExtension.passEntries(for: .phone).isEmpty)
            #expect(await handler.walletExtension.passEntries(for: .watch).isEmpty)
            #expect(try await appRequests() == before, "no request reached TMP's app routes")
            #expect(try await world.audit().isEmpty == false)  // the back office's card.put
            #expect(!(try await world.audit()).contains("card.seal"))
            // A corrupt snapshot is no snapshot, never a crash.
            let snapshot = configuration.directory.snapshotURL
            try FileManager.default.createDirectory(at: snapshot.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data("{ not json".utf8).write(to: snapshot)
            #expect(configuration.directory.readSnapshot() == nil)
            #expect(await host.status(of: handler).value == .init(requiresAuthentication: true, passEntriesAvailable: false, remotePassEntriesAvailable: false))
        }
    }
}
extension DemoScenario.WalletTiming {
    /// Budgets that a loaded test machine cannot overrun: Wallet waits a minute, and the
    /// extension's own budgets run on a clock that stands still. Whether the answers come in
    /// Apple's time is measured by Benchmarks/extension-status.sh, and the budgets' ends are
    /// tested with a manual clock (ProvisioningSDKTests) and short budgets (ExtensionHostTests).
    static var lenient: Self {
        Self(statusBudget: .seconds(60), entriesBudget: .seconds(60), requestBudget: .seconds(60), extensionClock: ManualClock())
    }
}
#endif
