import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

/// A pass the add sheet just added, before TMP lists its token: it stands for its card with
/// PassKit's state, is never offered for activation, and gives the card its account (so the
/// Watch can be offered); TMP's word takes over as soon as it lists the token.
@Suite("Just-added passes")
struct AddedPassTests {
    static let added = Date(timeIntervalSince1970: 1_800_000_000)

    static func record(_ reference: String?, card: String = "card-1", device: DeviceType = .phone, last4: String = "1111", at date: Date = added) -> AddedPass {
        AddedPass(externalCardId: card, device: device, deviceAccountIdentifier: reference, panLast4: last4, addedAt: date)
    }

    static func status(passes: [WalletPass], tokens: [TokenSearchResult] = [], added: [AddedPass], addable: Set<String> = ["account-1"], cards: [CardSummary] = [Fixtures.card("card-1")]) -> WalletStatusSnapshot {
        WalletStatusCalculator.statuses(.init(cards: cards, passes: passes, tokens: tokens, passLibraryAvailable: true, addablePrimaryAccountIdentifiers: addable, addedPasses: added))
    }

    @Test(arguments: [
        (WalletPass.ActivationState.activated, WalletCardState.active, WalletCardAction.inWallet),
        (.requiresActivation, .requiresActivation, .none),
        (.activating, .requiresActivation, .none),
        (.suspended, .suspended, .none),
    ])
    func aJustAddedPassStandsForItsCardWithPassKitsState(passState: WalletPass.ActivationState, state: WalletCardState, action: WalletCardAction) throws {
        let pass = Fixtures.pass("T-new", account: "account-1", device: .phone, state: passState)
        let card = try #require(Self.status(passes: [pass], added: [Self.record("T-new")])["card-1"])
        #expect(card.phone.state == state)
        #expect(card.phone.action == action)
        #expect(card.phone.awaitingIssuer)
        #expect(card.phone.pass == pass)
        #expect(card.primaryAccountIdentifier == "account-1")
        // The account is known, PassKit says it can still be added: the Watch is offered.
        #expect(card.watch.action == .addToWallet)
        #expect(!card.watch.awaitingIssuer)
    }

    @Test func withoutTheRecordTheCardIsOfferedAgain() throws {
        // The window this closes: TMP does not list the pass, so it belongs to no card.
        let pass = Fixtures.pass("T-new", account: "account-1", device: .phone, state: .requiresActivation)
        let card = try #require(Self.status(passes: [pass], added: [])["card-1"])
        #expect(card.phone.state == .notAdded && card.phone.action == .addToWallet && card.phone.pass == nil)
        #expect(card.primaryAccountIdentifier == nil)
    }

    @Test func tmpsWordWinsOnceItListsTheToken() throws {
        let pass = Fixtures.pass("T-new", account: "account-1", device: .phone, state: .requiresActivation)
        let tokens = [Fixtures.token("T-new", card: "card-1", status: .inactive)]
        let card = try #require(Self.status(passes: [pass], tokens: tokens, added: [Self.record("T-new")])["card-1"])
        #expect(card.phone.state == .requiresActivation && card.phone.action == .activate)
        #expect(!card.phone.awaitingIssuer)
        // Also when TMP lists it for another card than the flow's: TMP decides.
        let elsewhere = [Fixtures.token("T-new", card: "card-2", status: .active)]
        let both = Self.status(passes: [pass], tokens: elsewhere, added: [Self.record("T-new")], cards: [Fixtures.card("card-1"), Fixtures.card("card-2", last4: "2222")])
        #expect(both["card-1"]?.phone.state == .notAdded)
        #expect(both["card-2"]?.phone.state == .active)
        #expect(AddedPass.stillAwaited([Self.record("T-new")], passes: [pass], tokens: elsewhere, now: Self.added).isEmpty)
    }

    @Test func aListedPassOfTheCardWinsOverAnAwaitedOneOfTheSameState() throws {
        let listed = Fixtures.pass("T-old", account: "account-1", device: .phone, state: .activated)
        let fresh = Fixtures.pass("T-new", account: "account-1", device: .phone, state: .activated)
        let card = try #require(Self.status(passes: [fresh, listed], tokens: [Fixtures.token("T-old", card: "card-1", status: .active)], added: [Self.record("T-new")])["card-1"])
        #expect(card.phone.state == .active && card.phone.pass == listed && !card.phone.awaitingIssuer)
    }

