import Foundation
import ProvisioningModels

/// What the non-UI Wallet extension needs: TMP, the shared folder, the secret store, the
/// device's passes, and its time budgets.
public struct WalletExtensionConfiguration: Sendable {
    /// Where TMP is and how patient the client is with it.
    public var tmp: TMPClient.Configuration
    /// The folder the app shares (snapshot and art).
    public var directory: SharedWalletDirectory
    /// Where the authorization extension left the cardholder's session.
    public var secrets: any SecretStore
    /// This iPhone's and the paired Watch's passes.
    public var passLibrary: any PassLibrary
    /// The network.
    public var transport: any HTTPTransport
    /// Measures the budgets.
    public var clock: any Clock<Duration>
    /// The wall clock, for the session's expiry and the snapshot's date.
    public var now: @Sendable () -> Date
    /// How long `passEntries` / `remotePassEntries` may spend refreshing the cards from TMP
    /// before answering from the snapshot (Wallet allows 20 s for the whole call).
    ///
    /// Bounded with ``artBudget``: each is at least zero and the two together at most
    /// ``AddPassRequestGenerator/maximumBudget`` (19 s). A longer refresh budget is cut to
    /// that, and shortens the art budget to what it leaves.
    public var refreshBudget: Duration {
        didSet {
            refreshBudget = AddPassRequestGenerator.bounded(refreshBudget)
            artBudget = Self.bounded(artBudget: artBudget, after: refreshBudget)
        }
    }
    /// How long they may then spend fetching art for cards that have none yet; at most what
    /// ``refreshBudget`` leaves of ``AddPassRequestGenerator/maximumBudget`` (a longer one is
    /// cut to that).
    public var artBudget: Duration {
        didSet { artBudget = Self.bounded(artBudget: artBudget, after: refreshBudget) }
    }
    /// How long `generateAddPaymentPassRequest` may take before it answers nil (Wallet: 20 s);
    /// at most ``AddPassRequestGenerator/maximumBudget`` (a longer one is cut to that).
    public var generationBudget: Duration {
        didSet { generationBudget = AddPassRequestGenerator.bounded(generationBudget) }
    }
    /// How much of the session's life must be left for `status` to answer that no sign-in is
    /// needed (default ``defaultSessionMargin``, bounded to 0…``maximumSessionMargin``).
    ///
    /// Wallet reuses `status`'s answer for the calls that follow — the cardholder may pick a
    /// card minutes later — so a session about to expire counts as none there and Wallet shows
    /// the sign-in screen. `passEntries` and `generateAddPaymentPassRequest` still use a
    /// session until its expiry. Keep the session's lifetime (``ExtensionSignIn/lifetime``)
    /// longer than this margin, or `status` asks for a sign-in every time.
    public var sessionMargin: Duration {
        didSet { sessionMargin = Self.bounded(sessionMargin: sessionMargin) }
    }
    /// Receives one event per TMP call attempt (no secrets in them).
    public var log: @Sendable (TMPClientEvent) -> Void

    /// The default ``sessionMargin``: 2 minutes, within the 5 minutes Apple suggests an
    /// authorization stays usable.
    public static let defaultSessionMargin: Duration = .seconds(120)
    /// The largest ``sessionMargin``: 4 minutes, so a session of the default 5-minute
    /// lifetime still counts just after it was made. Larger values are taken as this.
    public static let maximumSessionMargin: Duration = .seconds(240)

