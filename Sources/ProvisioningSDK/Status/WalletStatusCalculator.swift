import ProvisioningModels

/// Turns cards, passes and token states into per-device wallet statuses. Pure: no I/O, so
/// the app, its Wallet extensions and the tests all compute statuses the same way.
///
/// Rules:
/// - A pass belongs to a card when TMP's `tokens/searches` lists the pass's
///   `deviceAccountIdentifier` as a token of that card. A pass TMP does not list belongs to
///   no card, except one the add sheet just reported added for a card (``AddedPass``): until
///   TMP lists it, it stands for that card with the state PassKit gives it, and
///   ``DeviceWalletStatus/awaitingIssuer`` says so. Such a pass is never offered for
///   activation (TMP cannot activate a token it does not know yet). A record whose pass is
///   not in the library yet (a Watch's passes reach the iPhone's library with a delay) makes
///   its device `notAdded` with no action and ``DeviceWalletStatus/awaitingIssuer``, so the
///   card is not offered there again meanwhile.
/// - Per device, the pass with the best state wins (active, then requires activation, then
///   suspended). A `DEACTIVATED` token or a pass PassKit reports as deactivated counts as not
///   added.
/// - The card's `primaryAccountIdentifier` is learnt from its iPhone pass, else from its
///   Watch pass.
/// - "Add to Apple Wallet" is offered only when it can work: the pass library exists, the
///   card is `ACTIVE` at the issuer, and PassKit says the account can still be added (when
///   the account is known). For the Watch it needs the card on the iPhone, because only the
///   iPhone pass's `primaryAccountIdentifier` lets the add sheet target the Watch; a card on
///   neither device is added from the iPhone button, where Wallet itself offers a paired Watch.
///   When the app knows whether a Watch is paired (``Input/watchPaired``), that decides for
///   the Watch instead of PassKit's answer, which can be a false "no".
public enum WalletStatusCalculator {
    /// What a status computation needs.
    public struct Input: Sendable, Hashable {
        /// The cardholder's cards.
        public var cards: [CardSummary]
        /// The passes on this iPhone and the paired Watch.
        public var passes: [WalletPass]
        /// TMP's answer to `tokens/searches` for those passes.
        public var tokens: [TokenSearchResult]
        /// Whether the device has a pass library.
        public var passLibraryAvailable: Bool
        /// The accounts for which `canAddSecureElementPass(primaryAccountIdentifier:)` is true.
        public var addablePrimaryAccountIdentifiers: Set<String>
        /// Whether an Apple Watch is paired, when the app knows (``PassLibrary/isWatchPaired()``).
        public var watchPaired: Bool?
        /// Passes the add sheet reported added, which TMP may not list yet.
        public var addedPasses: [AddedPass]

        /// Creates an input.
        public init(cards: [CardSummary], passes: [WalletPass], tokens: [TokenSearchResult], passLibraryAvailable: Bool, addablePrimaryAccountIdentifiers: Set<String>, watchPaired: Bool? = nil, addedPasses: [AddedPass] = []) {
            self.cards = cards
            self.passes = passes
            self.tokens = tokens
            self.passLibraryAvailable = passLibraryAvailable
            self.addablePrimaryAccountIdentifiers = addablePrimaryAccountIdentifiers
            self.watchPaired = watchPaired
            self.addedPasses = addedPasses
        }
    }

    /// The passes of each card (keyed by `externalCardId`), each with its token's state as
    /// TMP lists it, or nil for a pass TMP does not list that `addedPasses` gives the card.
    public static func passesByCard(passes: [WalletPass], tokens: [TokenSearchResult], addedPasses: [AddedPass] = []) -> [String: [(pass: WalletPass, token: TokenStatus?)]] {
        let tokensByReference = Dictionary(tokens.map { ($0.tokenUniqueReference, $0) }, uniquingKeysWith: { first, _ in first })
        let added = Dictionary(addedPasses.compactMap { record in record.deviceAccountIdentifier.map { ($0, record) } }, uniquingKeysWith: { first, _ in first })
        var result: [String: [(pass: WalletPass, token: TokenStatus?)]] = [:]
        for pass in passes {
            if let token = tokensByReference[pass.deviceAccountIdentifier] {
                result[token.externalCardId, default: []].append((pass, token.tokenStatus))
            } else if let record = added[pass.deviceAccountIdentifier], record.device == pass.device {
                result[record.externalCardId, default: []].append((pass, nil))
            }
        }
        return result
    }

    /// The `primaryAccountIdentifier` of every card that has a pass on either device: the
    /// ones to ask PassKit `canAddSecureElementPass` about.
    public static func primaryAccountIdentifiers(passes: [WalletPass], tokens: [TokenSearchResult], addedPasses: [AddedPass] = []) -> [String: String] {
        passesByCard(passes: passes, tokens: tokens, addedPasses: addedPasses).compactMapValues { primaryAccountIdentifier(of: $0.map(\.pass)) }
    }

