import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

/// Wallet's `status`: from the snapshot, the session and the live passes — never the network.
@Suite("Wallet extension: status")
struct ExtensionStatusTests {
    @Test func noSnapshotMeansNothingToOfferAndSignInFirst() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        let status = await world.walletExtension.status()
        #expect(status == ExtensionStatus(requiresAuthentication: true, passEntriesAvailable: false, remotePassEntriesAvailable: false))
        #expect(world.transport.requests.isEmpty)
    }

    @Test func aCorruptSnapshotMeansNothingToOffer() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        try world.signIn()
        try FileManager.default.createDirectory(at: world.directory.url, withIntermediateDirectories: true)
        try Data(#"{"schemaVersion":1,"userId":"alice","cards":[{"externalCardId":"#.utf8).write(to: world.directory.snapshotURL)
        let status = await world.walletExtension.status()
        #expect(!status.passEntriesAvailable && !status.remotePassEntriesAvailable)
    }

    @Test func aNewerSchemaMeansNothingToOffer() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        var snapshot = Fixtures.snapshot([Fixtures.snapshotCard("card-1")])
        snapshot.schemaVersion = 7
        try FileManager.default.createDirectory(at: world.directory.url, withIntermediateDirectories: true)
        try JSONEncoder().encode(snapshot).write(to: world.directory.snapshotURL)
        let status = await world.walletExtension.status()
        #expect(!status.passEntriesAvailable && !status.remotePassEntriesAvailable)
    }

    @Test func aCardOnNeitherDeviceIsAvailableForBothAndNoNetworkIsUsed() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn()
        let status = await world.walletExtension.status()
        #expect(status == ExtensionStatus(requiresAuthentication: false, passEntriesAvailable: true, remotePassEntriesAvailable: true))
        #expect(world.transport.requests.isEmpty)
    }

    @Test func anExpiredSessionRequiresAuthenticationButStillShowsTheCards() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn(lifetime: 300)
        world.date.advance(301)
        let status = await world.walletExtension.status()
        #expect(status == ExtensionStatus(requiresAuthentication: true, passEntriesAvailable: true, remotePassEntriesAvailable: true))
    }

    /// Wallet reuses `status`'s answer while the cardholder picks a card: a session about to
    /// expire asks for a sign-in there, yet still serves the calls until it expires.
    @Test func aSessionWithLessThanTheMarginLeftRequiresAuthenticationButStillServesTheCalls() async throws {
        let world = try ExtensionHarness(transport: Fixtures.server(cards: [Fixtures.card("card-1")], tokens: []))
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn(lifetime: 300)
        #expect(WalletExtensionConfiguration.defaultSessionMargin == .seconds(120))
        #expect(world.walletExtension.configuration.sessionMargin == .seconds(120))

        world.date.advance(180)  // exactly the margin left
        #expect(await world.walletExtension.status().requiresAuthentication == false)

        world.date.advance(1)  // one second less than the margin
        #expect(await world.walletExtension.status().requiresAuthentication)
        let request = await world.walletExtension.generateRequest(identifier: "card-1", certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3]))
        #expect(request == AddPassRequest(Fixtures.signedCard))
        #expect(await world.walletExtension.passEntries(for: .phone).map(\.id) == ["card-1"])
        #expect(world.transport.requests(for: .listCards).count == 1, "the session still refreshes the cards")
        #expect(try world.secrets.secret(for: ExtensionSessionStore.key) != nil, "a session inside the margin is kept")
    }

    @Test func theSessionMarginIsConfigurableAndBounded() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        func configuration(_ margin: Duration) -> WalletExtensionConfiguration {
            WalletExtensionConfiguration(tmp: .init(baseURL: Fixtures.baseURL), directory: SharedWalletDirectory(containerURL: folder.url), secrets: FileSecretStore(directory: folder.url), passLibrary: FakePassLibrary(), sessionMargin: margin)
        }
        #expect(configuration(.seconds(30)).sessionMargin == .seconds(30))
        #expect(configuration(.seconds(3600)).sessionMargin == WalletExtensionConfiguration.maximumSessionMargin)
        #expect(configuration(.seconds(-5)).sessionMargin == .zero)
        var changed = configuration(.zero)
        changed.sessionMargin = .seconds(600)
        #expect(changed.sessionMargin == .seconds(240))
        changed.sessionMargin = .seconds(-1)
        #expect(changed.sessionMargin == .zero)
    }

    @Test func aShorterMarginCountsASessionLonger() async throws {
        let world = try ExtensionHarness(sessionMargin: .seconds(10))
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn(lifetime: 300)
        world.date.advance(290)
        #expect(await world.walletExtension.status().requiresAuthentication == false)
        world.date.advance(1)
        #expect(await world.walletExtension.status().requiresAuthentication)
    }

    @Test func anotherCardholdersSessionDoesNotCount() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")], user: "alice"))
        try world.signIn(user: "bob")
        #expect(await world.walletExtension.status().requiresAuthentication)
    }

    @Test func cardsAlreadyOnBothDevicesLeaveNothingToOffer() async throws {
        let passes = [
            Fixtures.pass("DA-1", account: "PAI-1", device: .phone), Fixtures.pass("DA-2", account: "PAI-1", device: .watch),
            Fixtures.pass("DA-3", account: "PAI-2", device: .phone, state: .requiresActivation), Fixtures.pass("DA-4", account: "PAI-2", device: .watch, state: .suspended),
        ]
        let world = try ExtensionHarness(passes: passes)
        defer { world.remove() }
        try world.write(Fixtures.snapshot([
            Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active, watch: .active),
            Fixtures.snapshotCard("card-2", account: "PAI-2", phone: .requiresActivation, watch: .suspended),
        ]))
        try world.signIn()
        let status = await world.walletExtension.status()
        #expect(status == ExtensionStatus(requiresAuthentication: false, passEntriesAvailable: false, remotePassEntriesAvailable: false))
    }

    @Test func aCardOnTheIPhoneOnlyIsAvailableForTheWatchOnly() async throws {
        let world = try ExtensionHarness(passes: [Fixtures.pass("DA-1", account: "PAI-1", device: .phone)])
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active)]))
        try world.signIn()
        let status = await world.walletExtension.status()
        #expect(status == ExtensionStatus(requiresAuthentication: false, passEntriesAvailable: false, remotePassEntriesAvailable: true))
    }

    @Test func blockedAndClosedCardsAreNeverOffered() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1", status: .blocked), Fixtures.snapshotCard("card-2", status: .closed)]))
        let status = await world.walletExtension.status()
        #expect(!status.passEntriesAvailable && !status.remotePassEntriesAvailable)
    }

    @Test func aPassAddedSinceTheSnapshotIsSeenInTheLiveLibrary() async throws {
        // The snapshot predates the pass: no account known yet, so the last four digits match it.
        let world = try ExtensionHarness(passes: [Fixtures.pass("DA-9", account: "PAI-NEW", device: .phone, last4: "1111")])
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1", last4: "1111")]))
        let status = await world.walletExtension.status()
        #expect(!status.passEntriesAvailable)
        #expect(status.remotePassEntriesAvailable)
    }

    @Test func aPassRemovedSinceTheSnapshotMakesTheCardAvailableAgain() async throws {
        let world = try ExtensionHarness(passes: [])
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active, watch: .active)]))
        let status = await world.walletExtension.status()
        #expect(status.passEntriesAvailable && status.remotePassEntriesAvailable)
    }

    @Test func theSynchronousFormAnswersTheSameFromPassesAlreadyRead() async throws {
        let passes = [Fixtures.pass("DA-1", account: "PAI-1", device: .phone)]
        let world = try ExtensionHarness(passes: passes)
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active)]))
        try world.signIn()
        let synchronous = world.walletExtension.status(passLibraryAvailable: true, passes: passes)
        #expect(synchronous == ExtensionStatus(requiresAuthentication: false, passEntriesAvailable: false, remotePassEntriesAvailable: true))
        #expect(await world.walletExtension.status() == synchronous)
        #expect(world.walletExtension.status(passLibraryAvailable: false, passes: []) == ExtensionStatus(requiresAuthentication: false, passEntriesAvailable: false, remotePassEntriesAvailable: false))
    }

    @Test func aDeviceWithoutAPassLibraryOffersNothing() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        let library = FakePassLibrary(available: false)
        let walletExtension = WalletExtension(configuration: .init(tmp: .init(baseURL: Fixtures.baseURL), directory: world.directory, secrets: world.secrets, passLibrary: library, transport: world.transport))
        let status = await walletExtension.status()
        #expect(!status.passEntriesAvailable && !status.remotePassEntriesAvailable)
    }
}