    /// Creates a configuration; the defaults answer every call well inside Wallet's budgets,
    /// and budgets longer than Wallet allows are cut (see ``refreshBudget``, ``artBudget``
    /// and ``generationBudget``).
    public init(
        tmp: TMPClient.Configuration,
        directory: SharedWalletDirectory,
        secrets: any SecretStore,
        passLibrary: any PassLibrary,
        transport: any HTTPTransport = URLSessionTransport(),
        clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date() },
        refreshBudget: Duration = .seconds(5),
        artBudget: Duration = .seconds(3),
        generationBudget: Duration = AddPassRequestGenerator.defaultBudget,
        sessionMargin: Duration = WalletExtensionConfiguration.defaultSessionMargin,
        log: @escaping @Sendable (TMPClientEvent) -> Void = { _ in }
    ) {
        self.tmp = tmp
        self.directory = directory
        self.secrets = secrets
        self.passLibrary = passLibrary
        self.transport = transport
        self.clock = clock
        self.now = now
        self.refreshBudget = AddPassRequestGenerator.bounded(refreshBudget)
        self.artBudget = Self.bounded(artBudget: artBudget, after: AddPassRequestGenerator.bounded(refreshBudget))
        self.generationBudget = AddPassRequestGenerator.bounded(generationBudget)
        self.sessionMargin = Self.bounded(sessionMargin: sessionMargin)
        self.log = log
    }

    /// `art` within 0…(``AddPassRequestGenerator/maximumBudget`` − `refresh`).
    static func bounded(artBudget art: Duration, after refresh: Duration) -> Duration {
        min(max(art, .zero), AddPassRequestGenerator.maximumBudget - refresh)
    }

    /// `margin` within 0…``maximumSessionMargin``.
    static func bounded(sessionMargin margin: Duration) -> Duration {
        min(max(margin, .zero), maximumSessionMargin)
    }
}

/// The non-UI Wallet extension's logic, independent of PassKit: ProvisioningPassKit's
/// `IssuerProvisioningExtensionHandler` delegates every call of
/// `PKIssuerProvisioningExtensionHandler` here.
///
/// - ``status()`` reads the snapshot, the session and the live pass library — no network,
///   no waiting — so it answers well inside Wallet's 100 ms.
/// - ``passEntries(for:)`` refreshes the cards from TMP within ``WalletExtensionConfiguration/refreshBudget``
///   when a valid session allows it, otherwise (or when TMP is slow, unreachable or refuses)
///   answers from the snapshot; only cards that are `ACTIVE` and not on that device.
/// - ``generateRequest(identifier:certificates:nonce:nonceSignature:completion:)`` goes
///   through `signed-cards` for the entry's card and device and completes exactly once
///   within ``WalletExtensionConfiguration/generationBudget``, with nil on any failure.
public final class WalletExtension: Sendable {
    /// The configuration.
    public let configuration: WalletExtensionConfiguration
    private let sessions: ExtensionSessionStore
    private let pending = Locked<Task<AddPassRequestGenerator.Generation, Never>?>(nil)

    /// Creates the extension's logic.
    public init(configuration: WalletExtensionConfiguration) {
        self.configuration = configuration
        self.sessions = ExtensionSessionStore(secrets: configuration.secrets)
    }

    // MARK: status

    /// Wallet's `status`, from the snapshot, the session and the live passes only.
    ///
    /// `requiresAuthentication` unless a session of the snapshot's cardholder exists with at
    /// least ``WalletExtensionConfiguration/sessionMargin`` of its life left. Entries are
    /// available for a device when the snapshot holds a card eligible there
    /// (``ExtensionEligibility``); without a snapshot or a pass library, none are. For the
    /// Watch, none are when the pass library knows no Watch is paired
    /// (``PassLibrary/isWatchPaired()`` false; nil, unknown, changes nothing).
    public func status() async -> ExtensionStatus {
        let library = configuration.passLibrary
        let available = await library.isPassLibraryAvailable()
        return status(passLibraryAvailable: available, passes: available ? await library.secureElementPasses() : [], watchPaired: available ? await library.isWatchPaired() : nil)
    }

    /// ``status()`` with the device's passes and the Watch's pairing (nil: unknown) already
    /// read: synchronous, so an adapter that can read PassKit where it is called answers
    /// without hopping to another thread.
    public func status(passLibraryAvailable: Bool, passes: [WalletPass], watchPaired: Bool? = nil) -> ExtensionStatus {
        let facts = configuration.directory.readStatusFacts()
        let session = sessions.validSession(at: configuration.now(), userId: facts?.userId, remaining: configuration.sessionMargin)
        guard let facts, passLibraryAvailable else {
            return ExtensionStatus(requiresAuthentication: session == nil, passEntriesAvailable: false, remotePassEntriesAvailable: false)
        }
        return ExtensionStatus(
            requiresAuthentication: session == nil,
            passEntriesAvailable: !ExtensionEligibility.eligible(facts.cards, livePasses: passes, device: .phone).isEmpty,
            remotePassEntriesAvailable: watchPaired != false && !ExtensionEligibility.eligible(facts.cards, livePasses: passes, device: .watch).isEmpty
        )
    }

