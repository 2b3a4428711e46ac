import Foundation
import ProvisioningModels

/// Reads the wallet status of the cardholder's cards: the device's passes, one
/// `tokens/searches` call for all of them, PassKit's `canAddSecureElementPass` per known
/// account and the app's word on a paired Watch, then ``WalletStatusCalculator``.
public struct WalletStatusReader: Sendable {
    /// TMP.
    public let client: TMPClient
    /// This iPhone's and the paired Watch's passes.
    public let passLibrary: any PassLibrary

    /// Creates a reader.
    public init(client: TMPClient, passLibrary: any PassLibrary) {
        self.client = client
        self.passLibrary = passLibrary
    }

    /// The status of `cards`, or of the cards `GET cards` lists when `cards` is nil.
    public func read(cards: [CardSummary]? = nil) async throws(TMPClientError) -> WalletStatusSnapshot {
        try await read(cards: cards, addedPasses: []).snapshot
    }

    /// The status of `cards` (or of the cards `GET cards` lists), with the passes the add sheet
    /// reported added standing for their cards until TMP lists them; also the records still
    /// awaited after this read (``AddedPass/matched(_:passes:tokens:)``, then
    /// ``AddedPass/stillAwaited(_:passes:tokens:now:)``).
    public func read(cards: [CardSummary]? = nil, addedPasses: [AddedPass], now: Date = Date()) async throws(TMPClientError) -> (snapshot: WalletStatusSnapshot, stillAwaited: [AddedPass]) {
        let listed: [CardSummary]
        if let cards {
            listed = cards
        } else {
            listed = try await client.cards()
        }
        let available = await passLibrary.isPassLibraryAvailable()
        let passes = available ? await passLibrary.secureElementPasses() : []
        let tokens = try await client.searchTokens(passes.map(\.deviceAccountIdentifier))
        let added = AddedPass.stillAwaited(AddedPass.matched(addedPasses, passes: passes, tokens: tokens), passes: passes, tokens: tokens, now: now)
        var addable = Set<String>()
        for account in Set(WalletStatusCalculator.primaryAccountIdentifiers(passes: passes, tokens: tokens, addedPasses: added).values) {
            if await passLibrary.canAddSecureElementPass(primaryAccountIdentifier: account) {
                addable.insert(account)
            }
        }
        let watchPaired = available ? await passLibrary.isWatchPaired() : nil
        let snapshot = WalletStatusCalculator.statuses(.init(cards: listed, passes: passes, tokens: tokens, passLibraryAvailable: available, addablePrimaryAccountIdentifiers: addable, watchPaired: watchPaired, addedPasses: added))
        return (snapshot, added)
    }
}
