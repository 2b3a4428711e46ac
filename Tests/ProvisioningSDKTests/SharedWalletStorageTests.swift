import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import TestSupport
import Testing

/// The app's side: IssuerWallet writes a snapshot of every status it publishes, fetches art
/// in the background (valid art only), and wipes everything on sign-out.
@Suite("Shared wallet storage")
struct SharedWalletStorageTests {
    struct App {
        let folder: TemporaryDirectory
        let directory: SharedWalletDirectory
        let secrets: FileSecretStore
        let user: Locked<String?>
        let wallet: IssuerWallet
        let transport: ScriptedTransport

        /// `holdingCards`: each `GET cards` waits for the gate first.
        init(cards: [CardSummary], tokens: [TokenSearchResult] = [], passes: [WalletPass] = [], art: [String: Data] = [:], holdingCards gate: AsyncGate? = nil, wipeLockPatience: Duration = .seconds(2)) throws {
            folder = try TemporaryDirectory()
            directory = SharedWalletDirectory(containerURL: folder.url)
            secrets = FileSecretStore(directory: folder.url.appendingPathComponent("secrets"))
            let user = Locked<String?>("alice")
            self.user = user
            let server = Fixtures.server(cards: cards, tokens: tokens, art: art)
            transport = gate.map { gate in
                ScriptedTransport { request, _ in
                    if ScriptedTransport.operation(of: request) == .listCards { await gate.wait() }
                    return try await server.send(request)
                }
            } ?? server
            wallet = IssuerWallet(
                client: Fixtures.client(transport),
                passLibrary: FakePassLibrary(passes: passes),
                activationLinks: ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation"),
                sharing: WalletExtensionSharing(directory: directory, secrets: secrets, userId: { user.current }, now: { Date(timeIntervalSince1970: 1_790_000_000) }, wipeLockPatience: wipeLockPatience)
            )
        }
    }

    static func withArt(_ card: CardSummary) -> CardSummary {
        var card = card
        card.artURL = "/issuer/push-provisioning/cards/\(card.externalCardId)/art"
        return card
    }

    @Test func everyRefreshWritesTheSnapshotAndArtFollows() async throws {
        let app = try App(
            cards: [Self.withArt(Fixtures.card("card-1")), Fixtures.card("card-2", last4: "2222")],
            tokens: [Fixtures.token("DA-1", card: "card-1", status: .active)],
            passes: [Fixtures.pass("DA-1", account: "PAI-1", device: .phone)],
            art: ["card-1": TestPDF.onePage().data]
        )
        defer { app.folder.remove() }
        try await app.wallet.refreshStatus()
        let first = try #require(app.directory.readSnapshot())
        #expect(first.userId == "alice")
        #expect(first.cards.map(\.externalCardId) == ["card-1", "card-2"])
        #expect(first["card-1"]?.phone == .init(hasPass: true, state: .active))
        #expect(first["card-1"]?.watch == .absent)
        #expect(first["card-1"]?.primaryAccountIdentifier == "PAI-1")
        let storage = try #require(app.wallet.sharedStorage)
        await storage.artFetched()
        let withArt = try #require(app.directory.readSnapshot())
        #expect(withArt["card-1"]?.artFileName == "card-1.pdf")
        #expect(withArt["card-2"]?.artFileName == nil)
        #expect(app.directory.art(named: "card-1.pdf")?.info.format == .pdf)
        // Art already stored and fresh is not fetched again.
        try await app.wallet.refreshStatus()
        await storage.artFetched()
        #expect(app.transport.requests(for: .cardArt).count == 1)
        #expect(app.directory.readSnapshot()?["card-1"]?.artFileName == "card-1.pdf")
    }

    @Test func nothingIsWrittenWhileNobodyIsSignedIn() async throws {
        let app = try App(cards: [Fixtures.card("card-1")])
        defer { app.folder.remove() }
        app.user.withValue { $0 = nil }
        try await app.wallet.refreshStatus()
        #expect(app.directory.readSnapshotFile() == .missing)
    }