    // MARK: passEntries / remotePassEntries

    /// Wallet's `passEntries` (`.phone`) or `remotePassEntries` (`.watch`): the cards that can
    /// be added to `device`, each with its art when the shared folder has it. For the Watch,
    /// none when the pass library knows no Watch is paired (``PassLibrary/isWatchPaired()``
    /// false), without asking TMP.
    ///
    /// With a valid session, the cards are read afresh from TMP (`GET cards`, the passes,
    /// `tokens/searches`) within the refresh budget and the snapshot is rewritten; art missing
    /// for an eligible card is then fetched within the art budget. Without a session, or when
    /// the refresh fails or runs out of time, the snapshot on disk answers — never another
    /// cardholder's, and nothing read for a session that a sign-out removed (or another
    /// sign-in replaced) while TMP was answering: that is not written to the snapshot
    /// either. Returns within refresh budget + art budget, whatever TMP does.
    public func passEntries(for device: DeviceType) async -> [ExtensionPassEntry] {
        if device == .watch, await configuration.passLibrary.isWatchPaired() == false { return [] }
        let directory = configuration.directory
        let session = sessions.validSession(at: configuration.now())
        var snapshot: ExtensionSnapshot?
        var artAtTMP: Set<String> = []
        var snapshotIsFresh = false
        if let session, let refreshed = await refresh(session) {
            snapshot = refreshed.snapshot
            artAtTMP = refreshed.cardsWithArt
            snapshotIsFresh = true
        } else if let stored = directory.readSnapshot(), session.map({ stored.userId.isSameIdentifier(as: $0.userId) }) ?? true {
            snapshot = stored
        }
        guard let snapshot, await configuration.passLibrary.isPassLibraryAvailable() else { return [] }
        let passes = await configuration.passLibrary.secureElementPasses()
        let cards = ExtensionEligibility.eligibleCards(in: snapshot, livePasses: passes, device: device)
        if let session {
            let missing = cards.map(\.externalCardId).filter { artAtTMP.contains($0) && directory.storedArtFileName(externalCardId: $0) == nil }
            if !missing.isEmpty { await fetchArt(missing, session: session) }
            // Cards read afresh for a session that a sign-out removed (or another sign-in
            // replaced) while the art arrived are not offered. (A session TMP refused was
            // removed by the refresh, and the snapshot on disk answers, as before.)
            if snapshotIsFresh, !sessions.holds(session) { return [] }
        }
        return cards.map { card in
            let artName = card.artFileName ?? directory.storedArtFileName(externalCardId: card.externalCardId)
            return ExtensionPassEntry(
                identifier: ExtensionEntryIdentifier(externalCardId: card.externalCardId, device: device),
                title: card.productTitle,
                card: card,
                configuration: AddPassConfiguration(entryFor: card, target: device),
                art: artName.flatMap(directory.art(named:)).map { ExtensionPassEntry.Art(data: $0.data, info: $0.info) }
            )
        }
    }

