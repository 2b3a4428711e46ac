import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import TestSupport
import Testing

/// Wallet's `passEntries` / `remotePassEntries`: refreshed from TMP when the session allows
/// and time remains, else from the snapshot — always inside the budget.
@Suite("Wallet extension: pass entries")
struct ExtensionEntriesTests {
    @Test func aHangingServerIsAnsweredFromTheSnapshotWhenTheRefreshBudgetEnds() async throws {
        let world = try ExtensionHarness(transport: ScriptedTransport { _, _ in try await ScriptedTransport.hang() }, refreshBudget: .seconds(5))
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1"), Fixtures.snapshotCard("card-2", last4: "2222")]))
        try world.signIn()
        let entries = Task { await world.walletExtension.passEntries(for: .phone) }
        // The refresh's budget and the client's own timeout for `GET cards`.
        await world.clock.waitForSleepers(2)
        world.clock.advance(by: .seconds(4))
        #expect(world.clock.sleeperCount == 2)
        world.clock.advance(by: .seconds(1))
        let answered = await entries.value
        #expect(answered.map(\.id) == ["card-1", "card-2"])
        #expect(world.clock.now.offset == .seconds(5))
        #expect(world.clock.now.offset < AddPassRequestGenerator.walletBudget)
        #expect(world.transport.requests(for: .listCards).count == 1)
    }

