import Foundation
import ProvisioningModels

/// A pass Wallet's add sheet reported added, which the app keeps for its card until TMP
/// lists the pass's token.
///
/// Between the sheet's end and the network's `CREATED` event reaching TMP (usually seconds,
/// longer when the network's events are late), `tokens/searches` does not know the new pass,
/// so it belongs to no card. Without this record the status would offer "Add to Apple
/// Wallet" again for the card just added (which Wallet then refuses) and not know the card's
/// `primaryAccountIdentifier` (so not offer the Watch). ``IssuerWallet`` makes one when an
/// in-app flow ends added and drops it once TMP lists the token, the pass is gone, or
/// ``lifetime`` has passed. While the pass has not reached the pass library yet (a Watch's
/// passes reach the iPhone's library with a delay), the record alone keeps the device from
/// being offered the card again.
public struct AddedPass: Sendable, Hashable, Identifiable {
    /// How long a pass is kept for its card while TMP does not list it: longer than any
    /// network's event delay seen, short enough that a pass TMP never hears of (its token
    /// lost at the network) does not stand for the card for the rest of the app's life.
    public static let lifetime: TimeInterval = 24 * 60 * 60

    /// How long a record waits for its pass to show in the pass library (a Watch's passes
    /// reach the iPhone's library with a delay) before it is dropped as gone.
    public static let appearanceGrace: TimeInterval = 5 * 60

    /// This record, through changes (``matched(_:passes:tokens:)`` fills in the pass).
    public let id: UUID
    /// The card the flow added.
    public var externalCardId: String
    /// The device Wallet reported the pass on (or the flow's target when it handed over none).
    public var device: DeviceType
    /// The pass's `deviceAccountIdentifier` (the token's reference) as Wallet handed it over;
    /// nil when Wallet handed over no pass. Then the one live pass on ``device`` that TMP does
    /// not list, whose account belongs to no other card and whose PAN suffix is ``panLast4``,
    /// is taken as the card's.
    public var deviceAccountIdentifier: String?
    /// The card's last four digits, as TMP listed them.
    public var panLast4: String
    /// When the flow ended.
    public var addedAt: Date
    /// Whether Wallet reported the add (an in-app flow's end). An add the Wallet extension
    /// recorded is known only to have been handed a sealed card, so until it is matched to a
    /// pass it does not keep its device from offering the card.
    public var walletReportedAdd: Bool

    /// Creates a record.
    public init(id: UUID = UUID(), externalCardId: String, device: DeviceType, deviceAccountIdentifier: String?, panLast4: String, addedAt: Date, walletReportedAdd: Bool = true) {
        self.id = id
        self.walletReportedAdd = walletReportedAdd
        self.externalCardId = externalCardId
        self.device = device
        self.deviceAccountIdentifier = deviceAccountIdentifier
        self.panLast4 = panLast4
        self.addedAt = addedAt
    }

    /// `records` with each one Wallet handed no pass for matched to its pass, where exactly
    /// one fits: a live pass on the record's device that TMP does not list, with the card's
    /// last four digits, whose account is the card's own when TMP lists a pass of the card
    /// (a Watch pass shares the iPhone pass's), else no other card's, and that no other record
    /// has. Records that find none, or more than one, stay as they are.
    public static func matched(_ records: [AddedPass], passes: [WalletPass], tokens: [TokenSearchResult]) -> [AddedPass] {
        guard records.contains(where: { $0.deviceAccountIdentifier == nil }) else { return records }
        let cardOfToken = Dictionary(tokens.map { ($0.tokenUniqueReference, $0.externalCardId) }, uniquingKeysWith: { first, _ in first })
        let listed = Set(cardOfToken.keys)
        // Each account's cards, as TMP lists the passes of it.
        var cardsOfAccount: [String: Set<String>] = [:]
        var accountsOfCard: [String: Set<String>] = [:]
        for pass in passes {
            if let card = cardOfToken[pass.deviceAccountIdentifier] {
                cardsOfAccount[pass.primaryAccountIdentifier, default: []].insert(card)
                accountsOfCard[card, default: []].insert(pass.primaryAccountIdentifier)
            }
        }
        var claimed = Set(records.compactMap(\.deviceAccountIdentifier))
        return records.map { record in
            guard record.deviceAccountIdentifier == nil else { return record }
            let candidates = passes.filter { pass in
                pass.device == record.device && pass.activationState != .deactivated
                    && !listed.contains(pass.deviceAccountIdentifier) && !claimed.contains(pass.deviceAccountIdentifier)
                    && pass.primaryAccountNumberSuffix == record.panLast4
                    && (accountsOfCard[record.externalCardId].map { $0.contains(pass.primaryAccountIdentifier) }
                        ?? cardsOfAccount[pass.primaryAccountIdentifier, default: []].subtracting([record.externalCardId]).isEmpty)
            }
            guard candidates.count == 1, let pass = candidates.first else { return record }
            claimed.insert(pass.deviceAccountIdentifier)
            var found = record
            found.deviceAccountIdentifier = pass.deviceAccountIdentifier
            return found
        }
    }

    /// The records of `records` still worth keeping after a read that found `passes` and
    /// TMP's `tokens` for them, at `now`: dropped once TMP lists the pass's token (for any
    /// card: TMP's word decides from then on), once TMP lists a live token of the record's
    /// card on its device (the card is there by TMP's word), once the pass is deactivated,
    /// once it is gone from the library (or never showed) after ``appearanceGrace``, and
    /// after ``lifetime``.
    public static func stillAwaited(_ records: [AddedPass], passes: [WalletPass], tokens: [TokenSearchResult], now: Date) -> [AddedPass] {
        let listed = Set(tokens.map(\.tokenUniqueReference))
        let onDevice = Set(passes.compactMap { pass in tokens.first { $0.tokenUniqueReference == pass.deviceAccountIdentifier && $0.tokenStatus != .deactivated && pass.activationState != .deactivated }.map { "\($0.externalCardId)|\(pass.device.rawValue)" } })
        return records.filter { record in
            let age = now.timeIntervalSince(record.addedAt)
            guard age < lifetime, !onDevice.contains("\(record.externalCardId)|\(record.device.rawValue)") else { return false }
            if let reference = record.deviceAccountIdentifier {
                if listed.contains(reference) { return false }
                guard let pass = passes.first(where: { $0.deviceAccountIdentifier == reference }) else { return age < appearanceGrace }
                return pass.activationState != .deactivated
            }
            // Wallet handed over no pass and none matched yet (``matched(_:passes:tokens:)``).
            return age < appearanceGrace
        }
    }
}