    @Test func aRecordOnlyClaimsItsPassOnItsDevice() throws {
        let watchPass = Fixtures.pass("T-new", account: "account-1", device: .watch)
        let card = try #require(Self.status(passes: [watchPass], added: [Self.record("T-new", device: .phone)])["card-1"])
        #expect(card.phone.pass == nil && card.watch.pass == nil)
    }

    @Test func aDeactivatedJustAddedPassCountsAsNotAdded() throws {
        let pass = Fixtures.pass("T-new", account: "account-1", device: .phone, state: .deactivated)
        let card = try #require(Self.status(passes: [pass], added: [Self.record("T-new")])["card-1"])
        #expect(card.phone.state == .notAdded && card.phone.action == .addToWallet && card.phone.pass == nil && !card.phone.awaitingIssuer)
        #expect(AddedPass.stillAwaited([Self.record("T-new")], passes: [pass], tokens: [], now: Self.added).isEmpty)
    }

    @Test func recordsAreKeptUntilListedGoneOrOld() {
        let live = Fixtures.pass("T-new", account: "account-1", device: .phone, state: .requiresActivation)
        let record = Self.record("T-new")
        // Kept while the pass is there and TMP does not list it, up to the lifetime.
        #expect(AddedPass.stillAwaited([record], passes: [live], tokens: [], now: Self.added + 3600) == [record])
        #expect(AddedPass.stillAwaited([record], passes: [live], tokens: [], now: Self.added + AddedPass.lifetime).isEmpty)
        // A pass not (yet) in the library: waited for a while, then dropped.
        #expect(AddedPass.stillAwaited([record], passes: [], tokens: [], now: Self.added + 10) == [record])
        #expect(AddedPass.stillAwaited([record], passes: [], tokens: [], now: Self.added + AddedPass.appearanceGrace).isEmpty)
        // Listed by TMP: dropped at once.
        #expect(AddedPass.stillAwaited([record], passes: [live], tokens: [Fixtures.token("T-new", card: "card-1", status: .inactive)], now: Self.added).isEmpty)
    }

    @Test func aRecordWithoutAPassIsMatchedToTheOnePassThatFits() throws {
        // Wallet handed over no pass: the one live, unlisted pass on the device with the
        // card's last four digits, of no listed card's account, is the card's.
        let other = Fixtures.pass("T-other", account: "account-9", device: .phone, last4: "2222")
        let onWatch = Fixtures.pass("T-watch", account: "account-8", device: .watch)
        let listedCardsPass = Fixtures.pass("T-listed", account: "account-7", device: .phone)
        let sameAccountAsListed = Fixtures.pass("T-twin", account: "account-7", device: .phone)
        let fresh = Fixtures.pass("T-new", account: "account-1", device: .phone, state: .requiresActivation)
        let passes = [other, onWatch, listedCardsPass, sameAccountAsListed, fresh]
        let tokens = [Fixtures.token("T-listed", card: "card-2", status: .active)]
        let matched = AddedPass.matched([Self.record(nil)], passes: passes, tokens: tokens)
        #expect(matched.map(\.deviceAccountIdentifier) == ["T-new"])
        #expect(matched.map(\.id) == [matched[0].id])
        let cards = [Fixtures.card("card-1"), Fixtures.card("card-2")]
        let card = try #require(Self.status(passes: passes, tokens: tokens, added: matched, cards: cards)["card-1"])
        #expect(card.phone.pass == fresh && card.phone.awaitingIssuer)

        // Two that fit: neither is taken, and the record waits only its grace.
        let second = Fixtures.pass("T-new-2", account: "account-5", device: .phone)
        let ambiguous = AddedPass.matched([Self.record(nil)], passes: passes + [second], tokens: tokens)
        #expect(ambiguous.map(\.deviceAccountIdentifier) == [nil])
        #expect(AddedPass.stillAwaited(ambiguous, passes: passes, tokens: tokens, now: Self.added + AddedPass.appearanceGrace).isEmpty)

        // A pass another record already has is not taken twice.
        let both = AddedPass.matched([Self.record("T-new"), Self.record(nil)], passes: passes, tokens: tokens)
        #expect(both.map(\.deviceAccountIdentifier) == ["T-new", nil])
    }

