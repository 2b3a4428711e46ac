import Foundation
import ProvisioningModels

extension ExtensionSnapshot {
    /// What Wallet's `status` reads of a snapshot: the cardholder and, per card, the facts
    /// eligibility depends on — nothing Wallet shows.
    ///
    /// Decoding one JSON value costs far more than scanning it, and `status` has 100 ms on a
    /// phone (a few milliseconds is this project's target), so the snapshot also carries these
    /// facts as one string, `statusIndex`, derived from `cards` whenever it is written: a line
    /// per card, `<status> <iPhone> <Watch> <last 4> <account>`, e.g.
    /// `ACTIVE active absent 1111 PAI-1`. The last four digits and the account are
    /// percent-encoded outside `A–Z a–z 0–9 . _ ~`, and a card without a known account has
    /// `-`. A snapshot without a readable index is read from its `cards` instead.
    public struct StatusFacts: Sendable, Hashable, Decodable {
        /// The cardholder the cards belong to.
        public var userId: String
        /// The cards' facts, in the snapshot's order.
        public var cards: [CardFacts]

        /// Decodes the facts, refusing a newer schema version first.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: ExtensionSnapshot.CodingKeys.self)
            let version = try container.decode(Int.self, forKey: .schemaVersion)
            guard version <= ExtensionSnapshot.currentSchemaVersion else { throw NewerSchemaVersion(version: version) }
            userId = try container.decode(String.self, forKey: .userId)
            if let index = try? container.decodeIfPresent(String.self, forKey: .statusIndex), let cards = Self.cards(inIndex: index) {
                self.cards = cards
            } else {
                cards = try container.decode([CardFacts].self, forKey: .cards)
            }
        }

        /// The index of `cards`.
        static func index(of cards: [some EligibilityFacts]) -> String {
            var index = ""
            for card in cards {
                index += card.status.rawValue + " " + card.phone.word + " " + card.watch.word + " "
                index += escape(card.panLast4) + " " + (card.primaryAccountIdentifier.map(escape) ?? "-") + "\n"
            }
            return index
        }

        /// The cards of an index, or nil if any line is not one the index writer makes.
        static func cards(inIndex index: String) -> [CardFacts]? {
            var cards: [CardFacts] = []
            for line in index.utf8.split(separator: UInt8(ascii: "\n")) {
                let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
                guard fields.count == 5,
                    let status = CardStatus(rawValue: String(decoding: fields[0], as: UTF8.self)),
                    let phone = DevicePresence(word: String(decoding: fields[1], as: UTF8.self)),
                    let watch = DevicePresence(word: String(decoding: fields[2], as: UTF8.self)),
                    let last4 = unescape(fields[3])
                else { return nil }
                let account: String?
                if fields[4].elementsEqual("-".utf8) {
                    account = nil
                } else {
                    guard let unescaped = unescape(fields[4]) else { return nil }
                    account = unescaped
                }
                cards.append(CardFacts(panLast4: last4, status: status, primaryAccountIdentifier: account, phone: phone, watch: watch))
            }
            return cards
        }

        private static let unreserved: CharacterSet = {
            var set = CharacterSet(charactersIn: "._~")
            set.formUnion(CharacterSet(charactersIn: "a"..."z"))
            set.formUnion(CharacterSet(charactersIn: "A"..."Z"))
            set.formUnion(CharacterSet(charactersIn: "0"..."9"))
            return set
        }()

        private static func escape(_ value: String) -> String {
            value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
        }

        private static func unescape(_ field: Substring.UTF8View.SubSequence) -> String? {
            let text = String(decoding: field, as: UTF8.self)
            guard !text.isEmpty else { return nil }
            return field.contains(UInt8(ascii: "%")) ? text.removingPercentEncoding : text
        }
    }

    /// One card's facts for ``ExtensionEligibility`` (not even its id: `status` needs none).
    public struct CardFacts: Sendable, Hashable, Decodable, EligibilityFacts {
        /// The PAN's last four digits.
        public var panLast4: String
        /// The card's status at the issuer.
        public var status: CardStatus
        /// The card account's identifier in Wallet, once known.
        public var primaryAccountIdentifier: String?
        /// On this iPhone.
        public var phone: DevicePresence
        /// On the paired Apple Watch.
        public var watch: DevicePresence
    }
}

/// What ``ExtensionEligibility`` needs to know of a card.
public protocol EligibilityFacts {
    /// The PAN's last four digits.
    var panLast4: String { get }
    /// The card's status at the issuer.
    var status: CardStatus { get }
    /// The card account's identifier in Wallet, once known.
    var primaryAccountIdentifier: String? { get }
    /// On this iPhone.
    var phone: ExtensionSnapshot.DevicePresence { get }
    /// On the paired Apple Watch.
    var watch: ExtensionSnapshot.DevicePresence { get }
}

extension EligibilityFacts {
    /// Where the card stands on `device`.
    public func presence(on device: DeviceType) -> ExtensionSnapshot.DevicePresence {
        device == .phone ? phone : watch
    }
}

extension ExtensionSnapshot.Card: EligibilityFacts {}
