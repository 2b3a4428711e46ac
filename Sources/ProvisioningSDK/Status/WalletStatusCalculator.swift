import ProvisioningModels

/// Turns cards, passes and token states into per-device wallet statuses. Pure: no I/O, so
/// the app, its Wallet extensions and the tests all compute statuses the same way.
///
/// Rules:
/// - A pass belongs to a card when TMP's `tokens/searches` lists the pass's
///   `deviceAccountIdentifier` as a token of that card. A pass TMP does not know belongs to
///   no card.
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

        /// Creates an input.
        public init(cards: [CardSummary], passes: [WalletPass], tokens: [TokenSearchResult], passLibraryAvailable: Bool, addablePrimaryAccountIdentifiers: Set<String>, watchPaired: Bool? = nil) {
            self.cards = cards
            self.passes = passes
            self.tokens = tokens
            self.passLibraryAvailable = passLibraryAvailable
            self.addablePrimaryAccountIdentifiers = addablePrimaryAccountIdentifiers
            self.watchPaired = watchPaired
        }
    }

    /// The passes of each card (keyed by `externalCardId`), each with its token's state.
    public static func passesByCard(passes: [WalletPass], tokens: [TokenSearchResult]) -> [String: [(pass: WalletPass, token: TokenStatus)]] {
        let tokensByReference = Dictionary(tokens.map { ($0.tokenUniqueReference, $0) }, uniquingKeysWith: { first, _ in first })
        var result: [String: [(pass: WalletPass, token: TokenStatus)]] = [:]
        for pass in passes {
            guard let token = tokensByReference[pass.deviceAccountIdentifier] else { continue }
            result[token.externalCardId, default: []].append((pass, token.tokenStatus))
        }
        return result
    }

    /// The `primaryAccountIdentifier` of every card that has a pass on either device: the
    /// ones to ask PassKit `canAddSecureElementPass` about.
    public static func primaryAccountIdentifiers(passes: [WalletPass], tokens: [TokenSearchResult]) -> [String: String] {
        passesByCard(passes: passes, tokens: tokens).compactMapValues { primaryAccountIdentifier(of: $0.map(\.pass)) }
    }

    /// Every card's status.
    public static func statuses(_ input: Input) -> WalletStatusSnapshot {
        let byCard = passesByCard(passes: input.passes, tokens: input.tokens)
        let cards = input.cards.map { card in
            let owned = byCard[card.externalCardId] ?? []
            let account = primaryAccountIdentifier(of: owned.map(\.pass))
            let phoneState = bestState(owned.filter { $0.pass.device == .phone })
            let watchState = bestState(owned.filter { $0.pass.device == .watch })
            let canAddHere = input.passLibraryAvailable && card.status == .active
            let passKitAgrees = account.map { input.addablePrimaryAccountIdentifiers.contains($0) } ?? true
            let phone = deviceStatus(phoneState, canAdd: canAddHere && passKitAgrees)
            // With the card on the iPhone, PassKit's "can add" is about the Watch alone; a
            // known pairing answers that better, provided the Watch holds no live pass of the
            // account at all (also one TMP does not list, which no card here owns).
            let watchCanTakeIt = input.watchPaired.map { paired in
                paired && !input.passes.contains { $0.device == .watch && $0.primaryAccountIdentifier == account && $0.activationState != .deactivated }
            } ?? passKitAgrees
            let watch = deviceStatus(watchState, canAdd: canAddHere && watchCanTakeIt && account != nil && phoneState.state != .notAdded)
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

    private static func primaryAccountIdentifier(of passes: [WalletPass]) -> String? {
        let candidates = passes.filter { !$0.primaryAccountIdentifier.isEmpty }
        return (candidates.first { $0.device == .phone } ?? candidates.first)?.primaryAccountIdentifier
    }

    private static func bestState(_ passes: [(pass: WalletPass, token: TokenStatus)]) -> (state: WalletCardState, pass: WalletPass?) {
        let states = passes.map { (state: state(pass: $0.pass, token: $0.token), pass: $0.pass) }
        if let best = states.filter({ $0.state != .notAdded }).min(by: { rank($0.state) < rank($1.state) }) {
            return (best.state, best.pass)
        }
        // None usable. A pass whose token TMP deactivated while Wallet still shows it (PassKit
        // catches up later) is still the card's pass on the device: kept, so the Wallet
        // extension knows it is dead and may offer the card again, as the app does.
        return (.notAdded, states.first { $0.pass.activationState != .deactivated }?.pass)
    }

    private static func rank(_ state: WalletCardState) -> Int {
        switch state {
        case .active: 0
        case .requiresActivation: 1
        case .suspended: 2
        case .notAdded: 3
        }
    }

    private static func deviceStatus(_ found: (state: WalletCardState, pass: WalletPass?), canAdd: Bool) -> DeviceWalletStatus {
        let action: WalletCardAction =
            switch found.state {
            case .notAdded: canAdd ? .addToWallet : .none
            case .requiresActivation: .activate
            case .active: .inWallet
            case .suspended: .none
            }
        return DeviceWalletStatus(state: found.state, action: action, pass: found.pass)
    }
}
