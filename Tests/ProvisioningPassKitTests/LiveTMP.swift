import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import ProvisioningCrypto
import ProvisioningModels
import TokenPlatform
import WalletSimulator

/// The real TMP server, in process, listening on a loopback port: in-memory SQLite, a
/// simulated Apple PKI as an extra trust anchor, cardholder JWTs signed by a test key.
struct LiveTMP {
    let environment: PlatformEnvironment
    let pki: SimulatedApplePKI
    let cardholderKey = SigningKey.generate()

    init() async throws {
        let store = try SQLiteStore.inMemory()
        try await store.migrate()
        pki = try SimulatedApplePKI()
        environment = PlatformEnvironment(
            store: store,
            vault: PANVault(keys: .generate()),
            chainValidator: AppleChainValidator(configuration: .init(trustAnchors: TrustAnchors.apple.adding([pki.root]))),
            activationKeys: [SigningKey.generate()],
            logger: Logger(label: "test.tmp") { _ in SwiftLogNoOpLogHandler() }
        )
    }

    /// The issuer's back office.
    var lifecycle: LifecycleService { LifecycleService(environment: environment) }

    /// A cardholder JWT for `user`.
    func jwt(_ user: String, lifetime: TimeInterval = 600) throws -> String {
        try DevelopmentTokenIssuer(key: cardholderKey).token(userId: user, lifetime: lifetime, now: Date())
    }

    /// Loads a card for `user`, with art when given.
    func putCard(_ id: String, user: String, pan: String, art: Data? = nil) async throws {
        var artId: String?
        if let art {
            artId = "art-\(id)"
            _ = try await lifecycle.putCardArt(artId: "art-\(id)", data: art, contentType: nil)
        }
        let request = CardUpsertRequest(userId: user, primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"), cardholderName: "Jane Appleseed", network: .visa, productTitle: "Everyday Debit", artId: artId)
        _ = try await lifecycle.putCard(externalCardId: id, request: request)
    }

    /// What the token service does once Apple hands it the sealed card: asks TMP for a
    /// decision with the activation data TMP issued, then reports the token it created.
    func tokenize(pan: String, activationData: Data, reference: String, device: DeviceType) async throws -> TokenizationDecisionResponse {
        let tsp = TSPService(environment: environment)
        let decision = try await tsp.decide(TokenizationDecisionRequest(
            requestId: "req-\(reference)", primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"),
            activationData: String(decoding: activationData, as: UTF8.self), deviceType: device
        ))
        guard let pur = decision.panUniqueReference else { return decision }
        _ = try await tsp.apply(TokenEventRequest(eventId: "created-\(reference)", tokenUniqueReference: reference, panUniqueReference: pur, event: .created, deviceType: device, tokenLast4: "9876"))
        if decision.decision == .approved {
            _ = try await tsp.apply(TokenEventRequest(eventId: "activated-\(reference)", tokenUniqueReference: reference, panUniqueReference: pur, event: .activated, deviceType: device, tokenLast4: "9876"))
        }
        return decision
    }

    /// Runs the server on a free loopback port and `body` with its base URL.
    func run(_ body: @escaping @Sendable (URL) async throws -> Void) async throws {
        let authenticator = Authenticator(
            cardholderTokens: CardholderTokenVerifier(keys: [cardholderKey.id: cardholderKey.privateKey.publicKey]),
            issuerKey: APIKey("issuer-test-key"),
            tspKey: APIKey("tsp-test-key")
        )
        let router = TokenPlatformRouter(environment: environment, authenticator: authenticator).build()
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: Logger(label: "test.http") { _ in SwiftLogNoOpLogHandler() })
        try await application.test(.live) { client in
            guard let port = client.port else { throw LiveTMPError.noPort }
            try await body(URL(string: "http://127.0.0.1:\(port)/")!)
        }
    }

    enum LiveTMPError: Error {
        case noPort
    }
}