    @Test func signOutWipesSnapshotArtAndSession() async throws {
        let app = try App(cards: [Self.withArt(Fixtures.card("card-1"))], art: ["card-1": TestPNG.file()])
        defer { app.folder.remove() }
        try await app.wallet.refreshStatus()
        await app.wallet.sharedStorage?.artFetched()
        try ExtensionSessionStore(secrets: app.secrets).save(Fixtures.session())
        #expect(app.directory.storedArtFileName(externalCardId: "card-1") == "card-1.png")
        try await app.wallet.signOut()
        #expect(app.directory.readSnapshotFile() == .missing)
        #expect(app.directory.storedArtFileName(externalCardId: "card-1") == nil)
        #expect(try app.secrets.secret(for: ExtensionSessionStore.key) == nil)
        #expect(await app.wallet.latestStatus == nil)
    }

    /// Another process keeping the folder's lock (a Wallet extension stalled mid-write) cannot
    /// hold sign-out: past its patience the wipe goes on without the lock. What the holder
    /// writes after it is wiped again once it lets go — unless somebody signed in meanwhile,
    /// whose snapshot stays. (Before, sign-out waited for the lock as long as it was kept,
    /// blocking a thread of the cooperative pool all the while.)
    ///
    /// The second wipe goes by whose snapshot is there: when Bob signed in and the stalled
    /// holder then wrote Alice's snapshot over his (`writesOverTheNewSignIn`), it goes too.
    @Test(arguments: [(false, false), (true, false), (true, true)])
    func signOutDoesNotWaitOnALockAnotherProcessKeeps(signsInMeanwhile: Bool, writesOverTheNewSignIn: Bool) async throws {
        let app = try App(cards: [Fixtures.card("card-1")], wipeLockPatience: .milliseconds(100))
        defer { app.folder.remove() }
        let storage = try #require(app.wallet.sharedStorage)
        try await app.wallet.refreshStatus()
        try ExtensionSessionStore(secrets: app.secrets).save(Fixtures.session())
        // Another open file description, as another process's: flock excludes it.
        let other = open(app.directory.lockURL.path, O_RDWR | O_CREAT, 0o600)
        try #require(other >= 0)
        defer { close(other) }
        try #require(flock(other, LOCK_EX) == 0)
        var locked = true
        defer { if locked { flock(other, LOCK_UN) } }
        // A detached task: were sign-out to wait for the lock, the test would still go on.
        let signOut = Task.detached { try await app.wallet.signOut() }
        let deadline = ContinuousClock.now + .seconds(10)
        while app.directory.readSnapshotFile() != .missing, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(app.directory.readSnapshotFile() == .missing, "wiped within 10 s, the lock still kept")
        try await signOut.value
        #expect(try app.secrets.secret(for: ExtensionSessionStore.key) == nil)
        // The holder writes what it checked before the wipe.
        if !writesOverTheNewSignIn { try app.directory.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")], user: "alice")) }
        if signsInMeanwhile {
            app.user.withValue { $0 = "bob" }
            // Bob's session is saved before his first status is recorded; recording it (with
            // the signed-out cardholder's late snapshot there) keeps it.
            try ExtensionSessionStore(secrets: app.secrets).save(Fixtures.session(user: "bob"))
            try await app.wallet.refreshStatus()
            #expect(app.directory.readSnapshot()?.userId == "bob")
            #expect(ExtensionSessionStore(secrets: app.secrets).validSession(at: Date(timeIntervalSince1970: 1_790_000_000), userId: "bob") != nil, "bob's session stays")
        }
        if writesOverTheNewSignIn { try app.directory.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")], user: "alice")) }
        flock(other, LOCK_UN)
        locked = false
        await storage.secondWipeEnded()
        if writesOverTheNewSignIn {
            #expect(app.directory.readSnapshotFile() == .missing, "alice's snapshot, written over bob's, went")
            #expect(ExtensionSessionStore(secrets: app.secrets).validSession(at: Date(timeIntervalSince1970: 1_790_000_000), userId: "bob") != nil, "bob's session stays")
        } else if signsInMeanwhile {
            #expect(app.directory.readSnapshot()?.userId == "bob", "the second wipe left the new sign-in's folder alone")
        } else {
            #expect(app.directory.readSnapshotFile() == .missing, "wiped again once the lock was free")
        }
    }

    /// While sign-out waits for the lock: a status recorded then (through the storage) is
    /// dropped, since it may have been read for the cardholder leaving (the app leaves its
    /// identity provider after the wallet, so the user id does not tell); and a read the app
    /// starts then is made for the cardholder signing out, so the wallet neither publishes nor
    /// writes it.
    @Test func aStatusDuringTheSignOutWipeIsDroppedAndTheWalletsOwnReadNotPublished() async throws {
        let app = try App(cards: [Fixtures.card("card-1")], wipeLockPatience: .seconds(20))
        defer { app.folder.remove() }
        let storage = try #require(app.wallet.sharedStorage)
        try await app.wallet.refreshStatus()
        let status = try #require(await app.wallet.latestStatus)
        let other = open(app.directory.lockURL.path, O_RDWR | O_CREAT, 0o600)
        try #require(other >= 0)
        defer { close(other) }
        func waitForTheWipe() async throws {
            let deadline = ContinuousClock.now + .seconds(20)
            while await !storage.isSigningOut, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            try #require(await storage.isSigningOut, "the sign-out waits for the lock")
        }
        // Through the storage.
        try #require(flock(other, LOCK_EX) == 0)
        let first = Task.detached { try await app.wallet.signOut() }
        try await waitForTheWipe()
        let recorded = Task.detached { try await storage.record(status) }
        try await Task.sleep(for: .milliseconds(50))
        flock(other, LOCK_UN)
        try await first.value
        try await recorded.value
        #expect(app.directory.readSnapshotFile() == .missing, "not written after the wipe either")
        // Once the sign-out has returned, a status is written again.
        try await storage.record(status)
        #expect(app.directory.readSnapshot()?.cards.map(\.externalCardId) == ["card-1"])
        // The wallet's own read.
        try #require(flock(other, LOCK_EX) == 0)
        let second = Task.detached { try await app.wallet.signOut() }
        try await waitForTheWipe()
        let read = Task.detached { try await app.wallet.refreshStatus() }
        try await Task.sleep(for: .milliseconds(50))
        flock(other, LOCK_UN)
        try await second.value
        _ = try await read.value
        #expect(app.directory.readSnapshotFile() == .missing, "the signed-out cardholder's read was not written")
        #expect(await app.wallet.latestStatus == nil)
    }

    /// A wait for the folder's lock from `async` code holds no thread: more waiters than the
    /// cooperative pool has threads all wait, and the task that frees the lock still runs.
    @Test func waitingForTheLockHoldsNoThread() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        let other = open(directory.lockURL.path, O_RDWR | O_CREAT, 0o600)
        try #require(other >= 0)
        defer { close(other) }
        try #require(flock(other, LOCK_EX) == 0)
        let waiters = ProcessInfo.processInfo.activeProcessorCount * 4
        let ran = Locked(0)
        let outcomes = Task {
            await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<waiters {
                    group.addTask { (try? await directory.withLockWithoutBlocking(waitingAtMost: .seconds(30)) { ran.withValue { $0 += 1 } }) != nil }
                }
                return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(ran.current == 0, "the lock is kept: nobody ran")
        flock(other, LOCK_UN)
        // Were a waiter to hold its thread, the task freeing the lock could not run until
        // waiters gave up (busy, at their patience's end): not all would have had the lock.
        #expect(await outcomes.value == waiters, "every waiter had the lock once it was free")
        #expect(ran.current == waiters)
    }

    @Test func aReadStillRunningAtSignOutPublishesAndWritesNothing() async throws {
        let gate = AsyncGate()
        let app = try App(cards: [Fixtures.card("card-1")], holdingCards: gate)
        defer { app.folder.remove() }
        let read = Task { try await app.wallet.refreshStatus() }
        await gate.waitForArrivals(1)
        // The app signs the wallet out first, its identity provider after: the user id is
        // still there when the read comes back.
        try await app.wallet.signOut()
        gate.open()
        #expect(try await read.value["card-1"] != nil, "its caller still gets what it read")
        #expect(await app.wallet.latestStatus == nil)
        #expect(app.directory.readSnapshotFile() == .missing)
        // A read started after the sign-out (the next sign-in) publishes as before.
        try await app.wallet.refreshStatus()
        #expect(await app.wallet.latestStatus?["card-1"] != nil)
        #expect(app.directory.readSnapshot()?.userId == "alice")
    }

    /// A read that began for one cardholder and ends after another signed in (without the
    /// first signing out) is neither shown to nor written for the new one.
    @Test func aReadForThePreviousCardholderIsNotPublishedForTheNextOne() async throws {
        let gate = AsyncGate()
        let app = try App(cards: [Fixtures.card("card-1")], holdingCards: gate)
        defer { app.folder.remove() }
        let read = Task { try await app.wallet.refreshStatus() }
        await gate.waitForArrivals(1)
        app.user.withValue { $0 = "bob" }
        gate.open()
        #expect(try await read.value["card-1"] != nil, "its caller still gets what it read")
        #expect(await app.wallet.latestStatus == nil)
        #expect(app.directory.readSnapshotFile() == .missing, "alice's cards not written as bob's")
        // Bob's own read is.
        try await app.wallet.refreshStatus()
        #expect(app.directory.readSnapshot()?.userId == "bob")
    }

    /// A secret store that notes whether the shared folder was still there when it was cleared,
    /// and can refuse to be cleared.
    final class WatchedSecrets: SecretStore {
        let inner = MemorySecretStore()
        let folder: URL
        let refuses: Bool
        let folderThereWhenCleared = Locked<[Bool]>([])
        init(folder: URL, refuses: Bool) {
            self.folder = folder
            self.refuses = refuses
        }
        func secret(for key: String) throws -> Data? { try inner.secret(for: key) }
        func setSecret(_ secret: Data, for key: String) throws { try inner.setSecret(secret, for: key) }
        func removeSecret(for key: String) throws { try inner.removeSecret(for: key) }
        func removeAllSecrets() throws {
            folderThereWhenCleared.withValue { $0.append(FileManager.default.fileExists(atPath: folder.path)) }
            if refuses { throw SharedStorageError(.busy, "refused for the test") }
            try inner.removeAllSecrets()
        }
    }

    /// Sign-out clears the secrets before the folder (a folder that cannot be removed must not
    /// keep the extensions' session), and removes the folder even when the secrets refuse.
    @Test(arguments: [false, true])
    func signOutClearsTheSecretsFirstAndTriesBoth(secretsRefuse: Bool) async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url.appendingPathComponent("group"))
        let secrets = WatchedSecrets(folder: directory.url, refuses: secretsRefuse)
        try ExtensionSessionStore(secrets: secrets).save(Fixtures.session(user: "alice"))
        let storage = SharedWalletStorage(
            sharing: WalletExtensionSharing(directory: directory, secrets: secrets, userId: { "alice" }, now: { Date(timeIntervalSince1970: 1_790_000_000) }),
            client: Fixtures.client(Fixtures.server(cards: [], tokens: []))
        )
        try await storage.record(WalletStatusSnapshot(cards: [], passLibraryAvailable: true))
        #expect(directory.readSnapshot()?.userId == "alice")
        var failure: (any Error)?
        do { try await storage.signOut() } catch { failure = error }
        #expect((failure != nil) == secretsRefuse, "a refusal is reported, and only then: \(String(describing: failure))")
        #expect(secrets.folderThereWhenCleared.current.first == true, "the secrets went first")
        #expect(directory.readSnapshotFile() == .missing, "the folder went too")
        if !secretsRefuse {
            #expect(try secrets.secret(for: ExtensionSessionStore.key) == nil)
        }
    }

