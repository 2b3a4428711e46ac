import Foundation
import ProvisioningModels

/// What the app leaves its Wallet extensions about the signed-in cardholder's cards, so the
/// non-UI extension can answer Wallet's `status` without the network.
///
/// Written by the app (``SharedWalletStorage``) after sign-in and after every status refresh,
/// provisioning or activation; read by the extensions from the App Group container. It holds
/// what Wallet shows and what decides eligibility — never a PAN, a token reference or a
/// cardholder token.
public struct ExtensionSnapshot: Sendable, Hashable {
    /// The format version this SDK writes and reads. A file of a newer version is ignored.
    public static let currentSchemaVersion = 1

    /// The format version of this snapshot.
    public var schemaVersion: Int
    /// The cardholder the cards belong to.
    public var userId: String
    /// When the app wrote it.
    public var writtenAt: Date
    /// Whether the app found a Wallet pass library on the device.
    public var passLibraryAvailable: Bool
    /// The cards, in TMP's order.
    public var cards: [Card]

    /// Creates a snapshot of the current version.
    public init(userId: String, writtenAt: Date, passLibraryAvailable: Bool, cards: [Card]) {
        self.schemaVersion = Self.currentSchemaVersion
        self.userId = userId
        self.writtenAt = writtenAt
        self.passLibraryAvailable = passLibraryAvailable
        self.cards = cards
    }

    /// One card: what a pass entry shows, and where the card stands on each device.
    public struct Card: Sendable, Hashable, Codable, Identifiable {
        /// The issuer's card id.
        public var externalCardId: String
        /// The PAN's last four digits.
        public var panLast4: String
        /// The name on the card.
        public var cardholderName: String
        /// The card network.
        public var network: CardNetwork
        /// The product title, e.g. "Everyday Debit".
        public var productTitle: String
        /// The card art's file name in the shared directory (validated when it was stored);
        /// nil while the card has no art there.
        public var artFileName: String?
        /// The card's status at the issuer.
        public var status: CardStatus
        /// The card account's identifier in Wallet, once a pass of the card exists.
        public var primaryAccountIdentifier: String?
        /// On this iPhone.
        public var phone: DevicePresence
        /// On the paired Apple Watch.
        public var watch: DevicePresence

        /// Creates a card.
        public init(externalCardId: String, panLast4: String, cardholderName: String, network: CardNetwork, productTitle: String, artFileName: String?, status: CardStatus, primaryAccountIdentifier: String?, phone: DevicePresence, watch: DevicePresence) {
            self.externalCardId = externalCardId
            self.panLast4 = panLast4
            self.cardholderName = cardholderName
            self.network = network
            self.productTitle = productTitle
            self.artFileName = artFileName
            self.status = status
            self.primaryAccountIdentifier = primaryAccountIdentifier
            self.phone = phone
            self.watch = watch
        }

        /// The card's id.
        public var id: String { externalCardId }

        /// Where the card stands on `device`.
        public subscript(device: DeviceType) -> DevicePresence {
            device == .phone ? phone : watch
        }
    }

    /// Whether a pass of a card is on a device, and its state. Stored as one string:
    /// `absent`, `dead` (a pass whose token TMP deactivated), `requiresActivation`, `active`
    /// or `suspended`.
    public struct DevicePresence: Sendable, Hashable, Codable {
        /// Whether Wallet on the device holds a pass of the card (whatever its state): one TMP
        /// knows, or one the app has just added that TMP does not know yet.
        public var hasPass: Bool
        /// The card's state there; `notAdded` with ``hasPass`` means a dead (deactivated) pass.
        public var state: WalletCardState

        /// Creates a presence.
        public init(hasPass: Bool, state: WalletCardState) {
            self.hasPass = hasPass
            self.state = state
        }

        /// No pass at all.
        public static let absent = DevicePresence(hasPass: false, state: .notAdded)

        /// The presence of a one-word form, or nil for any other word.
        public init?(word: some StringProtocol) {
            switch word {
            case "absent": self = .absent
            case "dead": self.init(hasPass: true, state: .notAdded)
            default:
                guard let state = WalletCardState(rawValue: String(word)), state != .notAdded else { return nil }
                self.init(hasPass: true, state: state)
            }
        }

        /// The one-word form.
        public var word: String {
            switch (hasPass, state) {
            case (false, _): "absent"
            case (true, .notAdded): "dead"
            case (true, let state): state.rawValue
            }
        }

        /// Reads the one-word form.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            guard let presence = Self(word: try container.decode(String.self)) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a device presence")
            }
            self = presence
        }

        /// Writes the one-word form.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(word)
        }
    }
}

extension ExtensionSnapshot {
    /// The snapshot of a wallet status the app has just read.
    ///
    /// - Parameter artFileNames: the art file stored for each card id, if any.
    public init(_ status: WalletStatusSnapshot, userId: String, writtenAt: Date, artFileNames: [String: String]) {
        self.init(
            userId: userId,
            writtenAt: writtenAt,
            passLibraryAvailable: status.passLibraryAvailable,
            cards: status.cards.map { card in
                Card(
                    externalCardId: card.card.externalCardId,
                    panLast4: card.card.panLast4,
                    cardholderName: card.card.cardholderName,
                    network: card.card.network,
                    productTitle: card.card.productTitle,
                    artFileName: artFileNames[card.card.externalCardId],
                    status: card.card.status,
                    primaryAccountIdentifier: card.primaryAccountIdentifier,
                    phone: DevicePresence(hasPass: card.phone.pass != nil, state: card.phone.state),
                    watch: DevicePresence(hasPass: card.watch.pass != nil, state: card.watch.state)
                )
            }
        )
    }

    /// The card with this id.
    public subscript(externalCardId: String) -> Card? {
        cards.first { $0.externalCardId == externalCardId }
    }
}

// MARK: Coding

extension ExtensionSnapshot: Codable {
    enum CodingKeys: String, CodingKey {
        case schemaVersion, userId, writtenAt, passLibraryAvailable, cards
        /// Derived from `cards` (see ``ExtensionSnapshot/StatusFacts``); never read back here.
        case statusIndex
    }

    /// Thrown while decoding a snapshot written by a newer SDK: its fields may mean
    /// something else, so none of them is trusted.
    struct NewerSchemaVersion: Error {
        let version: Int
    }

    /// Decodes a snapshot, refusing a newer schema version before reading anything else.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let version = try container.decode(Int.self, forKey: .schemaVersion)
        guard version <= Self.currentSchemaVersion else { throw NewerSchemaVersion(version: version) }
        schemaVersion = version
        userId = try container.decode(String.self, forKey: .userId)
        writtenAt = try container.decode(Date.self, forKey: .writtenAt)
        passLibraryAvailable = try container.decode(Bool.self, forKey: .passLibraryAvailable)
        cards = try container.decode([Card].self, forKey: .cards)
    }

    /// Encodes the snapshot.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(schemaVersion, forKey: .schemaVersion)
        try container.encode(userId, forKey: .userId)
        try container.encode(writtenAt, forKey: .writtenAt)
        try container.encode(passLibraryAvailable, forKey: .passLibraryAvailable)
        try container.encode(cards, forKey: .cards)
        try container.encode(StatusFacts.index(of: cards), forKey: .statusIndex)
    }
}