    @Test func aPassNotInTheLibraryYetKeepsItsDeviceFromBeingOfferedTheCardAgain() throws {
        // Added to the Watch from the iPhone; the Watch pass has not reached the library yet.
        let phonePass = Fixtures.pass("T-phone", account: "account-1", device: .phone)
        let tokens = [Fixtures.token("T-phone", card: "card-1", status: .active)]
        let card = try #require(Self.status(passes: [phonePass], tokens: tokens, added: [Self.record("T-watch", device: .watch)])["card-1"])
        #expect(card.watch.state == .notAdded && card.watch.action == .none && card.watch.awaitingIssuer)
        #expect(card.phone.state == .active && card.phone.action == .inWallet && !card.phone.awaitingIssuer)
        // Without the record the Watch is offered the card again.
        let unaware = try #require(Self.status(passes: [phonePass], tokens: tokens, added: [])["card-1"])
        #expect(unaware.watch.action == .addToWallet)
        // A record Wallet handed no pass for, not matched yet, does the same.
        let unmatched = try #require(Self.status(passes: [phonePass], tokens: tokens, added: [Self.record(nil, device: .watch)])["card-1"])
        #expect(unmatched.watch.action == .none && unmatched.watch.awaitingIssuer)
    }

    @Test func aWatchRecordWithoutAPassMatchesThePassSharingItsOwnCardsAccount() throws {
        // The Watch pass shares the account of the card's iPhone pass, which TMP lists.
        let phonePass = Fixtures.pass("T-phone", account: "account-1", device: .phone)
        let watchPass = Fixtures.pass("T-watch", account: "account-1", device: .watch, state: .requiresActivation)
        let tokens = [Fixtures.token("T-phone", card: "card-1", status: .active)]
        let matched = AddedPass.matched([Self.record(nil, device: .watch)], passes: [phonePass, watchPass], tokens: tokens)
        #expect(matched.map(\.deviceAccountIdentifier) == ["T-watch"])
        // Another card's account is still not taken.
        let otherCards = AddedPass.matched([Self.record(nil, card: "card-2", device: .watch)], passes: [phonePass, watchPass], tokens: tokens)
        #expect(otherCards.map(\.deviceAccountIdentifier) == [nil])
    }

    @Test func aRecordWithoutAPassTakesOnlyAPassOfTheCardsOwnAccountOnceItIsKnown() throws {
        // The card is on the iPhone (account-1, listed); a stray unlisted Watch pass with the
        // same last four digits (a previous cardholder's, say) is not the card's new one.
        let phonePass = Fixtures.pass("T-phone", account: "account-1", device: .phone)
        let stray = Fixtures.pass("T-stray", account: "account-9", device: .watch)
        let tokens = [Fixtures.token("T-phone", card: "card-1", status: .active)]
        #expect(AddedPass.matched([Self.record(nil, device: .watch)], passes: [phonePass, stray], tokens: tokens).map(\.deviceAccountIdentifier) == [nil])
        let fresh = Fixtures.pass("T-watch", account: "account-1", device: .watch)
        #expect(AddedPass.matched([Self.record(nil, device: .watch)], passes: [phonePass, stray, fresh], tokens: tokens).map(\.deviceAccountIdentifier) == ["T-watch"])
    }

    @Test func aRecordGoesOnceTMPListsALiveTokenOfItsCardOnItsDevice() {
        // Matched to the wrong pass, or never matched: TMP's word about the device ends it.
        let listed = Fixtures.pass("T-new", account: "account-1", device: .phone)
        let tokens = [Fixtures.token("T-new", card: "card-1", status: .inactive)]
        #expect(AddedPass.stillAwaited([Self.record("T-other"), Self.record(nil)], passes: [listed, Fixtures.pass("T-other", account: "account-1", device: .phone)], tokens: tokens, now: Self.added).isEmpty)
        // Not for the other device, nor for a deactivated token.
        #expect(AddedPass.stillAwaited([Self.record(nil, device: .watch)], passes: [listed], tokens: tokens, now: Self.added).count == 1)
        #expect(AddedPass.stillAwaited([Self.record(nil)], passes: [listed], tokens: [Fixtures.token("T-new", card: "card-1", status: .deactivated)], now: Self.added).count == 1)
    }

    @Test func anUnmatchedAddWalletDidNotReportKeepsNothingFromTheDevice() throws {
        // The extension handed Wallet a sealed card; the add may have been declined.
        let unreported = AddedPass(externalCardId: "card-1", device: .phone, deviceAccountIdentifier: nil, panLast4: "1111", addedAt: Self.added, walletReportedAdd: false)
        let card = try #require(Self.status(passes: [], added: [unreported])["card-1"])
        #expect(card.phone.action == .addToWallet && !card.phone.awaitingIssuer)
    }