    /// Another cardholder's extension session with no snapshot of theirs (they signed in
    /// through Wallet's sign-in and no status was written), or a snapshot that cannot be read
    /// as anybody's: the next cardholder's first status removes it before it is written.
    @Test(arguments: ["session only", "corrupt snapshot"])
    func anotherCardholdersSessionOrAnUnreadableSnapshotGoesBeforeTheFirstStatus(left: String) async throws {
        let app = try App(cards: [Fixtures.card("card-1")])
        defer { app.folder.remove() }
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        if left == "corrupt snapshot" {
            // Alice's add through Wallet beside a snapshot nobody can read; Bob's own session,
            // saved before his first status, stays.
            try app.directory.recordExtensionAdd(ExtensionAdd(externalCardId: "card-1", device: .phone, userId: "alice", at: now), now: now)
            try Data("{not a snapshot".utf8).write(to: app.directory.snapshotURL)
            try ExtensionSessionStore(secrets: app.secrets).save(Fixtures.session(user: "bob"))
        } else {
            try ExtensionSessionStore(secrets: app.secrets).save(Fixtures.session(user: "alice"))
        }
        app.user.withValue { $0 = "bob" }
        try await app.wallet.refreshStatus()
        #expect(app.directory.readSnapshot()?.userId == "bob")
        let stored = try app.secrets.secret(for: ExtensionSessionStore.key).map { try JSONDecoder().decode(ExtensionSession.self, from: $0) }
        if left == "corrupt snapshot" {
            #expect(stored?.userId == "bob", "bob's own session stays")
            #expect(app.directory.readExtensionAdds(now: now).isEmpty, "alice's add went with the folder")
        } else {
            #expect(stored == nil, "alice's session went")
        }
    }

