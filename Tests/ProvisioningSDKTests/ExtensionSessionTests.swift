import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

/// The extensions' session in the secret store: what counts as valid, and that an expired
/// one — a cardholder JWT of no further use — does not stay in the shared Keychain.
@Suite("Wallet extension: the session in the secret store")
struct ExtensionSessionTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func anExpiredSessionIsRemovedWhenItIsFound() throws {
        let secrets = MemorySecretStore()
        let sessions = ExtensionSessionStore(secrets: secrets)
        try sessions.save(Fixtures.session(now: Self.start, lifetime: 300))

        #expect(sessions.validSession(at: Self.start.addingTimeInterval(299))?.userId == "alice")
        #expect(sessions.validSession(at: Self.start.addingTimeInterval(299), remaining: .seconds(120)) == nil)
        #expect(secrets.removedKeys.isEmpty, "a session still valid is kept, even inside the margin")

        #expect(sessions.validSession(at: Self.start.addingTimeInterval(300)) == nil)
        #expect(try secrets.secret(for: ExtensionSessionStore.key) == nil)
        #expect(secrets.removedKeys == [ExtensionSessionStore.key])
    }

    @Test func walletsStatusRemovesAnExpiredSession() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let secrets = MemorySecretStore()
        let date = FixedDate(Self.start)
        let walletExtension = WalletExtension(configuration: WalletExtensionConfiguration(
            tmp: .init(baseURL: Fixtures.baseURL), directory: SharedWalletDirectory(containerURL: folder.url), secrets: secrets,
            passLibrary: FakePassLibrary(), transport: Fixtures.server(cards: [], tokens: []), clock: ManualClock(), now: date.function
        ))
        try ExtensionSessionStore(secrets: secrets).save(Fixtures.session(now: Self.start, lifetime: 300))
        date.advance(301)
        #expect(await walletExtension.status().requiresAuthentication)
        #expect(try secrets.secret(for: ExtensionSessionStore.key) == nil)
    }

    /// The authorization extension may save a fresh session between the read that found the
    /// old one expired and its removal: the fresh one stays.
    @Test func aSessionSavedMeanwhileIsNotRemoved() throws {
        let expired = try JSONEncoder().encode(Fixtures.session(token: "old", now: Self.start, lifetime: 300))
        let fresh = try JSONEncoder().encode(Fixtures.session(token: "new", now: Self.start.addingTimeInterval(400), lifetime: 300))
        let secrets = ReplacedAfterFirstRead(first: expired, then: fresh)
        #expect(ExtensionSessionStore(secrets: secrets).validSession(at: Self.start.addingTimeInterval(400)) == nil)
        #expect(try secrets.secret(for: ExtensionSessionStore.key) == fresh)
        #expect(secrets.store.removedKeys.isEmpty)
        #expect(ExtensionSessionStore(secrets: secrets).validSession(at: Self.start.addingTimeInterval(400))?.cardholderToken == "new")
    }

    /// A store whose session is replaced right after it was first read.
    final class ReplacedAfterFirstRead: SecretStore {
        let store = MemorySecretStore()
        private let replacement: Locked<Data?>

        init(first: Data, then replacement: Data) {
            try? store.setSecret(first, for: ExtensionSessionStore.key)
            self.replacement = Locked(replacement)
        }

        func secret(for key: String) throws -> Data? {
            let value = try store.secret(for: key)
            if let next = replacement.withValue({ value in defer { value = nil }; return value }) {
                try store.setSecret(next, for: key)
            }
            return value
        }

        func setSecret(_ secret: Data, for key: String) throws { try store.setSecret(secret, for: key) }
        func removeSecret(for key: String) throws { try store.removeSecret(for: key) }
        func removeAllSecrets() throws { try store.removeAllSecrets() }
    }
}