    @Test func decodingAStatusEncodedBeforeTheFlagReadsItAsFalse() throws {
        let json = Data(#"{"state":"active","action":"inWallet"}"#.utf8)
        let status = try JSONDecoder().decode(DeviceWalletStatus.self, from: json)
        #expect(status == DeviceWalletStatus(state: .active, action: .inWallet, pass: nil))
        let flagged = DeviceWalletStatus(state: .requiresActivation, action: .none, pass: nil, awaitingIssuer: true)
        #expect(try JSONDecoder().decode(DeviceWalletStatus.self, from: JSONEncoder().encode(flagged)) == flagged)
    }
}

/// ``IssuerWallet`` keeps the pass an in-app flow added for its card, reads again while TMP
/// does not list it, and forgets it once TMP does (or at sign-out).
@Suite("IssuerWallet and just-added passes")
struct IssuerWalletAddedPassTests {
    /// TMP's tokens (changeable), `card-1`, and the searches made.
    final class Server: Sendable {
        let tokens = Locked<[TokenSearchResult]>([])
        let searches = Locked(0)
        var transport: ScriptedTransport {
            ScriptedTransport { [self] request, _ in
                switch ScriptedTransport.operation(of: request) {
                case .listCards:
                    return ScriptedTransport.json(CardListResponse(cards: [Fixtures.card("card-1")]))
                case .searchTokens:
                    searches.withValue { $0 += 1 }
                    let asked = Set(try ScriptedTransport.body(of: request, as: TokenSearchRequest.self).tokenUniqueReferences)
                    return ScriptedTransport.json(tokens.current.filter { asked.contains($0.tokenUniqueReference) })
                default:
                    return ScriptedTransport.error(404, code: "not_found", message: "no route")
                }
            }
        }
    }

    static let pass = Fixtures.pass("T-new", account: "account-1", device: .phone, state: .requiresActivation)

    static func wallet(_ server: Server, delays: [Duration]) -> IssuerWallet {
        IssuerWallet(client: Fixtures.client(server.transport), passLibrary: FakePassLibrary(passes: [pass]), activationLinks: ActivationLinkTests.route, recheckDelays: delays)
    }

    @Test func theAddedPassStandsForItsCardUntilTMPListsItThenTheRecheckPublishesTMPsWord() async throws {
        let server = Server()
        let wallet = Self.wallet(server, delays: Array(repeating: .milliseconds(20), count: 250))
        let before = try #require(try await wallet.refreshStatus()["card-1"])
        #expect(before.phone.action == .addToWallet)
        let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
        let (outcome, status) = await session.finish(.added(Self.pass))
        #expect(outcome == .added(.phone))
        let after = try #require(status?["card-1"])
        #expect(after.phone.state == .requiresActivation && after.phone.action == .none && after.phone.awaitingIssuer)
        #expect(after.watch.action == .addToWallet, "the account is known: the Watch can take the card")
        #expect(await wallet.passesAwaitingIssuer.map(\.deviceAccountIdentifier) == ["T-new"])

        server.tokens.withValue { $0 = [Fixtures.token("T-new", card: "card-1", status: .inactive)] }
        // No read is asked for: the wallet's own rechecks publish TMP's word.
        let deadline = ContinuousClock.now + .seconds(10)
        while await wallet.latestStatus?["card-1"]?.phone.awaitingIssuer != false, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let known = await wallet.latestStatus?["card-1"]
        #expect(known?.phone.state == .requiresActivation && known?.phone.action == .activate)
        #expect(await wallet.passesAwaitingIssuer.isEmpty)
        // Nothing awaited: the rechecks stop.
        let searches = server.searches.current
        try await Task.sleep(for: .milliseconds(200))
        #expect(server.searches.current == searches)
    }

    @Test func rechecksStopAfterTheLastDelayAndSignOutForgetsThePass() async throws {
        let server = Server()
        let wallet = Self.wallet(server, delays: [.milliseconds(10), .milliseconds(10)])
        _ = try await wallet.refreshStatus()
        let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
        _ = await session.finish(.added(Self.pass))
        // The read after the add, then one per delay, then no more.
        let deadline = ContinuousClock.now + .seconds(10)
        while server.searches.current < 4, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(server.searches.current == 4)
        #expect(await wallet.passesAwaitingIssuer.count == 1)
        #expect(await wallet.latestStatus?["card-1"]?.phone.awaitingIssuer == true)

        try await wallet.signOut()
        #expect(await wallet.passesAwaitingIssuer.isEmpty)
        let fresh = try #require(try await wallet.refreshStatus()["card-1"])
        #expect(fresh.phone.action == .addToWallet && !fresh.phone.awaitingIssuer)
    }