    @Test func anExpiredSessionAnswersFromTheSnapshotWithoutTheNetwork() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn(lifetime: 300)
        world.date.advance(600)
        let entries = await world.walletExtension.passEntries(for: .phone)
        #expect(entries.map(\.id) == ["card-1"])
        #expect(world.transport.requests.isEmpty)
    }

    @Test func aFreshReadReplacesTheSnapshotAndDropsCardsNowOnTheDevice() async throws {
        // Since the snapshot, card-2 appeared at TMP and card-1 was added to the iPhone.
        let cards = [Fixtures.card("card-1"), Fixtures.card("card-2", last4: "2222")]
        let tokens = [Fixtures.token("DA-1", card: "card-1", status: .active)]
        let world = try ExtensionHarness(passes: [Fixtures.pass("DA-1", account: "PAI-1", device: .phone)], transport: Fixtures.server(cards: cards, tokens: tokens))
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn()
        let phone = await world.walletExtension.passEntries(for: .phone)
        #expect(phone.map(\.id) == ["card-2"])
        let written = try #require(world.directory.readSnapshot())
        #expect(written.cards.map(\.externalCardId) == ["card-1", "card-2"])
        #expect(written[ "card-1"]?.phone == .init(hasPass: true, state: .active))
        #expect(written[ "card-1"]?.primaryAccountIdentifier == "PAI-1")
        #expect(written.userId == "alice")
    }

    @Test func iPhoneAndWatchEntriesDifferByDeviceIdentifierAndAccount() async throws {
        let world = try ExtensionHarness(passes: [Fixtures.pass("DA-1", account: "PAI-1", device: .phone)])
        defer { world.remove() }
        try world.write(Fixtures.snapshot([
            Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active),
            Fixtures.snapshotCard("card-2", last4: "2222"),
        ]))
        let phone = await world.walletExtension.passEntries(for: .phone)
        let watch = await world.walletExtension.passEntries(for: .watch)
        #expect(phone.map(\.id) == ["card-2"])
        #expect(watch.map(\.id) == ["card-1:WATCH", "card-2:WATCH"])
        let onWatch = try #require(watch.first)
        #expect(onWatch.identifier == ExtensionEntryIdentifier(externalCardId: "card-1", device: .watch))
        #expect(onWatch.configuration.target == .watch)
        #expect(onWatch.configuration.primaryAccountIdentifier == "PAI-1")
        #expect(watch.last?.configuration.primaryAccountIdentifier == nil)
        #expect(phone.first?.configuration.primaryAccountIdentifier == nil)
        #expect(phone.first?.configuration.target == .phone)
    }

    @Test func anEntryCarriesWhatWalletShows() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        try world.directory.storeArt(TestPDF.onePage().data, externalCardId: "card-1")
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1", last4: "4242", art: "card-1.pdf")]))
        let entry = try #require(await world.walletExtension.passEntries(for: .phone).first)
        #expect(entry.title == "Everyday Debit")
        #expect(entry.configuration.encryptionScheme == "ECC_V2")
        #expect(entry.configuration.cardholderName == "Jane Appleseed")
        #expect(entry.configuration.primaryAccountSuffix == "4242")
        #expect(entry.configuration.localizedDescription == "Everyday Debit")
        #expect(entry.configuration.paymentNetwork == .visa)
        #expect(entry.configuration.externalCardId == "card-1")
        #expect(entry.art?.info.format == .pdf)
        #expect(entry.art?.data == TestPDF.onePage().data)
    }

    @Test func artMissingForANewCardIsFetchedValidatedAndStored() async throws {
        var cards = [Fixtures.card("card-1"), Fixtures.card("card-2", last4: "2222")]
        cards[0].artURL = "/issuer/push-provisioning/cards/card-1/art"
        cards[1].artURL = "/issuer/push-provisioning/cards/card-2/art"
        let server = Fixtures.server(cards: cards, tokens: [], art: ["card-1": TestPNG.file(), "card-2": TestPNG.file(width: 1024, height: 768)])
        let world = try ExtensionHarness(transport: server)
        defer { world.remove() }
        try world.signIn()
        let entries = await world.walletExtension.passEntries(for: .phone)
        #expect(entries.map(\.id) == ["card-1", "card-2"])
        #expect(entries[0].art?.info.dimensions == .pixels(width: 1536, height: 969))
        // The 1024 × 768 PNG is not Apple's size: refused, not stored, the entry has no art.
        #expect(entries[1].art == nil)
        #expect(world.directory.storedArtFileName(externalCardId: "card-1") == "card-1.png")
        #expect(world.directory.storedArtFileName(externalCardId: "card-2") == nil)
        #expect(server.requests(for: .cardArt).count == 2)
    }

    /// Art that has not come when the art budget ends is given up: the entries answer without
    /// it, and art that comes after the answer (`answersLate`, whatever its cancellation) is
    /// not written — iOS may suspend the extension once it has answered, and kills one
    /// suspended while it holds the shared folder's lock.
    @Test(arguments: [false, true])
    func artNotInTimeIsGivenUpAndNotWrittenLater(answersLate: Bool) async throws {
        var card = Fixtures.card("card-1")
        card.artURL = "/issuer/push-provisioning/cards/card-1/art"
        let listing = Fixtures.server(cards: [card], tokens: [], art: ["card-1": TestPNG.file()])
        let late = AsyncGate()
        let server = ScriptedTransport { request, _ in
            if ScriptedTransport.operation(of: request) == .cardArt {
                guard answersLate else { return try await ScriptedTransport.hang() }
                await late.wait()
            }
            return try await listing.send(request)
        }
        let world = try ExtensionHarness(transport: server, refreshBudget: .seconds(5), artBudget: .seconds(3))
        defer { world.remove() }
        try world.signIn()
        let entries = Task { await world.walletExtension.passEntries(for: .phone) }
        // Refreshed at once; then the art budget and the art call's own timeout are asleep.
        while server.requests(for: .cardArt).isEmpty { await Task.yield() }
        await world.clock.waitForSleepers(2)
        world.clock.advance(by: .seconds(3))
        let answered = await entries.value
        #expect(answered.map(\.id) == ["card-1"])
        #expect(answered.first?.art == nil)
        #expect(world.clock.now.offset == .seconds(3))
        late.open()
        for _ in 0..<(answersLate ? 100 : 0) {
            try await Task.sleep(for: .milliseconds(10))
            if world.directory.storedArtFileName(externalCardId: "card-1") != nil { break }
        }
        #expect(world.directory.storedArtFileName(externalCardId: "card-1") == nil)
    }

    /// Art whose write waits for the shared folder's lock when the art budget ends: the entries
    /// wait for that write to end (here: refused for the lock, held past the patience) rather
    /// than answer Wallet with the write still to come.
    @Test func artWaitingForTheLockAtTheBudgetsEndIsNeverWrittenAfterTheAnswer() async throws {
        var card = Fixtures.card("card-1")
        card.artURL = "/issuer/push-provisioning/cards/card-1/art"
        let listing = Fixtures.server(cards: [card], tokens: [], art: ["card-1": TestPNG.file()])
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        // Once the snapshot is written, another process (here: another descriptor of the lock
        // file) takes the lock, and the art arrives.
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        defer { release.signal() }
        let artAnswers = AsyncGate()
        let server = ScriptedTransport { request, _ in
            if ScriptedTransport.operation(of: request) == .cardArt {
                Thread {
                    try? directory.withLock {
                        held.signal()
                        release.wait()
                    }
                }.start()
                held.wait()
                await artAnswers.wait()
            }
            return try await listing.send(request)
        }
        let world = try ExtensionHarness(folder: folder, transport: server, refreshBudget: .seconds(5), artBudget: .seconds(3))
        try world.signIn()
        let entries = Task { await world.walletExtension.passEntries(for: .phone) }
        // The art budget and the art call's own timeout are asleep, the art held back.
        await artAnswers.waitForArrivals(1)
        await world.clock.waitForSleepers(2)
        // The art arrives; its write waits for the lock (250 ms) when the budget ends. (On a
        // host too slow to end the budget within them, the write gives up first: no hang.)
        artAnswers.open()
        try await Task.sleep(for: .milliseconds(50))
        world.clock.advance(by: .seconds(3))
        let answered = await entries.value
        release.signal()
        #expect(answered.first?.art == nil)
        for _ in 0..<50 {
            try await Task.sleep(for: .milliseconds(10))
            if directory.storedArtFileName(externalCardId: "card-1") != nil { break }
        }
        #expect(directory.storedArtFileName(externalCardId: "card-1") == nil, "the art was written after Wallet had its answer")
    }

    @Test func aRefusedSessionIsDroppedAndTheSnapshotAnswers() async throws {
        let world = try ExtensionHarness(transport: ScriptedTransport { _, _ in ScriptedTransport.error(401, code: "unauthorized", message: "token expired") })
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn()
        #expect(await world.walletExtension.passEntries(for: .phone).map(\.id) == ["card-1"])
        #expect(ExtensionSessionStore(secrets: world.secrets).validSession(at: world.date.now) == nil)
        #expect(await world.walletExtension.status().requiresAuthentication)
    }

    @Test func aRefusalRemovesOnlyTheRefusedSessionNotOneSavedMeanwhile() async throws {
        // While TMP refuses the old session, the authorization extension saves a fresh one.
        let secrets = Locked<FileSecretStore?>(nil)
        let fresh = Fixtures.session(token: "fresh-jwt", lifetime: 600)
        let world = try ExtensionHarness(transport: ScriptedTransport { _, _ in
            if let store = secrets.current { try ExtensionSessionStore(secrets: store).save(fresh) }
            return ScriptedTransport.error(401, code: "unauthorized", message: "token expired")
        })
        defer { world.remove() }
        secrets.withValue { $0 = world.secrets }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn()
        #expect(await world.walletExtension.passEntries(for: .phone).map(\.id) == ["card-1"])
        #expect(ExtensionSessionStore(secrets: world.secrets).validSession(at: world.date.now) == fresh)
    }

    @Test func anotherCardholdersSnapshotIsNeverOffered() async throws {
        let world = try ExtensionHarness(transport: ScriptedTransport { _, _ in ScriptedTransport.error(503, code: "unavailable", message: "down") })
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")], user: "alice"))
        try world.signIn(user: "bob")
        #expect(await world.walletExtension.passEntries(for: .phone).isEmpty)
    }

    @Test func noSnapshotAndNoSessionIsNoEntries() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        #expect(await world.walletExtension.passEntries(for: .watch).isEmpty)
        #expect(world.transport.requests.isEmpty)
    }
}