    /// The cards read afresh from TMP (and written as the new snapshot), or nil when that
    /// failed or took longer than the refresh budget, or when `session` is no longer the
    /// stored one by the time TMP answered (signed out meanwhile). A refused session is removed,
    /// unless another has been saved since.
    private func refresh(_ session: ExtensionSession) async -> (snapshot: ExtensionSnapshot, cardsWithArt: Set<String>)? {
        let reader = WalletStatusReader(client: client(session), passLibrary: configuration.passLibrary)
        let outcome = await Deadline.run(within: configuration.refreshBudget, clock: configuration.clock) { () async throws(TMPClientError) -> WalletStatusSnapshot in
            try await reader.read()
        }
        switch outcome {
        case .finished(.success(let status)):
            let directory = configuration.directory
            let snapshot = ExtensionSnapshot(status, userId: session.userId, writtenAt: configuration.now(), artFileNames: directory.artFileNames(for: status))
            // The app may have signed out (or another cardholder in) while TMP answered: then
            // the session is gone or replaced, and what was read for it is neither written
            // nor offered. Checked and written under the folder's lock, which sign-out takes
            // for its wipe, so no sign-out falls between the check and the write.
            guard await whileSignedIn(session, { try? directory.write(snapshot) }) else { return nil }
            return (snapshot, Set(status.cards.filter { $0.card.artURL != nil }.map(\.id)))
        case .finished(.failure(let error as TMPClientError)) where error.kind == .unauthorized:
            // The refused session only: a fresh one saved meanwhile stays.
            sessions.remove(session)
            return nil
        case .finished(.failure), .timedOut, .cancelled:
            return nil
        }
    }

    /// Runs `body` if `session` is still the stored one — not removed by a sign-out nor
    /// replaced by another sign-in — and says whether it ran. Checked and run under the shared
    /// folder's lock, which sign-out takes for its wipe, so no sign-out falls between the check
    /// and what `body` writes; when the lock cannot be had (the lock file cannot be opened),
    /// checked and run without it, as the wipe then goes on without it too. When another
    /// process holds the lock for more than ``lockPatience`` (the app mid-sign-out, stalled),
    /// or the task is cancelled while it waits, `body` does not run: the extension answers from
    /// what it has, within Wallet's budgets. The wait holds no thread.
    ///
    /// With a `gate`, each try for the lock is made through it: once the gate is closed, no
    /// try begins and `body` does not run, so closing it waits at most for one try and `body`.
    private func whileSignedIn(_ session: ExtensionSession, through gate: WriteGate? = nil, _ body: () -> Void) async -> Bool {
        let sessions = sessions
        let directory = configuration.directory
        func checked() -> Bool {
            guard sessions.holds(session) else { return false }
            body()
            return true
        }
        // nil: the lock is busy; try again.
        func attempt() throws -> Bool? {
            guard let gate else { return try directory.withLockIfFree(checked) }
            switch try gate.ifOpen({ try directory.withLockIfFree(checked) }) {
            case nil: return false  // closed: nothing more is written
            case .some(let ran): return ran
            }
        }
        do {
            return try await SharedWalletDirectory.retryingWhileBusy(waitingAtMost: Self.lockPatience, attempt)
        } catch let error as SharedStorageError where error.code == .busy {
            return false
        } catch is CancellationError {
            return false
        } catch {
            return gate.map { $0.ifOpen(checked) ?? false } ?? checked()
        }
    }

    /// Leaves an ``ExtensionAdd`` for the app, while `session` is still the stored one.
    private func recordAdd(of entry: ExtensionEntryIdentifier, by session: ExtensionSession) async {
        let directory = configuration.directory
        let add = ExtensionAdd(externalCardId: entry.externalCardId, device: entry.device, userId: session.userId, at: configuration.now())
        _ = await whileSignedIn(session) { try? directory.recordExtensionAdd(add, now: add.at) }
    }

    /// The longest the extension waits for the shared folder's lock (250 ms): the app holds it
    /// for milliseconds, to wipe the folder at sign-out. It comes on top of the refresh budget
    /// (the art's waits fall within the art budget), so with the budgets' 19 s at most
    /// together, Wallet's 20 s still hold.
    static let lockPatience: Duration = .milliseconds(250)

