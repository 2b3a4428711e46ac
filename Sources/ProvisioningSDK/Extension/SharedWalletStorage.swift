import Foundation
import ProvisioningModels

/// Where and for whom ``IssuerWallet`` shares its status with the Wallet extensions.
public struct WalletExtensionSharing: Sendable {
    /// The shared folder in the App Group container.
    public var directory: SharedWalletDirectory
    /// The secret store the extensions' session lives in (cleared on sign-out and when
    /// another cardholder signs in).
    public var secrets: any SecretStore
    /// The signed-in cardholder's user id (the JWT's `sub`); nil while nobody is signed in,
    /// and then nothing is written.
    public var userId: @Sendable () async -> String?
    /// Art older than this is fetched again (default: a day).
    public var artMaximumAge: TimeInterval
    /// The wall clock, for the snapshot's date and the art's age.
    public var now: @Sendable () -> Date

    /// Creates a sharing configuration.
    public init(directory: SharedWalletDirectory, secrets: any SecretStore, userId: @escaping @Sendable () async -> String?, artMaximumAge: TimeInterval = 86_400, now: @escaping @Sendable () -> Date = { Date() }) {
        self.directory = directory
        self.secrets = secrets
        self.userId = userId
        self.artMaximumAge = artMaximumAge
        self.now = now
    }
}

/// The app's side of the storage shared with its Wallet extensions: writes an
/// ``ExtensionSnapshot`` of every status ``IssuerWallet`` publishes, keeps the cards' art
/// in the shared folder (fetched in the background, validated before it is written), and
/// wipes everything on sign-out.
public actor SharedWalletStorage {
    /// Where and for whom.
    public let sharing: WalletExtensionSharing
    private let fetcher: CardArtFetcher
    /// Bumped by sign-out, so art arriving for a signed-out cardholder is dropped.
    private var generation = 0
    /// The order of the newest status written, so an older one finishing later is dropped.
    private var lastOrder = 0
    private var artTask: Task<Void, Never>?

    /// Creates the storage; art is fetched through `client`.
    public init(sharing: WalletExtensionSharing, client: TMPClient) {
        self.sharing = sharing
        self.fetcher = CardArtFetcher(client: client, directory: sharing.directory)
    }

    /// Writes the snapshot of `status` for the signed-in cardholder and starts fetching art
    /// that is missing or old. Nothing is written while nobody is signed in. When another
    /// cardholder's snapshot is there, their session and art are removed first.
    public func record(_ status: WalletStatusSnapshot) async throws {
        try await record(status, order: lastOrder + 1)
    }

    /// ``record(_:)`` for the status with this place in the order statuses were read
    /// (``IssuerWallet``'s read count): one older than the last written is dropped.
    func record(_ status: WalletStatusSnapshot, order: Int) async throws {
        guard order > lastOrder else { return }
        lastOrder = order
        let generation = generation
        guard let userId = await sharing.userId() else { return }
        // Another record, or a sign-out, may have run while the user id was asked for.
        guard order == lastOrder, generation == self.generation else { return }
        let directory = sharing.directory
        if let previous = directory.readSnapshot(), !previous.userId.isSameIdentifier(as: userId) {
            try wipe()
        }
        let snapshot = ExtensionSnapshot(status, userId: userId, writtenAt: sharing.now(), artFileNames: directory.artFileNames(for: status))
        try directory.write(snapshot)
        directory.removeArt(keeping: Set(status.cards.map(\.id)))
        let missing = directory.cardsNeedingArt(in: status, now: sharing.now(), maximumAge: sharing.artMaximumAge)
        if !missing.isEmpty, artTask == nil {
            startFetchingArt(missing, for: userId)
        }
    }

    /// Waits until the art being fetched, if any, is stored.
    public func artFetched() async {
        while let task = artTask {
            await task.value
            if artTask == task { artTask = nil }
        }
    }

    /// Sign-out: removes the snapshot, the art and every shared secret (the extensions'
    /// session among them), and drops art still arriving. A Wallet extension's refresh that
    /// was running then writes nothing afterwards (it finds its session gone; see
    /// ``SharedWalletDirectory/withLock(_:)``).
    public func signOut() throws {
        generation += 1
        artTask?.cancel()
        artTask = nil
        try wipe()
    }

    // MARK: Art in the background

    private func startFetchingArt(_ ids: [String], for userId: String) {
        let fetcher = fetcher
        let generation = generation
        artTask = Task {
            // Fetched one by one off the actor; each file is stored when it arrives.
            var stored = false
            for id in ids {
                if Task.isCancelled { break }
                guard let download = try? await fetcher.download(externalCardId: id) else { continue }
                stored = self.store(download, externalCardId: id, generation: generation) || stored
            }
            if stored { self.addArtNames(for: userId, generation: generation) }
            self.artTaskEnded(generation: generation)
        }
    }

    private func store(_ download: CardArtDownload, externalCardId: String, generation: Int) -> Bool {
        guard generation == self.generation else { return false }
        return (try? fetcher.store(download, externalCardId: externalCardId)) != nil
    }

    /// Rewrites the snapshot on disk with the art now stored, if it is still this cardholder's.
    private func addArtNames(for userId: String, generation: Int) {
        let directory = sharing.directory
        guard generation == self.generation, var snapshot = directory.readSnapshot(), snapshot.userId.isSameIdentifier(as: userId) else { return }
        for index in snapshot.cards.indices where snapshot.cards[index].artFileName == nil {
            snapshot.cards[index].artFileName = directory.storedArtFileName(externalCardId: snapshot.cards[index].externalCardId)
        }
        try? directory.write(snapshot)
    }

    private func artTaskEnded(generation: Int) {
        if generation == self.generation { artTask = nil }
    }

    private func wipe() throws {
        let directory = sharing.directory
        let secrets = sharing.secrets
        let wipeAll = {
            try directory.removeAll()
            try secrets.removeAllSecrets()
        }
        do {
            // Under the folder's lock: a Wallet extension that checked its session is still
            // stored writes its snapshot before this wipe, never after it.
            try directory.withLock(wipeAll)
        } catch {
            // No lock to be had, or the wipe failed under it: wiping matters more than the
            // lock (and is idempotent), so once more without it; its error is the one thrown.
            try wipeAll()
        }
    }
}
