import ProvisioningModels

/// Where a card stands in Wallet on one device.
public enum WalletCardState: String, Sendable, Hashable, Codable, CaseIterable {
    /// No usable pass: none at all, one whose token TMP does not know, or a deactivated one.
    case notAdded
    /// The pass exists and waits for the issuer's in-app activation (token `INACTIVE`).
    case requiresActivation
    /// The pass is ready for payments (token `ACTIVE`).
    case active
    /// The pass exists but cannot pay for now (token `SUSPENDED`).
    case suspended
}

/// What the app's UI should offer for a card on one device.
public enum WalletCardAction: String, Sendable, Hashable, Codable, CaseIterable {
    /// "Add to Apple Wallet": start in-app provisioning for that device.
    case addToWallet
    /// "Activate card": activate the pass's token.
    case activate
    /// "In Wallet": a label (or a link to the pass), nothing to do.
    case inWallet
    /// Nothing to show (suspended, adding cannot work on this device, or a just-added pass
    /// waits for TMP to know its token: ``DeviceWalletStatus/awaitingIssuer``).
    case none
}

/// A card's state and action on one device.
public struct DeviceWalletStatus: Sendable, Hashable, Codable {
    /// The state.
    public var state: WalletCardState
    /// The action to offer.
    public var action: WalletCardAction
    /// The pass the state comes from: nil when no pass of this card is on the device; with
    /// state `notAdded`, a pass whose token TMP deactivated that Wallet still shows as live.
    public var pass: WalletPass?
    /// Whether the state comes from a pass the add sheet has just added that TMP does not list
    /// yet (``AddedPass``): the state is PassKit's alone, and a pass that requires activation
    /// is not offered for it until TMP knows its token (``IssuerWallet`` reads again shortly).
    /// With state `notAdded` (and no action), Wallet reported the add but its pass has not
    /// reached the pass library yet. An app may show "Finishing setup" here.
    public var awaitingIssuer: Bool

    /// Creates a status.
    public init(state: WalletCardState, action: WalletCardAction, pass: WalletPass?, awaitingIssuer: Bool = false) {
        self.state = state
        self.action = action
        self.pass = pass
        self.awaitingIssuer = awaitingIssuer
    }

    private enum CodingKeys: String, CodingKey {
        case state, action, pass, awaitingIssuer
    }

    /// Decodes a status; one encoded before ``awaitingIssuer`` existed reads as false.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        state = try container.decode(WalletCardState.self, forKey: .state)
        action = try container.decode(WalletCardAction.self, forKey: .action)
        pass = try container.decodeIfPresent(WalletPass.self, forKey: .pass)
        awaitingIssuer = try container.decodeIfPresent(Bool.self, forKey: .awaitingIssuer) ?? false
    }
}

/// One card of the cardholder's with its status on this iPhone and on the paired Apple Watch.
public struct CardWalletStatus: Sendable, Hashable, Codable, Identifiable {
    /// The card as TMP lists it.
    public var card: CardSummary
    /// The card account's identifier, learnt from its pass on the iPhone (else on the Watch);
    /// nil while neither device has a pass of it.
    public var primaryAccountIdentifier: String?
    /// On this iPhone.
    public var phone: DeviceWalletStatus
    /// On the paired Apple Watch.
    public var watch: DeviceWalletStatus

    /// Creates a status.
    public init(card: CardSummary, primaryAccountIdentifier: String?, phone: DeviceWalletStatus, watch: DeviceWalletStatus) {
        self.card = card
        self.primaryAccountIdentifier = primaryAccountIdentifier
        self.phone = phone
        self.watch = watch
    }

    /// The card's id.
    public var id: String { card.externalCardId }

    /// The status on `device`.
    public subscript(device: DeviceType) -> DeviceWalletStatus {
        device == .phone ? phone : watch
    }
}

/// Every card's wallet status at one moment, and whether this device can add passes at all.
public struct WalletStatusSnapshot: Sendable, Hashable, Codable {
    /// The cards, in TMP's order.
    public var cards: [CardWalletStatus]
    /// Whether the device has a pass library (when false, no card offers "Add to Apple Wallet").
    public var passLibraryAvailable: Bool

    /// Creates a snapshot.
    public init(cards: [CardWalletStatus], passLibraryAvailable: Bool) {
        self.cards = cards
        self.passLibraryAvailable = passLibraryAvailable
    }

    /// The status of the card with this id.
    public subscript(externalCardId: String) -> CardWalletStatus? {
        cards.first { $0.card.externalCardId == externalCardId }
    }

    /// The card that owns the pass with this serial number, with the pass, on either device.
    public func card(withPassSerialNumber serialNumber: String) -> (status: CardWalletStatus, pass: WalletPass)? {
        for status in cards {
            for device in DeviceType.allCases {
                if let pass = status[device].pass, pass.serialNumber == serialNumber { return (status, pass) }
            }
        }
        return nil
    }
}
