import Foundation
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
        init(cards: [CardSummary], tokens: [TokenSearchResult] = [], passes: [WalletPass] = [], art: [String: Data] = [:], holdingCards gate: AsyncGate? = nil) throws {
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
                sharing: WalletExtensionSharing(directory: directory, secrets: secrets, userId: { user.current }, now: { Date(timeIntervalSince1970: 1_790_000_000) })
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