    @Test func anotherCardholderSigningInRemovesThePreviousSession() async throws {
        let app = try App(cards: [Fixtures.card("card-1")])
        defer { app.folder.remove() }
        try await app.wallet.refreshStatus()
        try ExtensionSessionStore(secrets: app.secrets).save(Fixtures.session(user: "alice"))
        app.user.withValue { $0 = "bob" }
        try await app.wallet.refreshStatus()
        #expect(app.directory.readSnapshot()?.userId == "bob")
        #expect(try app.secrets.secret(for: ExtensionSessionStore.key) == nil)
    }
}

/// Card art reaches the shared folder only through CardArtValidator: real PNG and PDF files
/// of the right and wrong sizes, made by the tests.
@Suite("Card art in the shared folder")
struct SharedCardArtTests {
    @Test(arguments: [
        ("png 1536×969", TestPNG.file(), "card-1.png"),
        ("pdf 1536×969 pt", TestPDF.onePage().data, "card-1.pdf"),
        ("pdf 3072×1938 pt, any size of the aspect", TestPDF.onePage(page: "/MediaBox [0 0 3072 1938]").data, "card-1.pdf"),
    ])
    func acceptableArtIsStored(_ name: String, _ file: Data, _ expected: String) throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        #expect(try directory.storeArt(file, externalCardId: "card-1") == expected, "\(name)")
        #expect(directory.art(named: expected)?.data == file)
    }

    @Test(arguments: [
        ("png too small", TestPNG.file(width: 1024, height: 768), CardArtError.Code.pngWrongSize),
        ("png portrait", TestPNG.file(width: 969, height: 1536), .pngWrongSize),
        ("png truncated", TestPNG.file().prefix(2_000), .pngTruncated),
        ("pdf portrait", TestPDF.onePage(page: "/MediaBox [0 0 969 1536]").data, .pdfNotLandscape),
        ("pdf square", TestPDF.onePage(page: "/MediaBox [0 0 1000 1000]").data, .pdfNotLandscape),
        ("pdf wrong aspect", TestPDF.onePage(page: "/MediaBox [0 0 1600 900]").data, .pdfWrongAspect),
        ("jpeg", Data([0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10]), .unknownFormat),
    ])
    func unacceptableArtIsRefusedAndNothingIsStored(_ name: String, _ file: Data, _ code: CardArtError.Code) throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        #expect(performing: { try directory.storeArt(file, externalCardId: "card-1") }, throws: { ($0 as? CardArtError)?.code == code })
        #expect(directory.storedArtFileName(externalCardId: "card-1") == nil, "\(name)")
    }

    @Test func aFileTamperedWithAfterStoringIsNotServed() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        let name = try directory.storeArt(TestPNG.file(), externalCardId: "card-1")
        try TestPNG.file(width: 10, height: 10).write(to: directory.artDirectoryURL.appendingPathComponent(name))
        #expect(directory.art(named: name) == nil)
        #expect(directory.art(named: "../wallet-snapshot.json") == nil)
    }
}
