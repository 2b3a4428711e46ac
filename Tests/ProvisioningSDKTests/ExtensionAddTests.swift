import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

/// A card added from Wallet through the extension: the extension leaves an ``ExtensionAdd``,
/// and the app keeps the card's new pass for it until TMP lists the token, as it does for its
/// own adds.
@Suite("Wallet extension adds seen by the app")
struct ExtensionAddTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func theSharedFileKeepsTheNewestRecentAddsAndReadsDamageAsNone() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        #expect(directory.readExtensionAdds(now: Self.start).isEmpty)
        for index in 0..<20 {
            try directory.recordExtensionAdd(ExtensionAdd(externalCardId: "card-\(index)", device: .phone, userId: "alice", at: Self.start + Double(index)), now: Self.start + Double(index))
        }
        let read = directory.readExtensionAdds(now: Self.start + 20)
        #expect(read.map(\.externalCardId) == (4..<20).map { "card-\($0)" })
        // Past their lifetime (or from the future) they are not read.
        #expect(directory.readExtensionAdds(now: Self.start + 10 + SharedWalletDirectory.extensionAddLifetime).map(\.externalCardId) == (11..<20).map { "card-\($0)" })
        #expect(directory.readExtensionAdds(now: Self.start + 19 + SharedWalletDirectory.extensionAddLifetime).isEmpty)
        #expect(directory.readExtensionAdds(now: Self.start - 1).isEmpty)
        // A card id TMP would never issue is refused; a damaged file reads as none.
        #expect(throws: SharedStorageError.self) { try directory.recordExtensionAdd(ExtensionAdd(externalCardId: "../x", device: .phone, userId: "alice", at: Self.start), now: Self.start) }
        // A record this SDK cannot read (a newer SDK's device, say) leaves the others readable.
        try Data(#"[{"externalCardId":"card-x","device":"TABLET","userId":"alice","at":\#(Self.start.timeIntervalSinceReferenceDate)},{"externalCardId":"card-y","device":"PHONE","userId":"alice","at":\#(Self.start.timeIntervalSinceReferenceDate)}]"#.utf8).write(to: directory.extensionAddsURL)
        #expect(directory.readExtensionAdds(now: Self.start).map(\.externalCardId) == ["card-y"])
        #expect(throws: SharedStorageError.self) { try directory.recordExtensionAdd(ExtensionAdd(externalCardId: "card-1", device: .phone, userId: String(repeating: "u", count: 1025), at: Self.start), now: Self.start) }
        try Data("{not json".utf8).write(to: directory.extensionAddsURL)
        #expect(directory.readExtensionAdds(now: Self.start).isEmpty)
    }

    @Test func aSealedCardLeavesAnAddAndARefusedOneNothing() async throws {
        let world = try ExtensionHarness(transport: Fixtures.server(cards: [], tokens: []))
        defer { world.remove() }
        try world.signIn()
        _ = await world.walletExtension.generateRequest(identifier: "card-1:WATCH", certificates: [Data([1]), Data([2])], nonce: Data("n".utf8), nonceSignature: Data([3]))
        #expect(world.directory.readExtensionAdds(now: world.date.now) == [ExtensionAdd(externalCardId: "card-1", device: .watch, userId: "alice", at: world.date.now)])

        let refused = try ExtensionHarness(transport: ScriptedTransport { _, _ in ScriptedTransport.error(409, code: "card_blocked", message: "blocked") })
        defer { refused.remove() }
        try refused.signIn()
        _ = await refused.walletExtension.generateRequest(identifier: "card-1", certificates: [Data([1]), Data([2])], nonce: Data("n".utf8), nonceSignature: Data([3]))
        #expect(refused.directory.readExtensionAdds(now: refused.date.now).isEmpty)
    }

    /// Once Wallet has its answer, iOS may suspend the extension at any moment, and kills one
    /// suspended while holding a lock on a shared-container file: the record is written first.
    @Test func theAddIsRecordedBeforeWalletIsAnswered() async throws {
        let world = try ExtensionHarness(transport: Fixtures.server(cards: [], tokens: []))
        defer { world.remove() }
        try world.signIn()
        let directory = world.directory
        let now = world.date.now
        let atAnswer = Locked<(request: Bool, adds: [ExtensionAdd])?>(nil)
        let task = world.walletExtension.generateRequest(identifier: "card-1", certificates: [Data([1]), Data([2])], nonce: Data("n".utf8), nonceSignature: Data([3])) { request in
            atAnswer.withValue { $0 = (request != nil, directory.readExtensionAdds(now: now)) }
        }
        _ = await task.value
        let answered = try #require(atAnswer.current)
        #expect(answered.request)
        #expect(answered.adds.map(\.externalCardId) == ["card-1"])
    }

    @Test(arguments: [("alice", true), ("bob", false)])
    func theAppKeepsTheCardsNewPassForItUntilTMPListsIt(appUser: String, kept: Bool) async throws {
        let world = try ExtensionHarness(transport: Fixtures.server(cards: [], tokens: []))
        defer { world.remove() }
        try world.signIn(user: "alice")
        _ = await world.walletExtension.generateRequest(identifier: "card-1", certificates: [Data([1]), Data([2])], nonce: Data("n".utf8), nonceSignature: Data([3]))
        // Wallet added the pass; TMP has not heard of its token.
        let pass = Fixtures.pass("T-ext", account: "account-1", device: .phone, state: .requiresActivation)
        let app = IssuerWallet(
            client: Fixtures.client(Fixtures.server(cards: [Fixtures.card("card-1"), Fixtures.card("card-2", last4: "2222")], tokens: [])),
            passLibrary: FakePassLibrary(passes: [pass]),
            activationLinks: ActivationLinkTests.route,
            sharing: WalletExtensionSharing(directory: world.directory, secrets: world.secrets, userId: { appUser }, now: world.date.function),
            recheckDelays: [],
            now: world.date.function
        )
        // The first read lists the card; the add is kept from then on.
        _ = try await app.refreshStatus()
        let card = try #require(try await app.refreshStatus()["card-1"])
        if kept {
            #expect(card.phone.awaitingIssuer && card.phone.state == .requiresActivation && card.phone.action == .none)
            #expect(card.phone.pass == pass)
            #expect(await app.passesAwaitingIssuer.map(\.deviceAccountIdentifier) == ["T-ext"])
        } else {
            // Another cardholder's add is not this one's.
            #expect(!card.phone.awaitingIssuer && card.phone.action == .addToWallet)
            #expect(await app.passesAwaitingIssuer.isEmpty)
        }
        // Kept once: reading again adds no second record.
        _ = try await app.refreshStatus()
        #expect(await app.passesAwaitingIssuer.count == (kept ? 1 : 0))
    }
}
