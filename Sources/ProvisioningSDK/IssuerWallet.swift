import Foundation
import ProvisioningModels

/// The issuer app's one entry point to Apple Wallet: wallet status per card and device,
/// in-app provisioning, and activation deep links.
///
/// It keeps the latest ``WalletStatusSnapshot`` and publishes every new one through
/// ``statusUpdates()``; provisioning and activation refresh it when they end. Given a
/// ``WalletExtensionSharing``, it also writes every status it publishes to the App Group
/// for the Wallet extensions (``sharedStorage``), and ``signOut()`` wipes it.
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
    private var subscribers: [UUID: AsyncStream<WalletStatusSnapshot>.Continuation] = [:]
    // Reads overlap (the actor is re-entered while one awaits the network): only a read that
    // started after the one last published may replace it.
    private var readsStarted = 0
    private var lastPublishedRead = 0

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
    public init(client: TMPClient, passLibrary: any PassLibrary, activationLinks: ActivationLinkRoute, generator: AddPassRequestGenerator? = nil, sharing: WalletExtensionSharing? = nil) {
        self.client = client
        self.passLibrary = passLibrary
        self.activationLinks = activationLinks
        self.generator = generator ?? AddPassRequestGenerator(client: client)
        self.sharedStorage = sharing.map { SharedWalletStorage(sharing: $0, client: client) }
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
        let snapshot = try await WalletStatusReader(client: client, passLibrary: passLibrary).read()
        if read > lastPublishedRead {
            lastPublishedRead = read
            await publish(snapshot, read: read)
        }
        return snapshot
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
    /// answers Wallet. Uses ``latestStatus`` (reading it first if there is none yet).
    public func beginProvisioning(externalCardId: String, target: DeviceType) async throws(ProvisioningFailure) -> ProvisioningSession {
        let snapshot: WalletStatusSnapshot
        if let latestStatus {
            snapshot = latestStatus
        } else {
            do {
                snapshot = try await refreshStatus()
            } catch {
                throw .server(error)
            }
        }
        guard let status = snapshot[externalCardId] else {
            throw .notEligible("no card \(externalCardId) for this cardholder")
        }
        guard snapshot.passLibraryAvailable else {
            throw .unavailable("this device has no Wallet pass library")
        }
        let configuration = try AddPassConfiguration(for: status, target: target)
        return ProvisioningSession(configuration: configuration, generator: generator) { [weak self] in
            try? await self?.refreshStatus()
        }
    }

    // MARK: Activation

    /// Acts on an activation deep link: checks it is the issuer's, finds the pass with its
    /// `serialNumber` on the iPhone or the Watch, asks TMP to activate that pass's token,
    /// and refreshes the status (whatever TMP answered).
    ///
    /// Throws ``ActivationError`` for a malformed link, an unknown pass, or a failed call;
    /// TMP's `DECLINED` and `FAILED` are results, not errors.
    public func handleActivationLink(_ url: URL) async throws(ActivationError) -> ActivationResult {
        let serialNumber = try activationLinks.serialNumber(in: url)
        let passes = await passLibrary.secureElementPasses()
        guard let pass = passes.first(where: { $0.serialNumber == serialNumber }) else {
            throw ActivationError(.unknownPass, "no pass with that serial number on this iPhone or the paired Apple Watch")
        }
        let response: TokenActivationResponse
        do {
            response = try await client.activateToken(tokenUniqueReference: pass.deviceAccountIdentifier)
        } catch {
            throw ActivationError(.network, error.message, clientError: error)
        }
        let status = try? await refreshStatus()
        return ActivationResult(outcome: response.issuerMobileAppAuthResponse, comment: response.comment, cardLast4Digits: response.cardLast4Digits, pass: pass, status: status)
    }

    // MARK: Publishing

    private func publish(_ snapshot: WalletStatusSnapshot, read: Int) async {
        latestStatus = snapshot
        for continuation in subscribers.values {
            continuation.yield(snapshot)
        }
        // The extensions make do with the previous snapshot if this one cannot be written.
        try? await sharedStorage?.record(snapshot, order: read)
    }

    private func unsubscribe(_ id: UUID) {
        subscribers[id] = nil
    }
}
