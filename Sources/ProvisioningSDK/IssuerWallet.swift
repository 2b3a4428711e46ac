import Foundation
import ProvisioningModels

/// The issuer app's one entry point to Apple Wallet: wallet status per card and device,
/// in-app provisioning, and activation deep links.
///
/// It keeps the latest ``WalletStatusSnapshot`` and publishes every new one through
/// ``statusUpdates()``; provisioning and activation refresh it when they end. Given a
/// ``WalletExtensionSharing``, it also writes every status it publishes to the App Group
/// for the Wallet extensions (``sharedStorage``), and ``signOut()`` wipes it.
///
/// A pass an in-app flow added stands for its card until TMP lists its token
/// (``AddedPass``, ``passesAwaitingIssuer``): the network tells TMP of a new token by an
/// event that can arrive after the add sheet has closed. While such a pass is awaited, the
/// wallet reads the status again on its own (``recheckDelays``) and publishes each read.
public actor IssuerWallet {
    /// TMP.
    public let client: TMPClient
    /// This iPhone's and the paired Watch's passes.
    public let passLibrary: any PassLibrary
    /// The issuer's activation deep link.
    public let activationLinks: ActivationLinkRoute
    /// Answers Wallet's requests for card data.
    public let generator: AddPassRequestGenerator
    /// What the Wallet extensions read (nil when the app shares nothing with them).
    public nonisolated let sharedStorage: SharedWalletStorage?

    /// The latest status read, if any.
    public private(set) var latestStatus: WalletStatusSnapshot?
    /// When ``latestStatus`` was read.
    private var latestStatusReadAt: Date?
    /// How old ``latestStatus`` may be for ``beginProvisioning(externalCardId:target:)`` to
    /// decide on it without reading again.
    public nonisolated let statusMaxAge: TimeInterval
    private var subscribers: [UUID: AsyncStream<WalletStatusSnapshot>.Continuation] = [:]
    // Reads overlap (the actor is re-entered while one awaits the network): only a read that
    // started after the one last published may replace it.
    private var readsStarted = 0
    private var lastPublishedRead = 0
    /// Sign-outs whose wipe of the shared folder has not returned yet.
    private var signOutsUnderWay = 0
    /// Passes in-app flows added that TMP did not list at the last read.
    public private(set) var passesAwaitingIssuer: [AddedPass] = []
    /// The waits between the reads made while ``passesAwaitingIssuer`` is not empty, from the
    /// read after an add; after the last one the wallet reads only when asked.
    public nonisolated let recheckDelays: [Duration]
    /// The default waits: about 30 s in all, the time a network's `CREATED` event usually
    /// takes and then some.
    public static let defaultRecheckDelays: [Duration] = [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16)]
    private let now: @Sendable () -> Date
    private var recheck: Task<Void, Never>?
    /// Rounds of rechecks started: a round that ends clears ``recheck`` only if it is the last.
    private var rechecks = 0
    /// Sign-outs so far: work begun for one cardholder checks it before it records anything.
    private var signOuts = 0
    /// The Wallet extension's adds already kept as ``AddedPass``es.
    private var importedExtensionAdds: Set<ExtensionAdd> = []

    /// Creates the entry point.
    ///
    /// - Parameters:
    ///   - client: the TMP client (base URL, cardholder token provider).
    ///   - passLibrary: the device's pass library (ProvisioningPassKit's `PassKitPassLibrary` in an app).
    ///   - activationLinks: the deep link configured at the card network.
    ///   - generator: answers Wallet's requests for card data; by default through `client`
    ///     within ``AddPassRequestGenerator/defaultBudget``.
    ///   - sharing: where to leave the snapshot and art for the Wallet extensions; every
    ///     status published (after sign-in, refreshes, provisioning, activation) is written there.
    ///   - recheckDelays: the waits between reads while an added pass is awaited.
    ///   - statusMaxAge: how old the latest status may be for an add to start from it (60 s
    ///     by default); an older one is read again first.
    ///   - now: the clock that ages ``passesAwaitingIssuer`` and ``latestStatus``.
    public init(client: TMPClient, passLibrary: any PassLibrary, activationLinks: ActivationLinkRoute, generator: AddPassRequestGenerator? = nil, sharing: WalletExtensionSharing? = nil, recheckDelays: [Duration] = IssuerWallet.defaultRecheckDelays, statusMaxAge: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() }) {
        self.client = client
        self.passLibrary = passLibrary
        self.activationLinks = activationLinks
        self.generator = generator ?? AddPassRequestGenerator(client: client)
        self.sharedStorage = sharing.map { SharedWalletStorage(sharing: $0, client: client) }
        self.recheckDelays = recheckDelays
        self.statusMaxAge = statusMaxAge
        self.now = now
    }

    // MARK: Status

    /// Reads every card's status afresh (`GET cards`, the passes, one `tokens/searches`),
    /// keeps it as ``latestStatus``, publishes it, and writes it for the Wallet extensions.
    ///
    /// When reads overlap, an older read finishing last does not replace a newer one.
    @discardableResult
    public func refreshStatus() async throws(TMPClientError) -> WalletStatusSnapshot {
        readsStarted += 1
        let read = readsStarted
        // Whom the read is for, so it is not shown to or written for a cardholder who signed in
        // (without the previous one signing out) while it ran.
        let readFor = await sharedStorage?.sharing.userId()
        await importExtensionAdds()
        let awaited = passesAwaitingIssuer
        let startedAt = now()
        let (snapshot, stillAwaited) = try await WalletStatusReader(client: client, passLibrary: passLibrary).read(addedPasses: awaited, now: startedAt)
        // Not while a sign-out is under way: the read was made for the cardholder leaving.
        // (The sign-in check may wait, so the order and sign-outs are checked after it too.)
        if read > lastPublishedRead, signOutsUnderWay == 0, await isStillSignedIn(readFor), read > lastPublishedRead, signOutsUnderWay == 0 {
            lastPublishedRead = read
            // What this read learnt of the records it was given; ones added meanwhile stay.
            let given = Set(awaited.map(\.id))
            let kept = Dictionary(uniqueKeysWithValues: stillAwaited.map { ($0.id, $0) })
            passesAwaitingIssuer = passesAwaitingIssuer.compactMap { given.contains($0.id) ? kept[$0.id] : $0 }
            if passesAwaitingIssuer.isEmpty { stopRechecking() }
            await publish(snapshot, read: read, readAt: startedAt, readFor: readFor)
            // Adds of cards this read was the first to list wait for the next read.
            await importExtensionAdds()
        }
        return snapshot
    }

    /// Keeps each recent add of the Wallet extension's (``ExtensionAdd``, in the shared
    /// folder) for the signed-in cardholder as an ``AddedPass`` without a pass, once, for a
    /// card the latest status lists; starts the rechecks if it kept any.
    private func importExtensionAdds() async {
        guard let sharedStorage else { return }
        let signOuts = signOuts
        let now = now()
        importedExtensionAdds = importedExtensionAdds.filter { now.timeIntervalSince($0.at) < SharedWalletDirectory.extensionAddLifetime }
        let adds = sharedStorage.sharing.directory.readExtensionAdds(now: now).filter { !importedExtensionAdds.contains($0) }
        guard !adds.isEmpty, let userId = await sharedStorage.sharing.userId(), signOuts == self.signOuts else { return }
        var kept = false
        for add in adds where !importedExtensionAdds.contains(add) && add.userId.isSameIdentifier(as: userId) {
            guard let card = latestStatus?[add.externalCardId]?.card else { continue }
            importedExtensionAdds.insert(add)
            passesAwaitingIssuer.append(AddedPass(externalCardId: add.externalCardId, device: add.device, deviceAccountIdentifier: nil, panLast4: card.panLast4, addedAt: add.at, walletReportedAdd: false))
            kept = true
        }
        // Called from a read the rechecks make too: a running round is left to go on.
        if kept, recheck == nil { startRechecking() }
    }

    /// Sign-out: forgets the latest status and removes everything shared with the Wallet
    /// extensions (snapshot, art, their session). The app signs out of its own identity
    /// provider itself.
    ///
    /// A read still running when this is called does not publish or write what it read (its
    /// caller still gets it): it was made for the cardholder who signed out.
    public func signOut() async throws {
        lastPublishedRead = readsStarted
        latestStatus = nil
        signOuts += 1
        passesAwaitingIssuer = []
        importedExtensionAdds = []
        latestStatusReadAt = nil
        stopRechecking()
        // A read that ends while the wipe waits for the shared folder's lock, or that began
        // meanwhile, was made for the cardholder signing out (the app leaves its identity
        // provider afterwards): it publishes and writes nothing either.
        signOutsUnderWay += 1
        defer {
            signOutsUnderWay -= 1
            lastPublishedRead = readsStarted
        }
        try await sharedStorage?.signOut()
    }

    /// Every snapshot read from now on, until the stream's consumer stops.
    public func statusUpdates() -> AsyncStream<WalletStatusSnapshot> {
        let (stream, continuation) = AsyncStream.makeStream(of: WalletStatusSnapshot.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(id) }
        }
        return stream
    }

    // MARK: In-app provisioning

    /// Starts adding a card to `target`: the add sheet's configuration and the session that
    /// answers Wallet. Decides on ``latestStatus`` when it is at most ``statusMaxAge`` old;
    /// otherwise reads the status first (the card may have been blocked, or added from Wallet,
    /// since). If that read fails for a reason that may pass (a timeout, TMP unreachable or
    /// busy: ``TMPClientError/isTransient``), an older status is used all the same (the flow's
    /// own `signed-cards` call then meets the same trouble and ends with its reason); any
    /// other failure (a refused cardholder token, a cancelled task), or one with no status at
    /// all, is thrown as ``ProvisioningFailure/server(_:)``.
    public func beginProvisioning(externalCardId: String, target: DeviceType) async throws(ProvisioningFailure) -> ProvisioningSession {
        // Taken before any wait: a sign-out during the read ends what this flow would keep.
        let signOuts = signOuts
        let snapshot: WalletStatusSnapshot
        if let latestStatus, let readAt = latestStatusReadAt, now().timeIntervalSince(readAt) <= statusMaxAge {
            snapshot = latestStatus
        } else {
            do {
                snapshot = try await refreshStatus()
            } catch {
                guard let latestStatus, error.isTransient else { throw .server(error) }
                snapshot = latestStatus
            }
        }
        // The cardholder signed out during the read: no flow for their card.
        guard signOuts == self.signOuts else { throw .cancelled }
        guard let status = snapshot[externalCardId] else {
            throw .notEligible("no card \(externalCardId) for this cardholder")
        }
        guard snapshot.passLibraryAvailable else {
            throw .unavailable("this device has no Wallet pass library")
        }
        let configuration = try AddPassConfiguration(for: status, target: target)
        let card = status.card
        return ProvisioningSession(configuration: configuration, generator: generator) { [weak self] result in
            await self?.flowEnded(result, card: card, target: target, signOuts: signOuts)
        }
    }

    /// Keeps the pass of a flow that ended added for its card, reads the status, and keeps
    /// reading for a while if TMP does not list the pass yet.
    private func flowEnded(_ result: WalletAddResult, card: CardSummary, target: DeviceType, signOuts: Int) async -> WalletStatusSnapshot? {
        // A flow the cardholder began before signing out keeps nothing for the next one.
        if case .added(let pass) = result, signOuts == self.signOuts {
            let record = AddedPass(externalCardId: card.externalCardId, device: pass?.device ?? target, deviceAccountIdentifier: pass?.deviceAccountIdentifier, panLast4: card.panLast4, addedAt: now())
            // A newer add of the same pass (Wallet handing the same one over again) replaces it.
            passesAwaitingIssuer.removeAll { $0.deviceAccountIdentifier != nil && $0.deviceAccountIdentifier == record.deviceAccountIdentifier }
            passesAwaitingIssuer.append(record)
        }
        // The status is not read for a cardholder who has signed out meanwhile.
        guard signOuts == self.signOuts else { return nil }
        let snapshot = try? await refreshStatus()
        if case .added = result, !passesAwaitingIssuer.isEmpty { startRechecking() }
        return snapshot
    }

    // MARK: Rechecks

    private func startRechecking() {
        recheck?.cancel()
        let delays = recheckDelays
        rechecks += 1
        let round = rechecks
        recheck = Task { [weak self] in
            for delay in delays {
                do { try await Task.sleep(for: delay) } catch { return }
                guard let self, await self.keepsRechecking() else { break }
                _ = try? await self.refreshStatus()
            }
            await self?.rechecksEnded(round)
        }
    }

    private func rechecksEnded(_ round: Int) {
        if round == rechecks { recheck = nil }
    }

    private func keepsRechecking() -> Bool {
        !Task.isCancelled && !passesAwaitingIssuer.isEmpty
    }

    private func stopRechecking() {
        recheck?.cancel()
        recheck = nil
    }

    // MARK: Activation

    /// How many times activation asks TMP again for a just-added pass TMP does not know yet,
    /// after the first waits of ``recheckDelays`` (1 + 2 + 4 s by default).
    public static let activationRetries = 3

    /// Acts on an activation deep link: checks it is the issuer's, finds the pass with its
    /// `serialNumber` on the iPhone or the Watch, asks TMP to activate that pass's token,
    /// and refreshes the status (whatever TMP answered).
    ///
    /// For a pass an in-app flow just added (``passesAwaitingIssuer``) that TMP does not
    /// know yet (`token_not_found`), TMP is asked again after each of the first
    /// ``activationRetries`` waits of ``recheckDelays``; then the error is
    /// ``ActivationError/Kind/awaitingIssuer``.
    ///
    /// Throws ``ActivationError`` for a malformed link, an unknown pass, or a failed call;
    /// TMP's `DECLINED` and `FAILED` are results, not errors.
    public func handleActivationLink(_ url: URL) async throws(ActivationError) -> ActivationResult {
        let serialNumber = try activationLinks.serialNumber(in: url)
        let passes = await passLibrary.secureElementPasses()
        guard let pass = passes.first(where: { $0.serialNumber == serialNumber }) else {
            throw ActivationError(.unknownPass, "no pass with that serial number on this iPhone or the paired Apple Watch")
        }
        // A pass an in-app flow just added may reach the app's link before TMP heard of its
        // token from the network: TMP is asked again after the first rechecks' waits.
        let awaited = passesAwaitingIssuer.contains { $0.deviceAccountIdentifier == pass.deviceAccountIdentifier }
        var waits = awaited ? Array(recheckDelays.prefix(Self.activationRetries)) : []
        let signOuts = signOuts
        let response: TokenActivationResponse
        while true {
            do {
                response = try await client.activateToken(tokenUniqueReference: pass.deviceAccountIdentifier)
                break
            } catch where error.code == "token_not_found" && awaited {
                guard !waits.isEmpty else {
                    throw ActivationError(.awaitingIssuer, "the card network has not yet told the issuer about this pass; try again in a moment", clientError: error)
                }
                do { try await Task.sleep(for: waits.removeFirst()) } catch { throw ActivationError(.network, "the activation was cancelled", clientError: TMPClientError(operation: .activateToken, kind: .cancelled, code: "cancelled", message: "the activation was cancelled")) }
                guard signOuts == self.signOuts else {
                    throw ActivationError(.network, "the cardholder signed out during the activation", clientError: TMPClientError(operation: .activateToken, kind: .cancelled, code: "cancelled", message: "the cardholder signed out during the activation"))
                }
            } catch {
                throw ActivationError(.network, error.message, clientError: error)
            }
        }
        // Not read for a cardholder who has signed out meanwhile.
        let status = signOuts == self.signOuts ? try? await refreshStatus() : nil
        return ActivationResult(outcome: response.issuerMobileAppAuthResponse, comment: response.comment, cardLast4Digits: response.cardLast4Digits, pass: pass, status: status)
    }

    // MARK: Publishing

    /// Whether `readFor`, the cardholder signed in when a read began (nil without shared
    /// storage, or when nobody was), is still the one signed in.
    private func isStillSignedIn(_ readFor: String?) async -> Bool {
        guard let sharedStorage, let readFor else { return true }
        guard let current = await sharedStorage.sharing.userId() else { return false }
        return current.isSameIdentifier(as: readFor)
    }

    private func publish(_ snapshot: WalletStatusSnapshot, read: Int, readAt: Date, readFor: String?) async {
        latestStatus = snapshot
        latestStatusReadAt = readAt
        for continuation in subscribers.values {
            continuation.yield(snapshot)
        }
        // The extensions make do with the previous snapshot if this one cannot be written.
        try? await sharedStorage?.record(snapshot, order: read, readFor: readFor)
    }

    private func unsubscribe(_ id: UUID) {
        subscribers[id] = nil
    }
}
