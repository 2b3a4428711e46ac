import ProvisioningModels

/// Which cards the Wallet extension may offer for a device. Pure: the snapshot and the
/// device's live passes in, the eligible cards out.
///
/// A card is eligible on a device when it is `ACTIVE` at the issuer and not on that device.
/// The live pass library decides "on that device", so a pass added or removed since the app
/// wrote the snapshot counts: a live, not deactivated pass on the device belongs to a card
/// when its `primaryAccountIdentifier` is the card's; for a card whose account the snapshot
/// does not know yet (no pass of it anywhere when the app last looked), when the pass's PAN
/// suffix is the card's last four and its account belongs to no other card of the snapshot.
/// A pass the snapshot recorded as dead (its token deactivated at TMP) does not count.
public enum ExtensionEligibility {
    /// The cards of `snapshot` that can be added to `device`, in the snapshot's order.
    public static func eligibleCards(in snapshot: ExtensionSnapshot, livePasses: [WalletPass], device: DeviceType) -> [ExtensionSnapshot.Card] {
        eligible(snapshot.cards, livePasses: livePasses, device: device)
    }

    /// The cards among `cards` (all of one snapshot) that can be added to `device`, in order.
    /// Linear in cards plus passes.
    public static func eligible<Card: EligibilityFacts>(_ cards: [Card], livePasses: [WalletPass], device: DeviceType) -> [Card] {
        let known = Set(cards.compactMap(\.primaryAccountIdentifier))
        let onDevice = livePasses.filter { $0.device == device && $0.activationState != .deactivated }
        let liveAccounts = Set(onDevice.map(\.primaryAccountIdentifier))
        let unclaimedSuffixes = Set(onDevice.filter { !known.contains($0.primaryAccountIdentifier) }.map(\.primaryAccountNumberSuffix))
        return cards.filter { card in
            guard card.status == .active else { return false }
            let presence = card.presence(on: device)
            let deadPassRecorded = presence.hasPass && presence.state == .notAdded
            let hasLivePass = card.primaryAccountIdentifier.map(liveAccounts.contains) ?? unclaimedSuffixes.contains(card.panLast4)
            return !hasLivePass || deadPassRecorded
        }
    }
}
