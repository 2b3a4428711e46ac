import Foundation
#if canImport(Glibc)
import Glibc
#endif
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import TestSupport
import Testing

/// A Wallet extension's refresh that began before the app signed out ends after it: what it
/// read is neither written to the shared folder nor offered.
@Suite("Wallet extension: refresh across a sign-out")
struct ExtensionSignOutRaceTests {
    /// The world, with TMP holding every `GET cards` answer at `gate`.
    static func world(holdingAt gate: AsyncGate) throws -> ExtensionHarness {
        let server = Fixtures.server(cards: [Fixtures.card("card-1"), Fixtures.card("card-2", last4: "2222")], tokens: [])
        return try ExtensionHarness(transport: ScriptedTransport { request, _ in
            if ScriptedTransport.operation(of: request) == .listCards { await gate.wait() }
            return try await server.send(request)
        })
    }

    /// The app's side of the sign-out, as `IssuerWallet.signOut()` runs it.
    static func signOut(_ world: ExtensionHarness) async throws {
        let sharing = WalletExtensionSharing(directory: world.directory, secrets: world.secrets, userId: { "alice" })
        try await SharedWalletStorage(sharing: sharing, client: Fixtures.client(world.transport)).signOut()
    }

    @Test func aRefreshAnsweredAfterSignOutWritesAndOffersNothing() async throws {
        let gate = AsyncGate()
        let world = try Self.world(holdingAt: gate)
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn()
        let entries = Task { await world.walletExtension.passEntries(for: .phone) }
        await gate.waitForArrivals(1)
        try await Self.signOut(world)
        #expect(world.directory.readSnapshotFile() == .missing)
        gate.open()
        #expect(await entries.value.isEmpty)
        #expect(world.directory.readSnapshotFile() == .missing, "the signed-out cardholder's cards came back")
    }

    @Test func aRefreshAnsweredAfterAnotherCardholderSignedInLeavesTheirSnapshot() async throws {
        let gate = AsyncGate()
        let world = try Self.world(holdingAt: gate)
        defer { world.remove() }
        try world.signIn(user: "alice")
        let entries = Task { await world.walletExtension.passEntries(for: .phone) }
        await gate.waitForArrivals(1)
        try await Self.signOut(world)
        // Bob signs in: the app writes his snapshot, the authorization extension his session.
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-9", last4: "9999")], user: "bob"))
        try world.signIn(user: "bob")
        gate.open()
        #expect(await entries.value.isEmpty, "alice's cards are not offered, nor bob's for alice's request")
        let stored = try #require(world.directory.readSnapshot())
        #expect(stored.userId == "bob")
        #expect(stored.cards.map(\.externalCardId) == ["card-9"])
    }

    @Test func artArrivingAfterSignOutIsNotStoredAndNothingIsOffered() async throws {
        // The refresh wrote the snapshot while alice was signed in; the sign-out comes while
        // her cards' art is on its way.
        var card = Fixtures.card("card-1")
        card.artURL = "/issuer/push-provisioning/cards/card-1/art"
        let server = Fixtures.server(cards: [card], tokens: [], art: ["card-1": TestPNG.file()])
        let gate = AsyncGate()
        let world = try ExtensionHarness(transport: ScriptedTransport { request, _ in
            if ScriptedTransport.operation(of: request) == .cardArt { await gate.wait() }
            return try await server.send(request)
        })
        defer { world.remove() }
        try world.signIn()
        let entries = Task { await world.walletExtension.passEntries(for: .phone) }
        await gate.waitForArrivals(1)
        #expect(world.directory.readSnapshot()?.cards.map(\.externalCardId) == ["card-1"])
        try await Self.signOut(world)
        gate.open()
        #expect(await entries.value.isEmpty, "the signed-out cardholder's cards were offered")
        #expect(world.directory.storedArtFileName(externalCardId: "card-1") == nil, "her art was stored after the sign-out")
        #expect(!FileManager.default.fileExists(atPath: world.directory.url.path), "the wiped folder came back")
    }

    @Test func aRefreshStillSignedInWritesAsBefore() async throws {
        let gate = AsyncGate()
        let world = try Self.world(holdingAt: gate)
        defer { world.remove() }
        try world.signIn()
        gate.open()
        #expect(await world.walletExtension.passEntries(for: .phone).map(\.id) == ["card-1", "card-2"])
        #expect(world.directory.readSnapshot()?.cards.map(\.externalCardId) == ["card-1", "card-2"])
    }

    @Test func theSharedFolderLockIsExclusive() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        let events = Locked<[String]>([])
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? directory.withLock {
                events.withValue { $0.append("first in") }
                entered.signal()
                release.wait()
                events.withValue { $0.append("first out") }
            }
            finished.signal()
        }
        entered.wait()
        Thread.detachNewThread {
            _ = try? directory.withLock { events.withValue { $0.append("second") } }
            finished.signal()
        }
        // Time for the second thread to get in, were the lock not exclusive.
        Thread.sleep(forTimeInterval: 0.2)
        #expect(events.current == ["first in"])
        release.signal()
        finished.wait()
        finished.wait()
        #expect(events.current == ["first in", "first out", "second"])
    }

    /// Waited for a bounded time, the lock another process keeps is given up on (`busy`,
    /// `body` not run); once free it is taken.
    @Test func aBoundedWaitForTheLockGivesUp() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        _ = try directory.withLock {}
        // Another open file description, as another process's: flock excludes it.
        let other = open(directory.lockURL.path, O_RDWR)
        #expect(other >= 0)
        defer { close(other) }
        #expect(flock(other, LOCK_EX) == 0)
        let ran = Locked(false)
        let refused = #expect(throws: SharedStorageError.self) {
            try directory.withLock(waitingAtMost: .milliseconds(50)) { ran.withValue { $0 = true } }
        }
        #expect(refused?.code == .busy)
        #expect(!ran.current)
        flock(other, LOCK_UN)
        try directory.withLock(waitingAtMost: .milliseconds(50)) { ran.withValue { $0 = true } }
        #expect(ran.current)
    }

    /// The Wallet extension does not wait on a lock the app keeps (stalled mid-sign-out):
    /// past its patience it writes nothing and answers from the snapshot it has.
    @Test func passEntriesDoNotWaitOnALockTheAppKeeps() async throws {
        let world = try ExtensionHarness(transport: Fixtures.server(cards: [Fixtures.card("card-1"), Fixtures.card("card-2", last4: "2222")], tokens: []))
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn()
        _ = try world.directory.withLock {}
        let app = open(world.directory.lockURL.path, O_RDWR)
        #expect(app >= 0)
        defer { close(app) }
        #expect(flock(app, LOCK_EX) == 0)
        // The refresh read two cards, but could not write them under the lock: the stored
        // snapshot answers.
        #expect(await world.walletExtension.passEntries(for: .phone).map(\.id) == ["card-1"])
        #expect(world.directory.readSnapshot()?.cards.map(\.externalCardId) == ["card-1"])
        flock(app, LOCK_UN)
        #expect(await world.walletExtension.passEntries(for: .phone).map(\.id) == ["card-1", "card-2"])
    }
}
