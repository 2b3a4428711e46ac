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
    /// The longest a wipe waits for the shared folder's lock (default 2 s). A Wallet extension
    /// holds it for milliseconds; one that keeps it longer has stalled (or was suspended
    /// holding it), and the wipe does not wait on it: it goes on without the lock, and at
    /// sign-out the folder is wiped again once the lock is free (``wipeAgainWindow``).
    public var wipeLockPatience: Duration
    /// How long after a sign-out's wipe without the lock the folder is wiped again under it,
    /// once the lock is free (default 30 s): if it then holds the signed-out cardholder's
    /// snapshot (or one nobody can read), or no snapshot and no new extension session; given
    /// up at another sign-out.
    public var wipeAgainWindow: Duration

    /// Creates a sharing configuration.
    public init(
        directory: SharedWalletDirectory,
        secrets: any SecretStore,
        userId: @escaping @Sendable () async -> String?,
        artMaximumAge: TimeInterval = 86_400,
        now: @escaping @Sendable () -> Date = { Date() },
        wipeLockPatience: Duration = .seconds(2),
        wipeAgainWindow: Duration = .seconds(30)
    ) {
        self.directory = directory
        self.secrets = secrets
        self.userId = userId
        self.artMaximumAge = artMaximumAge
        self.now = now
        self.wipeLockPatience = wipeLockPatience
        self.wipeAgainWindow = wipeAgainWindow
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
    /// The sign-out's wipe under way, which a snapshot to record waits for.
    private var signingOut: Task<Void, any Error>?
    /// The second wipe after a sign-out that wiped without the lock.
    private var wipeAgain: Task<Void, Never>?

    /// Creates the storage; art is fetched through `client`.
    public init(sharing: WalletExtensionSharing, client: TMPClient) {
        self.sharing = sharing
        self.fetcher = CardArtFetcher(client: client, directory: sharing.directory)
    }

    /// Writes the snapshot of `status` for the signed-in cardholder and starts fetching art
    /// that is missing or old. Nothing is written while nobody is signed in. When another
    /// cardholder's snapshot is there, their session and art are removed first.
    ///
    /// A status handed in while a sign-out is under way (``isSigningOut``), or that a sign-out
    /// overtakes before it is written, is dropped: it was read for whoever was signed in when
    /// its read began, which may be the cardholder leaving. Record a new cardholder's first
    /// status once ``signOut()`` has returned.
    public func record(_ status: WalletStatusSnapshot) async throws {
        try await record(status, order: lastOrder + 1, readFor: nil)
    }

    /// ``record(_:)`` for the status with this place in the order statuses were read
    /// (``IssuerWallet``'s read count): one older than the last written is dropped. With
    /// `readFor` (the cardholder signed in when the read began), it is dropped as well when
    /// somebody else is signed in by the time it would be written.
    func record(_ status: WalletStatusSnapshot, order: Int, readFor: String?) async throws {
        guard order > lastOrder else { return }
        lastOrder = order
        // Never for the cardholder signing out: the wipe under way would remove it, or (were it
        // written after the wipe) it would outlive their sign-out.
        guard signingOut == nil else { return }
        let generation = generation
        guard let userId = await sharing.userId() else { return }
        // Another record, or a sign-out, may have run while the user id was asked for.
        guard order == lastOrder, generation == self.generation, signingOut == nil else { return }
        // Read for another cardholder than the one signed in now (one signed in without the
        // previous one signing out first): not theirs to see.
        if let readFor, !readFor.isSameIdentifier(as: userId) { return }
        let directory = sharing.directory
        if Self.holdsAnotherCardholdersData(directory: directory, secrets: sharing.secrets, userId: userId) {
            try await wipe(keepingSessionOf: userId)
            guard order == lastOrder, generation == self.generation else { return }
        }
        let snapshot = ExtensionSnapshot(status, userId: userId, writtenAt: sharing.now(), artFileNames: directory.artFileNames(for: status))
        try directory.write(snapshot)
        directory.removeArt(keeping: Set(status.cards.map(\.id)))
        let missing = directory.cardsNeedingArt(in: status, now: sharing.now(), maximumAge: sharing.artMaximumAge)
        if !missing.isEmpty, artTask == nil {
            startFetchingArt(missing, for: userId)
        }
    }

    /// Whether the shared folder or secrets may hold another cardholder's than `userId`'s: a
    /// snapshot of theirs, one that cannot be read as anybody's (corrupt, too large, implausible,
    /// of a newer SDK: it may be theirs), or an extension session of theirs (saved through
    /// Wallet's sign-in while no snapshot of theirs was written).
    static func holdsAnotherCardholdersData(directory: SharedWalletDirectory, secrets: any SecretStore, userId: String) -> Bool {
        switch directory.readSnapshotFile() {
        case .found(let previous): if !previous.userId.isSameIdentifier(as: userId) { return true }
        case .missing: break
        case .tooLarge, .corrupt, .newerVersion, .invalid: return true
        }
        guard let stored = ExtensionSessionStore(secrets: secrets).storedSession() else { return false }
        return !stored.userId.isSameIdentifier(as: userId)
    }

    /// Waits until the art being fetched, if any, is stored.
    public func artFetched() async {
        while let task = artTask {
            await task.value
            if artTask == task { artTask = nil }
        }
    }

    /// Sign-out: removes every shared secret (the extensions' session among them), the
    /// snapshot and the art, and drops art still arriving. A Wallet extension's refresh that
    /// was running then writes nothing afterwards when the wipe had the folder's lock (it finds
    /// its session gone); when the wipe went on without it, what the extension wrote is wiped
    /// again once the lock is free (below).
    ///
    /// The wipe waits for the shared folder's lock without holding a thread, at most
    /// ``WalletExtensionSharing/wipeLockPatience``; then it goes on without the lock, and wipes
    /// the folder again under it once the process that kept it lets go (within
    /// ``WalletExtensionSharing/wipeAgainWindow``), in case that process wrote after the first
    /// wipe. Cancelling the calling task does not stop the wipe: this returns once it is done.
    public func signOut() async throws {
        generation += 1
        artTask?.cancel()
        artTask = nil
        wipeAgain?.cancel()
        wipeAgain = nil
        // Its own task: the caller's cancellation must not cut the wipe short. It is the
        // sign-out under way from now on (before anything here waits), so a status handed in
        // meanwhile is dropped.
        let sharing = sharing
        let wipe = Task {
            // Whose data this sign-out removes, so the second wipe knows it should it come back.
            var leaving = Self.cardholders(in: sharing.directory, secrets: sharing.secrets)
            if let signedIn = await sharing.userId() { leaving.insert(signedIn) }
            try await self.wipe(signingOut: leaving)
        }
        signingOut = wipe
        defer { if signingOut == wipe { signingOut = nil } }
        try await wipe.value
    }

    /// Whether a sign-out's wipe is under way (waiting for the shared folder's lock, say).
    public var isSigningOut: Bool { signingOut != nil }

    /// Waits until the second wipe after a sign-out that wiped without the shared folder's
    /// lock, if one is pending, is done or given up.
    public func secondWipeEnded() async {
        while let task = wipeAgain {
            await task.value
            if wipeAgain == task { wipeAgain = nil }
        }
    }

    /// The cardholders whose data the folder and secrets hold: the snapshot's and the stored
    /// extension session's.
    static func cardholders(in directory: SharedWalletDirectory, secrets: any SecretStore) -> Set<String> {
        var found: Set<String> = []
        if let snapshot = directory.readSnapshot() { found.insert(snapshot.userId) }
        if let session = ExtensionSessionStore(secrets: secrets).storedSession() { found.insert(session.userId) }
        return found
    }

    /// Wipes the folder again under its lock once the process that kept it lets go, within
    /// ``WalletExtensionSharing/wipeAgainWindow``: it may have written there (a Wallet
    /// extension's snapshot, art or add record, for the session it checked before the wipe).
    /// Not the secrets: a session saved since is a sign-in of its own. Given up at another
    /// sign-out.
    ///
    /// Decided by whose data is there then, not by what happened since: a snapshot of a
    /// cardholder who signed out (`leaving`), or one nobody can read, goes with the folder —
    /// also when somebody signed in since and the stalled process wrote over their snapshot;
    /// another cardholder's snapshot (a sign-in since) stays. With no snapshot, the folder goes
    /// unless an extension session was saved since (a sign-in through Wallet, whose extension
    /// may have written its art first).
    private func wipeAgainOnceTheLockIsFree(leaving: Set<String>) {
        let generation = generation
        let directory = sharing.directory
        let window = sharing.wipeAgainWindow
        let secrets = sharing.secrets
        wipeAgain = Task {
            try? await directory.withLockWithoutBlocking(waitingAtMost: window) {
                guard generation == self.generation else { return }
                switch directory.readSnapshotFile() {
                case .found(let snapshot):
                    guard leaving.contains(where: { $0.isSameIdentifier(as: snapshot.userId) }) else { return }
                case .missing:
                    guard (try? secrets.secret(for: ExtensionSessionStore.key)) == nil else { return }
                case .tooLarge, .corrupt, .newerVersion, .invalid:
                    break
                }
                try directory.removeAll()
            }
        }
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

    /// Removes the folder and every shared secret — but, with `userId`, a stored extension
    /// session of that cardholder's (the one signing in now, saved before their first status
    /// was recorded) is put back.
    private func wipe(signingOut leaving: Set<String>? = nil, keepingSessionOf userId: String? = nil) async throws {
        let directory = sharing.directory
        let secrets = sharing.secrets
        let now = sharing.now()
        let wipeAll = {
            let kept = userId.flatMap { userId in
                ExtensionSessionStore(secrets: secrets).validSession(at: now, userId: userId).flatMap { _ in try? secrets.secret(for: ExtensionSessionStore.key) }
            }
            // The secrets first, and each part whatever became of the other: a folder that
            // cannot be removed (a file written into it meanwhile) must not keep the session
            // that lets the extensions act for the cardholder; an extension that checks for its
            // session before writing then writes nothing more. The first error is thrown.
            var failure: (any Error)?
            do {
                try secrets.removeAllSecrets()
                if let kept { try secrets.setSecret(kept, for: ExtensionSessionStore.key) }
            } catch {
                failure = error
            }
            do { try directory.removeAll() } catch { failure = failure ?? error }
            if let failure { throw failure }
        }
        do {
            // Under the folder's lock: a Wallet extension that checked its session is still
            // stored writes its snapshot before this wipe, never after it.
            try await directory.withLockWithoutBlocking(waitingAtMost: sharing.wipeLockPatience, wipeAll)
        } catch let error as SharedStorageError where error.code == .busy {
            // Another process kept the lock past the patience: wiping cannot wait on it. What
            // that process writes after this wipe is wiped again once it lets go (also when
            // this wipe fails: that process's writes may be what made it fail).
            if let leaving { wipeAgainOnceTheLockIsFree(leaving: leaving) }
            try wipeAll()
        } catch {
            // No lock to be had, or the wipe failed under it: wiping matters more than the
            // lock (and is idempotent), so once more without it; its error is the one thrown.
            try wipeAll()
        }
    }
}