    /// Every card's status.
    public static func statuses(_ input: Input) -> WalletStatusSnapshot {
        let byCard = passesByCard(passes: input.passes, tokens: input.tokens, addedPasses: input.addedPasses)
        let cards = input.cards.map { card in
            let owned = byCard[card.externalCardId] ?? []
            let account = primaryAccountIdentifier(of: owned.map(\.pass))
            let phoneState = bestState(owned.filter { $0.pass.device == .phone })
            let watchState = bestState(owned.filter { $0.pass.device == .watch })
            let canAddHere = input.passLibraryAvailable && card.status == .active
            let passKitAgrees = account.map { input.addablePrimaryAccountIdentifiers.contains($0) } ?? true
            let unseen = unseenAdds(of: card.externalCardId, input: input)
            let phone = deviceStatus(phoneState, canAdd: canAddHere && passKitAgrees, unseenAdd: unseen.contains(.phone))
            // With the card on the iPhone, PassKit's "can add" is about the Watch alone; a
            // known pairing answers that better, provided the Watch holds no live pass of the
            // account at all (also one TMP does not list, which no card here owns).
            let watchCanTakeIt = input.watchPaired.map { paired in
                paired && !input.passes.contains { $0.device == .watch && $0.primaryAccountIdentifier == account && $0.activationState != .deactivated }
            } ?? passKitAgrees
            let watch = deviceStatus(watchState, canAdd: canAddHere && watchCanTakeIt && account != nil && phoneState.state != .notAdded, unseenAdd: unseen.contains(.watch))
            return CardWalletStatus(card: card, primaryAccountIdentifier: account, phone: phone, watch: watch)
        }
        return WalletStatusSnapshot(cards: cards, passLibraryAvailable: input.passLibraryAvailable)
    }

    /// The state one pass and its token give.
    public static func state(pass: WalletPass, token: TokenStatus) -> WalletCardState {
        if pass.activationState == .deactivated { return .notAdded }
        switch token {
        case .active: return .active
        case .inactive: return .requiresActivation
        case .suspended: return .suspended
        case .deactivated: return .notAdded
        }
    }

    /// The state of a just-added pass TMP does not list yet: PassKit's word alone.
    public static func state(ofAddedPass pass: WalletPass) -> WalletCardState {
        switch pass.activationState {
        case .activated: .active
        case .requiresActivation, .activating: .requiresActivation
        case .suspended: .suspended
        case .deactivated: .notAdded
        }
    }

    private static func state(pass: WalletPass, token: TokenStatus?) -> WalletCardState {
        token.map { state(pass: pass, token: $0) } ?? state(ofAddedPass: pass)
    }

    private static func primaryAccountIdentifier(of passes: [WalletPass]) -> String? {
        let candidates = passes.filter { !$0.primaryAccountIdentifier.isEmpty }
        return (candidates.first { $0.device == .phone } ?? candidates.first)?.primaryAccountIdentifier
    }

    private struct Found {
        var state: WalletCardState
        var pass: WalletPass?
        /// The state comes from a just-added pass TMP does not list yet.
        var awaitingIssuer = false
    }

    private static func bestState(_ passes: [(pass: WalletPass, token: TokenStatus?)]) -> Found {
        let states = passes.map { Found(state: state(pass: $0.pass, token: $0.token), pass: $0.pass, awaitingIssuer: $0.token == nil) }
        // Among equals, a pass TMP lists wins over one it does not list yet.
        if let best = states.filter({ $0.state != .notAdded }).min(by: { (rank($0.state), $0.awaitingIssuer ? 1 : 0) < (rank($1.state), $1.awaitingIssuer ? 1 : 0) }) {
            return best
        }
        // None usable. A pass whose token TMP deactivated while Wallet still shows it (PassKit
        // catches up later) is still the card's pass on the device: kept, so the Wallet
        // extension knows it is dead and may offer the card again, as the app does.
        return Found(state: .notAdded, pass: states.first { $0.pass?.activationState != .deactivated && !$0.awaitingIssuer }?.pass)
    }

    private static func rank(_ state: WalletCardState) -> Int {
        switch state {
        case .active: 0
        case .requiresActivation: 1
        case .suspended: 2
        case .notAdded: 3
        }
    }

    /// The devices where an add of the card was reported whose pass the library does not
    /// show yet (or, Wallet having handed over none, no pass was matched to it).
    private static func unseenAdds(of externalCardId: String, input: Input) -> Set<DeviceType> {
        var devices = Set<DeviceType>()
        for record in input.addedPasses where record.externalCardId == externalCardId && record.walletReportedAdd {
            let seen = record.deviceAccountIdentifier.map { reference in input.passes.contains { $0.deviceAccountIdentifier == reference && $0.device == record.device } } ?? false
            if !seen { devices.insert(record.device) }
        }
        return devices
    }

    private static func deviceStatus(_ found: Found, canAdd: Bool, unseenAdd: Bool) -> DeviceWalletStatus {
        if found.state == .notAdded && unseenAdd {
            // Wallet reported the add; its pass has not reached this library yet.
            return DeviceWalletStatus(state: .notAdded, action: .none, pass: found.pass, awaitingIssuer: true)
        }
        let action: WalletCardAction =
            switch found.state {
            case .notAdded: canAdd ? .addToWallet : .none
            case .requiresActivation: found.awaitingIssuer ? .none : .activate
            case .active: .inWallet
            case .suspended: .none
            }
        return DeviceWalletStatus(state: found.state, action: action, pass: found.pass, awaitingIssuer: found.awaitingIssuer)
    }
}
