import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport

/// One Wallet extension's world for a test: a shared folder, a 0600 secret store, the
/// device's passes, a scripted TMP, a manual clock and a fixed wall clock.
struct ExtensionHarness {
    let folder: TemporaryDirectory
    let directory: SharedWalletDirectory
    let secrets: FileSecretStore
    let passes: FakePassLibrary
    let transport: ScriptedTransport
    let clock = ManualClock()
    let date = FixedDate()
    let walletExtension: WalletExtension

    /// `watchPaired`: the pass library's word on a paired Watch (nil: it does not know).
    init(folder: TemporaryDirectory? = nil, passes: [WalletPass] = [], watchPaired: Bool? = nil, transport: ScriptedTransport = Fixtures.server(cards: [], tokens: []), refreshBudget: Duration = .seconds(5), artBudget: Duration = .seconds(3), sessionMargin: Duration = WalletExtensionConfiguration.defaultSessionMargin) throws {
        self.folder = try folder ?? TemporaryDirectory()
        directory = SharedWalletDirectory(containerURL: self.folder.url)
        secrets = FileSecretStore(directory: self.folder.url.appendingPathComponent("secrets"))
        self.passes = FakePassLibrary(passes: passes, watchPaired: watchPaired ?? true, pairingKnown: watchPaired != nil)
        self.transport = transport
        walletExtension = WalletExtension(configuration: WalletExtensionConfiguration(
            tmp: .init(baseURL: Fixtures.baseURL, retry: .init(initialBackoff: .zero)),
            directory: directory,
            secrets: secrets,
            passLibrary: self.passes,
            transport: transport,
            clock: clock,
            now: date.function,
            refreshBudget: refreshBudget,
            artBudget: artBudget,
            sessionMargin: sessionMargin
        ))
    }

    /// Writes `snapshot` as the app would.
    func write(_ snapshot: ExtensionSnapshot) throws {
        try directory.write(snapshot)
    }

    /// Leaves a session as the authorization extension would.
    func signIn(user: String = "alice", lifetime: TimeInterval = 300) throws {
        try ExtensionSessionStore(secrets: secrets).save(Fixtures.session(user: user, now: date.now, lifetime: lifetime))
    }

    func remove() {
        folder.remove()
    }
}