    /// Fetches art for `ids` within the art budget; whatever arrived in time is stored, each
    /// file only while `session` is still the stored one (art fetched for a cardholder who
    /// signed out meanwhile is dropped, and the rest not fetched).
    ///
    /// Returns only once no write can begin any more and none is under way: the fetch goes on
    /// in the background past the budget (``Deadline``), and a write it began would hold the
    /// shared folder's lock after Wallet has its answer. That wait is at most one try for the
    /// lock and one file: a wait for the lock is made through a ``WriteGate``, outside it.
    private func fetchArt(_ ids: [String], session: ExtensionSession) async {
        let fetcher = CardArtFetcher(client: client(session), directory: configuration.directory)
        let writes = WriteGate()
        _ = await Deadline.run(within: configuration.artBudget, clock: configuration.clock) { () async -> Void in
            for id in ids {
                if Task.isCancelled { return }
                guard let download = try? await fetcher.download(externalCardId: id) else { continue }
                let stored = await self.whileSignedIn(session, through: writes) { _ = try? fetcher.store(download, externalCardId: id) }
                guard stored else { return }
            }
        }
        writes.close()
    }

    // MARK: generateAddPaymentPassRequest

    /// Wallet's `generateAddPaymentPassRequestForPassEntryWithIdentifier`: seals the entry's
    /// card for its device through `signed-cards` and calls `completion` exactly once within
    /// the generation budget — with the request, or nil when the identifier is not one of
    /// ours, there is no valid session, TMP refuses or is too slow, or the returned task is
    /// cancelled. A new call supersedes one still running, which completes with nil at once.
    /// A session TMP refuses (`401`) is removed before `completion` is called, as
    /// `passEntries` removes one, so `status` then asks for sign-in. Once the card is sealed, an
    /// ``ExtensionAdd`` is left in the shared folder for the app before `completion` hands it
    /// to Wallet (which may take the folder's lock up to 250 ms beyond the budget).
    @discardableResult
    public func generateRequest(identifier: String, certificates: [Data], nonce: Data, nonceSignature: Data, completion: @escaping @Sendable (AddPassRequest?) -> Void) -> Task<AddPassRequestGenerator.Generation, Never> {
        guard let entry = ExtensionEntryIdentifier(rawValue: identifier), let session = sessions.validSession(at: configuration.now()) else {
            completion(nil)
            return Task { AddPassRequestGenerator.Generation(request: .empty, failure: .notEligible("no valid session or entry for this request")) }
        }
        let request = SignedCardRequest(externalCardId: entry.externalCardId, deviceType: entry.device, certificates: certificates, nonce: nonce, nonceSignature: nonceSignature)
        let generator = AddPassRequestGenerator(client: client(session), budget: configuration.generationBudget, clock: configuration.clock)
        let sessions = sessions
        let once = CompletionOnce(completion)
        return pending.withLock { pending in
            pending?.cancel()
            let task = Task {
                let generation = await generator.generate(request)
                // TMP refused the session: it goes (unless another was saved since), so
                // `status` asks for sign-in again rather than promise cards that cannot be added.
                if case .server(let error)? = generation.failure, error.kind == .unauthorized { sessions.remove(session) }
                // Wallet goes on to add the card: the app learns of it, so it does not offer the
                // card again before TMP hears of the new token (best effort). Written before
                // Wallet is answered, while the extension surely runs: once answered, iOS may
                // suspend it at any moment, and a process suspended holding a lock on a file in
                // the shared container is killed (`0xdead10cc`). It costs the answer at most the
                // lock's patience (250 ms) and a small write, within Wallet's 20 s beside the
                // generation's budget of at most 19 s.
                if !generation.request.isEmpty { await self.recordAdd(of: entry, by: session) }
                once.complete(generation.request.isEmpty ? nil : generation.request)
                return generation
            }
            pending = task
            return task
        }
    }

    /// The `async` form of ``generateRequest(identifier:certificates:nonce:nonceSignature:completion:)``;
    /// cancelling the calling task answers nil at once.
    public func generateRequest(identifier: String, certificates: [Data], nonce: Data, nonceSignature: Data) async -> AddPassRequest? {
        let task = generateRequest(identifier: identifier, certificates: certificates, nonce: nonce, nonceSignature: nonceSignature) { _ in }
        let generation = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        return generation.request.isEmpty ? nil : generation.request
    }

    // MARK: Helpers

    private func client(_ session: ExtensionSession) -> TMPClient {
        let token = session.cardholderToken
        return TMPClient(configuration: configuration.tmp, transport: configuration.transport, clock: configuration.clock, cardholderToken: { token }, log: configuration.log)
    }
}
