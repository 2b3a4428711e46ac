import Crypto
import Foundation
import Logging
import ProvisioningCrypto
import ProvisioningModels
import TokenPlatform

/// The network's token service provider, simulated faithfully and spoken to over real HTTP.
///
/// On the tokenization side it does what a real TSP does with the card Apple opened: verifies
/// TMP's activation data itself with the keys TMP publishes (`GET /tsp/activation-keys`:
/// signature, expiry, the Wallet nonce, single use), asks TMP for a decision
/// (`POST /tsp/tokenization-decisions`), creates the token and reports it
/// (`POST /tsp/token-events`). On the lifecycle side it is TMP's ``TokenServiceConnector``:
/// activate, suspend, resume and deactivate change its token, tell the
/// ``TokenStateObserver``s (the simulated device), and are echoed to TMP as token events,
/// asynchronously as a real network sends them.
///
/// TMP needs the connector before it starts and the simulator needs TMP's address, which a
/// server on a free port knows only once it runs: create the simulator without an endpoint,
/// give it to TMP, and ``connect(to:)`` once the server listens.
public actor TokenServiceSimulator: TokenServiceConnector {
    /// How the simulator behaves.
    public struct Configuration: Sendable {
        /// The issuer-app link for yellow-path activation.
        public var activationLink: ActivationLinkFormat
        /// When token events are sent.
        public var eventDelivery: TokenEventDeliveryMode
        /// The shortest time between two fetches of TMP's keys caused by an unknown key id,
        /// so forged key ids cannot make the simulator hammer TMP.
        public var minimumKeyRefetchInterval: TimeInterval
        /// How far TMP's clock may run ahead of the simulator's.
        public var allowedClockSkew: TimeInterval
        /// Injected failures.
        public var faults: TokenServiceFaults
        /// With ``TokenEventDeliveryMode/background`` delivery, the wait before the first
        /// retry of an event TMP could not be reached for; each further retry waits twice as
        /// long, up to ``longestEventRetryDelay``.
        public var firstEventRetryDelay: Duration
        /// The longest wait between two retries.
        public var longestEventRetryDelay: Duration
        /// Retries after which the simulator stops trying on its own; the events stay queued
        /// for the next event, ``TokenServiceSimulator/drainEvents()`` or
        /// ``TokenServiceSimulator/connect(to:)``.
        public var eventRetries: Int

        /// Creates a configuration.
        public init(
            activationLink: ActivationLinkFormat = ActivationLinkFormat(),
            eventDelivery: TokenEventDeliveryMode = .background,
            minimumKeyRefetchInterval: TimeInterval = 5,
            allowedClockSkew: TimeInterval = 30,
            faults: TokenServiceFaults = .none,
            firstEventRetryDelay: Duration = .milliseconds(500),
            longestEventRetryDelay: Duration = .seconds(30),
            eventRetries: Int = 10
        ) {
            self.activationLink = activationLink
            self.eventDelivery = eventDelivery
            self.minimumKeyRefetchInterval = minimumKeyRefetchInterval
            self.allowedClockSkew = allowedClockSkew
            self.faults = faults
            self.firstEventRetryDelay = firstEventRetryDelay
            self.longestEventRetryDelay = longestEventRetryDelay
            self.eventRetries = eventRetries
        }
    }

    /// The most delivery-log entries kept; older ones are forgotten.
    public static let deliveryLogCapacity = 1000

    var configuration: Configuration
    var client: TSPAPIClient?
    var tokens: [String: NetworkToken] = [:]
    /// Activation data ids seen, with their expiry: single use without unbounded memory,
    /// since expired data is refused anyway.
    var usedActivationData: [String: Date] = [:]
    var verificationKeys: [String: P256.Signing.PublicKey] = [:]
    var keysFetchedAt: Date?
    var outbox: [TokenEventRequest] = []
    var deliveryTask: Task<Void, Never>?
    /// The retry waiting to deliver after a failure (background delivery), and how many
    /// retries in a row have failed.
    var retryTask: Task<Void, Never>?
    var failedRetries = 0
    /// Set by ``shutDown()``: no event leaves any more.
    var isShutDown = false
    var deliveries: [TokenEventDelivery] = []
    var observers: [any TokenStateObserver] = []
    let now: @Sendable () -> Date
    let randomBytes: @Sendable (Int) -> [UInt8]
    let sleep: @Sendable (Duration) async throws -> Void
    let logger: Logger

    /// Creates a simulator.
    ///
    /// - Parameters:
    ///   - endpoint: TMP's TSP API, or nil to ``connect(to:)`` later.
    ///   - now: The clock (activation-data expiry, token times).
    ///   - randomBytes: Randomness for token references, token last digits and event ids.
    ///   - sleep: How a hanging operation waits (see ``TokenServiceFaults/hangDuration``).
    public init(
        endpoint: TSPAPIEndpoint? = nil,
        configuration: Configuration = Configuration(),
        now: @escaping @Sendable () -> Date = { Date() },
        randomBytes: @escaping @Sendable (Int) -> [UInt8] = TokenServiceSimulator.systemRandomBytes,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        logger: Logger = Logger(label: "pushprov.tsp-simulator")
    ) {
        self.client = endpoint.map { TSPAPIClient(endpoint: $0) }
        self.configuration = configuration
        self.now = now
        self.randomBytes = randomBytes
        self.sleep = sleep
        self.logger = logger
    }

    /// Cryptographically random bytes from the system generator.
    public static func systemRandomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    // MARK: Set-up

    /// Points the simulator at TMP's TSP API (again, when TMP moved).
    public func connect(to endpoint: TSPAPIEndpoint) {
        guard !isShutDown else { return }
        client = TSPAPIClient(endpoint: endpoint)
        // A new address: events still queued go there on the retry schedule, afresh (a
        // retry waiting out a long delay for the old address is dropped).
        retryTask?.cancel()
        retryTask = nil
        failedRetries = 0
        if !outbox.isEmpty { scheduleRetry() }
    }

    /// Stops sending events, for good: a waiting retry is cancelled, the delivery under way
    /// ends after the event it is sending, and events queued now or later stay queued
    /// (``pendingEvents``). Returns once nothing of the simulator's runs any more, so a retry
    /// cannot outlive the TMP it was for (and reach another server on the same port).
    public func shutDown() async {
        isShutDown = true
        retryTask?.cancel()
        retryTask = nil
        client = nil
        await deliveryTask?.value
    }

    /// Replaces the injected failures.
    public func setFaults(_ faults: TokenServiceFaults) {
        configuration.faults = faults
    }

    /// The injected failures.
    public var faults: TokenServiceFaults { configuration.faults }

    /// Adds an observer of token state changes.
    public func addObserver(_ observer: any TokenStateObserver) {
        observers.append(observer)
    }

    /// The token with this reference, or nil.
    public func token(_ tokenUniqueReference: String) -> NetworkToken? {
        tokens[tokenUniqueReference]
    }

    /// Every token, oldest first.
    public var allTokens: [NetworkToken] {
        tokens.values.sorted { ($0.createdAt, $0.tokenUniqueReference) < ($1.createdAt, $1.tokenUniqueReference) }
    }

    // MARK: Tokenization

    /// Tokenizes the card Apple opened: verifies the activation data, asks TMP, creates and
    /// reports the token.
    ///
    /// Declines (TMP's, the token service's own checks, TMP out of reach) are outcomes, not
    /// errors; nothing is created for them.
    ///
    /// - Throws: ``TokenServiceSimulatorError/notConnected``, or
    ///   ``TokenServiceSimulatorError/issuerRefused(_:)`` when TMP refuses the call itself
    ///   (wrong API key, invalid request).
    public func tokenize(_ request: TokenizationRequest) async throws(TokenServiceSimulatorError) -> TokenizationOutcome {
        let client = try connectedClient()
        if let reason = configuration.faults.declineTokenization {
            return .declined(TokenizationDecline(reason: reason, source: .tokenService))
        }
        var claims: ActivationDataClaims?
        var activationData: String?
        if let data = request.activationData {
            switch try await checkActivationData(data, of: request, client: client) {
            case .valid(let valid):
                claims = valid
                activationData = String(decoding: data, as: UTF8.self)
            case .declined(let decline):
                logger.info("tokenization declined by the token service", metadata: ["reason": "\(decline.reason)"])
                return .declined(decline)
            }
        }
        let decisionRequest = TokenizationDecisionRequest(
            requestId: "TDR" + randomHex(16),
            primaryAccountNumber: request.card.primaryAccountNumber,
            expiration: request.card.expiration,
            activationData: activationData,
            walletType: request.walletType,
            deviceType: request.deviceType
        )
        var decision: TokenizationDecisionResponse
        do {
            decision = try await client.decide(decisionRequest)
        } catch {
            return .declined(try Self.unreachableIssuer(error))
        }
        if configuration.faults.timeOut.contains(.tokenizationDecision) {
            try? await sleep(configuration.faults.hangDuration)
            guard configuration.faults.retryTimedOutDecision else {
                return .declined(TokenizationDecline(reason: "issuer_timeout", source: .tokenService))
            }
            // The answer was lost: the same request, same id, asked again.
            do {
                decision = try await client.decide(decisionRequest)
            } catch {
                return .declined(try Self.unreachableIssuer(error))
            }
        }
        let path: AuthorizationPath
        switch decision.decision {
        case .declined: return .declined(TokenizationDecline(reason: decision.reason, source: .issuer))
        case .approved: path = configuration.faults.downgradeApprovalToYellow ? .yellow : .green
        case .requireAdditionalAuthentication: path = .yellow
        }
        guard let panUniqueReference = decision.panUniqueReference, !panUniqueReference.isEmpty else {
            throw .invalidDecision("\(decision.decision.rawValue) without a panUniqueReference")
        }
        // The activation data must be the one TMP issued for this very card.
        if let claims, !constantTimeEquals(claims.panUniqueReference, panUniqueReference) {
            return .declined(TokenizationDecline(reason: "activation_data_wrong_card", source: .tokenService))
        }
        let created = now()
        let token = NetworkToken(
            tokenUniqueReference: newTokenReference(),
            panUniqueReference: panUniqueReference,
            panLast4: request.card.primaryAccountNumber.last4,
            tokenLast4: randomDigits(4),
            deviceType: request.deviceType,
            walletType: request.walletType,
            status: path == .green ? .active : .inactive,
            authorizationPath: path,
            createdAt: created,
            updatedAt: created
        )
        tokens[token.tokenUniqueReference] = token
        logger.info("token created", metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "path": "\(path.rawValue)", "device": "\(request.deviceType.rawValue)"])
        enqueueEvent(.created, for: token)
        if path == .green { enqueueEvent(.activated, for: token) }
        if configuration.eventDelivery == .background { await drainEvents() }
        // The token as it is now: TMP may have changed it while it heard of its creation (a
        // card blocked or closed meanwhile), and the device learns that through its observer.
        let current = tokens[token.tokenUniqueReference] ?? token
        return path == .green ? .approved(current) : .requiresActivation(current)
    }

    /// The issuer-app link that activates the yellow-path pass `serialNumber` of `tokenUniqueReference`.
    ///
    /// - Throws: ``TokenServiceSimulatorError`` when the token is unknown, does not wait for
    ///   activation, or the serial number is empty or over-long.
    public func activationLink(forToken tokenUniqueReference: String, serialNumber: String) throws(TokenServiceSimulatorError) -> URL {
        guard let token = tokens[tokenUniqueReference] else { throw .unknownToken(tokenUniqueReference) }
        guard token.status == .inactive else {
            throw .notAwaitingActivation(tokenUniqueReference: tokenUniqueReference, status: token.status)
        }
        guard !serialNumber.isEmpty, serialNumber.count <= 256 else { throw .invalidSerialNumber }
        return configuration.activationLink.link(serialNumber: serialNumber)
    }

    // MARK: Internals

    func connectedClient() throws(TokenServiceSimulatorError) -> TSPAPIClient {
        guard let client else { throw .notConnected }
        return client
    }

    /// A decline for a TMP that cannot answer now; rethrows refusals retrying will not fix.
    static func unreachableIssuer(_ error: TSPAPIError) throws(TokenServiceSimulatorError) -> TokenizationDecline {
        guard error.isTransient else { throw .issuerRefused(error) }
        if case .timedOut = error { return TokenizationDecline(reason: "issuer_timeout", source: .tokenService) }
        return TokenizationDecline(reason: "issuer_unavailable", source: .tokenService)
    }

    /// Verifies activation data with TMP's published keys and the Wallet nonce, and uses it
    /// up. The card binding is checked once TMP's decision names the card.
    ///
    /// - Throws: ``TokenServiceSimulatorError/issuerRefused(_:)`` when TMP refuses to publish
    ///   its keys to this caller (wrong API key).
    private func checkActivationData(_ data: Data, of request: TokenizationRequest, client: TSPAPIClient) async throws(TokenServiceSimulatorError) -> ActivationDataCheck {
        func refused(_ code: String) -> ActivationDataCheck {
            .declined(TokenizationDecline(reason: "activation_data_\(code)", source: .tokenService))
        }
        guard data.count <= CompactJWS.maximumLength, let text = String(data: data, encoding: .utf8) else {
            return refused(ActivationDataRefusal.Code.malformed.rawValue)
        }
        do {
            try await refreshKeys(neededFor: (try? CompactJWS.parse(text))?.header.kid, client: client)
        } catch {
            return .declined(try Self.unreachableIssuer(error))
        }
        let verifier = ActivationDataVerifier(keys: verificationKeys, allowedClockSkew: configuration.allowedClockSkew)
        let time = now()
        let verdict = verifier.verify(text, panUniqueReference: nil, nonce: request.card.nonce, now: time)
        guard let claims = verdict.claims else {
            return refused(verdict.refusal?.code.rawValue ?? ActivationDataRefusal.Code.malformed.rawValue)
        }
        usedActivationData = usedActivationData.filter { $0.value.addingTimeInterval(configuration.allowedClockSkew) > time }
        guard usedActivationData[claims.id] == nil else { return refused("replayed") }
        usedActivationData[claims.id] = claims.expiresAt
        return .valid(claims)
    }

    /// The token service's verdict on activation data.
    private enum ActivationDataCheck {
        case valid(ActivationDataClaims)
        case declined(TokenizationDecline)
    }

    /// Fetches TMP's keys the first time, and again for an unknown key id (rotation) at most
    /// once per ``Configuration/minimumKeyRefetchInterval``.
    private func refreshKeys(neededFor keyID: String?, client: TSPAPIClient) async throws(TSPAPIError) {
        if let fetched = keysFetchedAt {
            let known = keyID.map { verificationKeys[$0] != nil } ?? true
            guard !known, now().timeIntervalSince(fetched) >= configuration.minimumKeyRefetchInterval else { return }
        }
        let keySet = try await client.activationKeys()
        verificationKeys = keySet.p256KeysByID
        keysFetchedAt = now()
        logger.debug("fetched activation keys", metadata: ["keys": "\(verificationKeys.keys.sorted())"])
    }

    func randomHex(_ byteCount: Int) -> String {
        randomBytes(byteCount).map { String(format: "%02X", $0) }.joined()
    }

    /// Decimal digits; the slight modulo bias does not matter for a simulated token number.
    func randomDigits(_ count: Int) -> String {
        String(randomBytes(count).map { Character(String($0 % 10)) })
    }

    private func newTokenReference() -> String {
        for _ in 0..<100 {
            let reference = "DAPL" + randomHex(12)
            if tokens[reference] == nil { return reference }
        }
        preconditionFailure("randomBytes keeps repeating itself: 100 token references in a row were taken")
    }
}
