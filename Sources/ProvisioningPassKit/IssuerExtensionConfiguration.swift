// iOS and visionOS PassKit (Mac Catalyst included), or the Linux shim: macOS's PassKit lacks the add sheet and
// the Watch's passes, and watchOS and tvOS have no issuer provisioning API (and no shim is linked there).
#if os(iOS) || os(visionOS) || os(Linux)
import Foundation
import ProvisioningSDK

/// What an issuer's Wallet extension supplies: where TMP is, the App Group container, the
/// secret store (the Keychain access group on iOS) and how card art becomes an image.
/// Everything else has a default that answers inside Wallet's budgets.
public struct IssuerExtensionConfiguration: Sendable {
    /// TMP's base URL, timeouts and retries.
    public var tmp: TMPClient.Configuration
    /// The App Group container the app writes the snapshot and art to.
    public var containerURL: URL
    /// Where the cardholder's session for the extensions lives.
    public var secrets: any SecretStore
    /// Card art → `CGImage`.
    public var artLoader: CardArtLoader
    /// How long `passEntries` may spend refreshing from TMP before using the snapshot (5 s).
    /// With ``artBudget`` at most `AddPassRequestGenerator.maximumBudget` (19 s) in all: a
    /// longer one is cut to that and shortens ``artBudget`` to what it leaves.
    public var refreshBudget: Duration = .seconds(5) {
        didSet {
            refreshBudget = AddPassRequestGenerator.bounded(refreshBudget)
            artBudget = min(artBudget, AddPassRequestGenerator.maximumBudget - refreshBudget)
        }
    }
    /// How long `passEntries` may then spend fetching missing art (3 s); at most what
    /// ``refreshBudget`` leaves of the 19 s (a longer one is cut to that).
    public var artBudget: Duration = .seconds(3) {
        didSet { artBudget = min(max(artBudget, .zero), AddPassRequestGenerator.maximumBudget - refreshBudget) }
    }
    /// How long `generateAddPaymentPassRequest` may take (18 s; Wallet allows 20 s); at most
    /// `AddPassRequestGenerator.maximumBudget` (19 s; a longer one is cut to that).
    public var generationBudget: Duration = AddPassRequestGenerator.defaultBudget {
        didSet { generationBudget = AddPassRequestGenerator.bounded(generationBudget) }
    }
    /// How much of the session's life must be left for `status` to answer that no sign-in is
    /// needed: 2 minutes by default, at most
    /// `WalletExtensionConfiguration.maximumSessionMargin` (4 minutes; larger values are
    /// taken as that). See `WalletExtensionConfiguration.sessionMargin`.
    public var sessionMargin: Duration = WalletExtensionConfiguration.defaultSessionMargin {
        didSet { sessionMargin = min(max(sessionMargin, .zero), WalletExtensionConfiguration.maximumSessionMargin) }
    }
    /// Whether an Apple Watch is paired with this iPhone: true, false, or nil while unknown
    /// (the default, and what the closure should answer when it has no fresh word). Called on
    /// the main actor whenever Wallet asks `status`, `passEntries` or `remotePassEntries`, so it
    /// must be quick.
    ///
    /// A known `false` makes the extension offer no Apple Watch entries (`status` answers
    /// `remotePassEntriesAvailable` false, `remotePassEntries` is empty); true or nil offer
    /// them as before, by the snapshot and the Watch's passes.
    ///
    /// PassKit cannot tell, and WatchConnectivity (`WCSession.isPaired`) works only in the
    /// containing app, so the app shares its answer through the App Group. In the app, when
    /// the `WCSession` activates and in `sessionWatchStateDidChange(_:)`:
    ///
    /// ```swift
    /// UserDefaults(suiteName: "group.com.bank.app.wallet")?.set(WCSession.default.isPaired, forKey: "watchPaired")
    /// ```
    ///
    /// and in the extension's configuration:
    ///
    /// ```swift
    /// configuration.watchPairing = {
    ///     UserDefaults(suiteName: "group.com.bank.app.wallet")?.object(forKey: "watchPaired") as? Bool
    /// }
    /// ```
    ///
    /// The app passes the same kind of answer to its own `PassKitPassLibrary(watchPairing:)`.
    public var watchPairing: (@MainActor @Sendable () -> Bool?)?
    /// The network (URLSession unless a test substitutes it).
    public var transport: any HTTPTransport = URLSessionTransport()
    /// Measures the budgets.
    public var clock: any Clock<Duration> = ContinuousClock()
    /// The wall clock (session expiry).
    public var now: @Sendable () -> Date = { Date() }
    /// Receives one event per TMP call attempt (no secrets).
    public var log: @Sendable (TMPClientEvent) -> Void = { _ in }