    @Test func aFlowEndingAfterSignOutKeepsNothingForTheNextCardholder() async throws {
        let server = Server()
        let wallet = Self.wallet(server, delays: [.milliseconds(10)])
        _ = try await wallet.refreshStatus()
        let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
        try await wallet.signOut()
        let searches = server.searches.current
        let (outcome, status) = await session.finish(.added(Self.pass))
        #expect(outcome == .added(.phone))
        #expect(status == nil)
        #expect(await wallet.passesAwaitingIssuer.isEmpty)
        #expect(await wallet.latestStatus == nil)
        #expect(server.searches.current == searches)
    }

    @Test func aSignOutDuringAnActivationsWaitEndsItWithoutReadingForTheNextCardholder() async throws {
        let server = Server()
        let activations = Locked(0)
        let transport = ScriptedTransport { request, attempt in
            if ScriptedTransport.operation(of: request) == .activateToken {
                activations.withValue { $0 += 1 }
                return ScriptedTransport.error(404, code: "token_not_found", message: "no token for this user")
            }
            return try await server.transport.send(request)
        }
        let wallet = IssuerWallet(client: Fixtures.client(transport), passLibrary: FakePassLibrary(passes: [Self.pass]), activationLinks: ActivationLinkTests.route, recheckDelays: [.milliseconds(300), .milliseconds(300), .milliseconds(300)])
        _ = try await wallet.refreshStatus()
        let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
        _ = await session.finish(.added(Self.pass))
        let link = try #require(URL(string: "bankapp://wallet-activation?serialNumber=\(Self.pass.serialNumber)"))
        let activation = Task { try await wallet.handleActivationLink(link) }
        let deadline = ContinuousClock.now + .seconds(10)
        while activations.current < 1, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        try await wallet.signOut()
        let result = await activation.result
        guard case .failure(let error as ActivationError) = result else {
            Issue.record("the activation went on after the sign-out: \(result)")
            return
        }
        #expect(error.kind == .network && error.clientError?.kind == .cancelled)
        #expect(activations.current == 1)
        #expect(await wallet.latestStatus == nil)
    }

    @Test func aReadThatBeganBeforeAnAddKeepsTheAddsRecordWhenItPublishes() async throws {
        // Read A is held at TMP; meanwhile a flow ends added and its own read fails, so A,
        // which was given no records, publishes last: the record added meanwhile stays.
        let gate = AsyncGate()
        let calls = Locked(0)
        let server = ScriptedTransport { request, _ in
            switch ScriptedTransport.operation(of: request) {
            case .listCards:
                let call = calls.withValue { $0 += 1; return $0 }
                if call == 2 { await gate.wait() }
                if call == 3 { return ScriptedTransport.error(503, code: "database_unavailable", message: "try again") }
                return ScriptedTransport.json(CardListResponse(cards: [Fixtures.card("card-1")]))
            default:
                return ScriptedTransport.json([TokenSearchResult]())
            }
        }
        let wallet = IssuerWallet(client: Fixtures.client(server, retry: .none), passLibrary: FakePassLibrary(passes: [Self.pass]), activationLinks: ActivationLinkTests.route, recheckDelays: [])
        _ = try await wallet.refreshStatus()
        let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
        let readA = Task { try await wallet.refreshStatus() }
        await gate.waitForArrivals(1)
        let (_, status) = await session.finish(.added(Self.pass))
        #expect(status == nil, "the flow's own read was to fail")
        gate.open()
        let published = try await readA.value
        #expect(await wallet.passesAwaitingIssuer.map(\.deviceAccountIdentifier) == ["T-new"])
        #expect(await wallet.latestStatus == published)
    }

    @Test func aCancelledOrFailedFlowRemembersNothing() async throws {
        let server = Server()
        let wallet = Self.wallet(server, delays: [.milliseconds(10)])
        _ = try await wallet.refreshStatus()
        let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
        let (outcome, status) = await session.finish(.failed(WalletAddError(.userCancelled)))
        #expect(outcome == .cancelled)
        #expect(status?["card-1"]?.phone.action == .addToWallet)
        #expect(await wallet.passesAwaitingIssuer.isEmpty)
    }
}
