import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

/// The Watch's pairing as the pass library knows it: a known "no Watch" offers no Watch
/// entries; a paired or unknown Watch is offered as the snapshot and its passes say.
@Suite("Wallet extension: Watch pairing")
struct ExtensionWatchPairingTests {
    @Test(arguments: [(Bool?.some(false), false), (true, true), (nil, true)])
    func theWatchIsOfferedUnlessNoneIsKnownToBePaired(_ paired: Bool?, _ offered: Bool) async throws {
        let cards = [Fixtures.card("card-1"), Fixtures.card("card-2", last4: "2222")]
        let tokens = [Fixtures.token("DA-1", card: "card-1", status: .active)]
        let world = try ExtensionHarness(passes: [Fixtures.pass("DA-1", account: "PAI-1", device: .phone)], watchPaired: paired, transport: Fixtures.server(cards: cards, tokens: tokens))
        defer { world.remove() }
        try world.write(Fixtures.snapshot([
            Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active),
            Fixtures.snapshotCard("card-2", last4: "2222"),
        ]))
        try world.signIn()

        let status = await world.walletExtension.status()
        #expect(status.passEntriesAvailable)
        #expect(status.remotePassEntriesAvailable == offered)
        // The synchronous form a PassKit adapter calls on the main thread.
        let passes = await world.passes.secureElementPasses()
        #expect(world.walletExtension.status(passLibraryAvailable: true, passes: passes, watchPaired: paired).remotePassEntriesAvailable == offered)

        let watch = await world.walletExtension.passEntries(for: .watch)
        #expect(watch.map(\.id) == (offered ? ["card-1:WATCH", "card-2:WATCH"] : []))
        // Not offering the Watch takes no call to TMP.
        #expect(world.transport.requests(for: .listCards).count == (offered ? 1 : 0))
        let phone = await world.walletExtension.passEntries(for: .phone)
        #expect(phone.map(\.id) == ["card-2"])
    }
}
