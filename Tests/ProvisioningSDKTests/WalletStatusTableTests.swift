import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

/// Where card-1's passes are.
enum Placement: String, CaseIterable, CustomTestStringConvertible {
    case noPass, iPhoneOnly, watchOnly, both
    var testDescription: String { rawValue }
    var devices: [DeviceType] {
        switch self {
        case .noPass: []
        case .iPhoneOnly: [.phone]
        case .watchOnly: [.watch]
        case .both: [.phone, .watch]
        }
    }
}

/// What TMP knows about card-1's tokens.
enum ServerToken: String, CaseIterable, CustomTestStringConvertible {
    case active, inactive, suspended, deactivated, unknown
    var testDescription: String { rawValue }
    var status: TokenStatus? {
        switch self {
        case .active: .active
        case .inactive: .inactive
        case .suspended: .suspended
        case .deactivated: .deactivated
        case .unknown: nil
        }
    }
    /// The pass state PassKit shows alongside that token state.
    var passState: WalletPass.ActivationState {
        switch self {
        case .active, .unknown: .activated
        case .inactive: .requiresActivation
        case .suspended: .suspended
        case .deactivated: .deactivated
        }
    }
}

struct Expected: Equatable, CustomStringConvertible {
    var state: WalletCardState
    var action: WalletCardAction
    var description: String { "\(state)/\(action)" }
}

/// The table itself, written out rather than computed: (iPhone, Watch) for each cell.
func expected(_ placement: Placement, _ token: ServerToken) -> (phone: Expected, watch: Expected) {
    let addable = Expected(state: .notAdded, action: .addToWallet)
    let notAddable = Expected(state: .notAdded, action: .none)
    let active = Expected(state: .active, action: .inWallet)
    let activate = Expected(state: .requiresActivation, action: .activate)
    let suspended = Expected(state: .suspended, action: .none)
    switch (placement, token) {
    case (.noPass, _): return (addable, notAddable)
    case (.iPhoneOnly, .active): return (active, addable)
    case (.iPhoneOnly, .inactive): return (activate, addable)
    case (.iPhoneOnly, .suspended): return (suspended, addable)
    case (.iPhoneOnly, .deactivated), (.iPhoneOnly, .unknown): return (addable, notAddable)
    case (.watchOnly, .active): return (addable, active)
    case (.watchOnly, .inactive): return (addable, activate)
    case (.watchOnly, .suspended): return (addable, suspended)
    case (.watchOnly, .deactivated), (.watchOnly, .unknown): return (addable, notAddable)
    case (.both, .active): return (active, active)
    case (.both, .inactive): return (activate, activate)
    case (.both, .suspended): return (suspended, suspended)
    case (.both, .deactivated), (.both, .unknown): return (addable, notAddable)
    }
}

@Suite("Wallet status per card and device")
struct WalletStatusTableTests {
    @Test("status table", arguments: Placement.allCases, ServerToken.allCases)
    func statusTable(placement: Placement, token: ServerToken) async throws {
        // card-1 is the cell under test; card-2 is always active on both devices, so every
        // cell has passes and exactly one search is expected.
        var passes = placement.devices.map { device in
            Fixtures.pass("DA-1-\(device.rawValue)", account: "PAI-1", device: device, state: token.passState)
        }
        passes += [Fixtures.pass("DA-2-PHONE", account: "PAI-2", device: .phone), Fixtures.pass("DA-2-WATCH", account: "PAI-2", device: .watch)]
        var tokens = [Fixtures.token("DA-2-PHONE", card: "card-2", status: .active), Fixtures.token("DA-2-WATCH", card: "card-2", status: .active, device: .watch)]
        if let status = token.status {
            tokens += placement.devices.map { Fixtures.token("DA-1-\($0.rawValue)", card: "card-1", status: status, device: $0) }
        }
        let server = Fixtures.server(cards: [Fixtures.card("card-1"), Fixtures.card("card-2", last4: "2222")], tokens: tokens)
        let library = FakePassLibrary(passes: passes)

        let snapshot = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: library).read()

        let searches = server.requests(for: .searchTokens)
        #expect(searches.count == 1)
        let searched = try ScriptedTransport.body(of: try #require(searches.first), as: TokenSearchRequest.self)
        #expect(Set(searched.tokenUniqueReferences) == Set(passes.map(\.deviceAccountIdentifier)))

        let card1 = try #require(snapshot["card-1"])
        let want = expected(placement, token)
        #expect(Expected(state: card1.phone.state, action: card1.phone.action) == want.phone)
        #expect(Expected(state: card1.watch.state, action: card1.watch.action) == want.watch)
        #expect(card1.primaryAccountIdentifier == (token == .unknown || placement == .noPass ? nil : "PAI-1"))

        let card2 = try #require(snapshot["card-2"])
        #expect(card2.phone.state == .active && card2.phone.action == .inWallet)
        #expect(card2.watch.state == .active && card2.watch.action == .inWallet)
        #expect(card2.primaryAccountIdentifier == "PAI-2")
    }