    /// A configuration from explicit locations (Linux, tests, or your own container lookup).
    public init(tmpURL: URL, containerURL: URL, secrets: any SecretStore, artLoader: CardArtLoader = .storedArt()) {
        self.tmp = TMPClient.Configuration(baseURL: tmpURL)
        self.containerURL = containerURL
        self.secrets = secrets
        self.artLoader = artLoader
    }

    /// A configuration for an iOS extension: the App Group's container and the Keychain
    /// access group shared with the app.
    ///
    /// If the target lacks the App Group entitlement there is no container; the extension
    /// then finds no snapshot and offers no cards rather than crash. On Linux (the
    /// simulator) the App Group is the folder ``AppGroupContainer/url(for:)`` names and the
    /// Keychain group a ``FileSecretStore`` in it.
    public init(tmpURL: URL, appGroup: String, keychainAccessGroup: String, artLoader: CardArtLoader = .storedArt()) {
        let container = AppGroupContainer.url(for: appGroup)
        self.init(tmpURL: tmpURL, containerURL: container, secrets: AppGroupContainer.secretStore(keychainAccessGroup: keychainAccessGroup, container: container), artLoader: artLoader)
    }

    /// The shared folder inside the container.
    public var directory: SharedWalletDirectory {
        SharedWalletDirectory(containerURL: containerURL)
    }

    /// What the app's ``IssuerWallet`` shares with the extensions: this configuration's
    /// folder and secret store, for the cardholder `userId` names (nil: nobody signed in).
    public func sharing(userId: @escaping @Sendable () async -> String?) -> WalletExtensionSharing {
        WalletExtensionSharing(directory: directory, secrets: secrets, userId: userId, now: now)
    }

    /// The SDK's configuration of the extension's logic over `passLibrary`, which answers
    /// the Watch's pairing itself (``IssuerProvisioningExtensionHandler`` gives its own
    /// library ``watchPairing``).
    public func walletExtension(passLibrary: any PassLibrary) -> WalletExtensionConfiguration {
        WalletExtensionConfiguration(
            tmp: tmp,
            directory: directory,
            secrets: secrets,
            passLibrary: passLibrary,
            transport: transport,
            clock: clock,
            now: now,
            refreshBudget: refreshBudget,
            artBudget: artBudget,
            generationBudget: generationBudget,
            sessionMargin: sessionMargin,
            log: log
        )
    }
}

/// Where an App Group's shared container is, and the secret store of a Keychain access group.
public enum AppGroupContainer {
    /// The container of `appGroup`: on Apple platforms the one the system keeps for the
    /// group (a folder under the temporary directory that stays empty when the target lacks
    /// the entitlement); on Linux `<data home>/pushprov-app-groups/<appGroup>`, where the data
    /// home is `$XDG_DATA_HOME` when it is an absolute path, else `~/.local/share`.
    ///
    /// On Linux it is in the user's own home, not the temporary directory: anyone on the
    /// machine may create a folder in `/tmp` first, and whoever owns a folder on the path can
    /// swap what is inside it, such as the extension's stored session.
    public static func url(for appGroup: String) -> URL {
        #if canImport(Darwin)
        if let container = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: appGroup) {
            return container
        }
        return FileManager.default.temporaryDirectory.appendingPathComponent("missing-app-group-\(appGroup)", isDirectory: true)
        #else
        return dataHome.appendingPathComponent("pushprov-app-groups", isDirectory: true).appendingPathComponent(appGroup, isDirectory: true)
        #endif
    }

    #if !canImport(Darwin)
    /// `$XDG_DATA_HOME` if it is an absolute path (the XDG base directory rules ignore a
    /// relative one), else `~/.local/share`.
    static var dataHome: URL {
        if let configured = ProcessInfo.processInfo.environment["XDG_DATA_HOME"], configured.hasPrefix("/") {
            return URL(fileURLWithPath: configured, isDirectory: true)
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share", isDirectory: true)
    }
    #endif

    /// The secret store shared through `keychainAccessGroup`: the Keychain where there is one,
    /// else a ``FileSecretStore`` in `container`.
    public static func secretStore(keychainAccessGroup: String, container: URL) -> any SecretStore {
        #if canImport(Security)
        KeychainSecretStore(accessGroup: keychainAccessGroup)
        #else
        FileSecretStore(directory: container.appendingPathComponent("keychain-\(keychainAccessGroup)", isDirectory: true))
        #endif
    }
}
#endif