    @Test func aPassWhoseTokenTMPDeactivatedIsKeptAsDeadAndTheExtensionOffersTheCardAgain() async throws {
        for passKitCaughtUp in [false, true] {
            let passes = [Fixtures.pass("DA-1", account: "PAI-1", device: .phone, state: passKitCaughtUp ? .deactivated : .activated)]
            let tokens = [Fixtures.token("DA-1", card: "card-1", status: .deactivated)]
            let server = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: tokens)
            let status = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: FakePassLibrary(passes: passes)).read()
            let card = try #require(status["card-1"])
            #expect(card.phone.state == .notAdded && card.phone.action == .addToWallet)
            #expect(card.phone.pass?.deviceAccountIdentifier == (passKitCaughtUp ? nil : "DA-1"))
            // The snapshot the extensions read says "dead" while Wallet still shows the pass,
            // and the extension offers the card, as the app does.
            let snapshot = ExtensionSnapshot(status, userId: "alice", writtenAt: Date(timeIntervalSince1970: 0), artFileNames: [:])
            #expect(snapshot["card-1"]?.phone.word == (passKitCaughtUp ? "absent" : "dead"))
            #expect(ExtensionEligibility.eligibleCards(in: snapshot, livePasses: passes, device: .phone).map(\.externalCardId) == ["card-1"])
        }
    }

    @Test func primaryAccountIdentifierIsLearntFromTheIPhonePass() async throws {
        let passes = [Fixtures.pass("DA-W", account: "PAI-watch", device: .watch), Fixtures.pass("DA-P", account: "PAI-phone", device: .phone)]
        let tokens = [Fixtures.token("DA-W", card: "card-1", status: .active, device: .watch), Fixtures.token("DA-P", card: "card-1", status: .active)]
        let snapshot = try await WalletStatusReader(client: Fixtures.client(Fixtures.server(cards: [Fixtures.card("card-1")], tokens: tokens)), passLibrary: FakePassLibrary(passes: passes)).read()
        #expect(snapshot["card-1"]?.primaryAccountIdentifier == "PAI-phone")
    }

    @Test func noPassesMeansNoSearchAndAddOnlyOnTheIPhone() async throws {
        let server = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: [])
        let snapshot = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: FakePassLibrary()).read()
        #expect(server.requests(for: .searchTokens).isEmpty)
        #expect(snapshot["card-1"]?.phone.action == .addToWallet)
        #expect(snapshot["card-1"]?.watch.action == WalletCardAction.none)
    }

    @Test func withoutAPassLibraryNothingOffersToAdd() async throws {
        let server = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: [])
        let snapshot = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: FakePassLibrary(available: false)).read()
        #expect(snapshot.passLibraryAvailable == false)
        #expect(snapshot["card-1"]?.phone.action == WalletCardAction.none)
    }

    @Test func blockedOrClosedCardsOfferNoAdd() async throws {
        let cards = [Fixtures.card("blocked", status: .blocked), Fixtures.card("closed", status: .closed)]
        let snapshot = try await WalletStatusReader(client: Fixtures.client(Fixtures.server(cards: cards, tokens: [])), passLibrary: FakePassLibrary()).read()
        #expect(snapshot.cards.map(\.phone.action) == [.none, .none])
    }

    @Test func watchIsNotOfferedWhenNoWatchCanTakeTheCard() async throws {
        // On the iPhone, no Watch paired: PassKit says the account cannot be added anywhere.
        let passes = [Fixtures.pass("DA-P", account: "PAI-1", device: .phone)]
        let tokens = [Fixtures.token("DA-P", card: "card-1", status: .active)]
        let library = FakePassLibrary(passes: passes, watchPaired: false)
        let snapshot = try await WalletStatusReader(client: Fixtures.client(Fixtures.server(cards: [Fixtures.card("card-1")], tokens: tokens)), passLibrary: library).read()
        #expect(snapshot["card-1"]?.watch.action == WalletCardAction.none)
        #expect(library.canAddQueries == ["PAI-1"])
    }

    @Test func aKnownPairedWatchIsOfferedTheCardEvenWhenPassKitSaysNo() async throws {
        // The PassKit trap: the card is on the iPhone, a paired Watch lacks it, and
        // canAddSecureElementPass still answers false. The app knows the Watch is paired.
        let passes = [Fixtures.pass("DA-P", account: "PAI-1", device: .phone)]
        let tokens = [Fixtures.token("DA-P", card: "card-1", status: .active)]
        let server = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: tokens)
        let unknown = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: FakePassLibrary(passes: passes, canAddAnswer: false)).read()
        #expect(unknown["card-1"]?.watch.action == WalletCardAction.none)
        let known = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: FakePassLibrary(passes: passes, watchPaired: true, pairingKnown: true, canAddAnswer: false)).read()
        #expect(known["card-1"]?.watch.action == .addToWallet)
        #expect(known["card-1"]?.watch.state == .notAdded)
        #expect(known["card-1"]?.phone.action == .inWallet)
        // A card blocked at the issuer is still not offered.
        let blocked = Fixtures.server(cards: [Fixtures.card("card-1", status: .blocked)], tokens: tokens)
        let blockedStatus = try await WalletStatusReader(client: Fixtures.client(blocked), passLibrary: FakePassLibrary(passes: passes, watchPaired: true, pairingKnown: true)).read()
        #expect(blockedStatus["card-1"]?.watch.action == WalletCardAction.none)
    }

    @Test func aKnownUnpairedIPhoneNeverOffersTheWatch() async throws {
        let passes = [Fixtures.pass("DA-P", account: "PAI-1", device: .phone)]
        let tokens = [Fixtures.token("DA-P", card: "card-1", status: .active)]
        let server = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: tokens)
        let snapshot = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: FakePassLibrary(passes: passes, watchPaired: false, pairingKnown: true, canAddAnswer: true)).read()
        #expect(snapshot["card-1"]?.watch.action == WalletCardAction.none)
    }

    @Test func theIPhoneFollowsPassKitWhateverThePairingSays() async throws {
        // The card on the Watch only: whether the iPhone may add it is PassKit's answer.
        let onWatch = [Fixtures.pass("DA-W", account: "PAI-1", device: .watch)]
        let tokens = [Fixtures.token("DA-W", card: "card-1", status: .active, device: .watch)]
        let server = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: tokens)
        for (paired, passKit) in [(false, true), (true, false)] {
            let snapshot = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: FakePassLibrary(passes: onWatch, watchPaired: paired, pairingKnown: true, canAddAnswer: passKit)).read()
            #expect(snapshot["card-1"]?.phone.action == (passKit ? .addToWallet : WalletCardAction.none), "paired \(paired), PassKit \(passKit)")
            #expect(snapshot["card-1"]?.watch.action == .inWallet)
        }
    }

    @Test func aKnownPairedWatchWithALivePassOfTheAccountIsNotOfferedIt() async throws {
        // The Watch holds a live pass of the account that TMP does not list (so no card owns
        // it here): PassKit would refuse the add, and so does the status.
        let passes = [Fixtures.pass("DA-P", account: "PAI-1", device: .phone), Fixtures.pass("DA-OLD", account: "PAI-1", device: .watch)]
        let tokens = [Fixtures.token("DA-P", card: "card-1", status: .active)]
        let server = Fixtures.server(cards: [Fixtures.card("card-1")], tokens: tokens)
        let snapshot = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: FakePassLibrary(passes: passes, watchPaired: true, pairingKnown: true, canAddAnswer: true)).read()
        #expect(snapshot["card-1"]?.watch.state == .notAdded)
        #expect(snapshot["card-1"]?.watch.action == WalletCardAction.none)
    }

    @Test func aLivePassWinsOverADeactivatedOneOnTheSameDevice() {
        let passes = [Fixtures.pass("old", account: "PAI-1", device: .phone, state: .deactivated), Fixtures.pass("new", account: "PAI-1", device: .phone, state: .requiresActivation)]
        let tokens = [Fixtures.token("old", card: "card-1", status: .deactivated), Fixtures.token("new", card: "card-1", status: .inactive)]
        let snapshot = WalletStatusCalculator.statuses(.init(cards: [Fixtures.card("card-1")], passes: passes, tokens: tokens, passLibraryAvailable: true, addablePrimaryAccountIdentifiers: ["PAI-1"]))
        #expect(snapshot["card-1"]?.phone.state == .requiresActivation)
        #expect(snapshot["card-1"]?.phone.pass?.deviceAccountIdentifier == "new")
    }

    @Test func moreThanOneHundredPassesAreSearchedInBatches() async throws {
        let passes = (0..<150).map { Fixtures.pass("DA-\($0)", account: "PAI-\($0)", device: .phone) }
        let server = Fixtures.server(cards: [], tokens: [])
        _ = try await WalletStatusReader(client: Fixtures.client(server), passLibrary: FakePassLibrary(passes: passes)).read()
        let sizes = try server.requests(for: .searchTokens).map { try ScriptedTransport.body(of: $0, as: TokenSearchRequest.self).tokenUniqueReferences.count }
        #expect(sizes == [100, 50])
    }
}
