import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import ProvisioningCrypto
import ProvisioningModels
import TMPTestSupport
import TokenPlatform
import WalletSimulator

/// The issuer back office, the issuer app and Apple's side, as HTTP callers of a live TMP.
struct LiveSession: Sendable {
    let client: TestTMP.LiveClient
    let tmp: LiveTMP

    var simulator: TokenServiceSimulator { tmp.simulator }

    enum Credential {
        case issuer
        case cardholder(String)
    }

    typealias Reply = TestReply

    func send(_ method: HTTPRequest.Method, _ path: String, as credential: Credential, json: (any Encodable)? = nil) async throws -> Reply {
        var headers: HTTPFields = [:]
        switch credential {
        case .issuer: headers[.authorization] = "Bearer \(LiveTMP.issuerKey)"
        case .cardholder(let user):
            let jwt = try tmp.secrets.jwt(user, lifetime: 3600, now: tmp.clock.current)
            headers[.authorization] = "Bearer \(jwt)"
        }
        var body: ByteBuffer?
        if let json {
            body = ByteBuffer(bytes: try JSONEncoder().encode(json))
            headers[.contentType] = "application/json"
        }
        return try await client.reply(method, path, headers: headers, body: body)
    }

    // MARK: Issuer back office

    @discardableResult
    func putCard(_ id: String, user: String = "alice", pan: String = "4111111111111111", expiration: String = "12/29") async throws -> CardResource {
        let request = CardUpsertRequest(userId: user, primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration(expiration), cardholderName: "Jane Appleseed", network: .visa, productTitle: "Everyday Debit")
        let reply = try await send(.put, "/lifecycle/cards/\(id)", as: .issuer, json: request)
        guard reply.status == .created || reply.status == .ok else { throw TestFailure("putCard \(id): \(reply.status) \(reply.text)") }
        return try reply.decode(CardResource.self)
    }

    @discardableResult
    func setCardStatus(_ id: String, _ status: CardStatus) async throws -> LifecycleService.StatusChange {
        let reply = try await send(.patch, "/lifecycle/cards/\(id)", as: .issuer, json: CardStatusChangeRequest(status: status))
        guard reply.status == .ok else { throw TestFailure("setCardStatus \(id): \(reply.status) \(reply.text)") }
        return try reply.decode(LifecycleService.StatusChange.self)
    }

    // MARK: Issuer app

    func search(_ references: [String], user: String = "alice") async throws -> [TokenSearchResult] {
        try await send(.post, "/issuer/push-provisioning/tokens/searches", as: .cardholder(user), json: TokenSearchRequest(tokenUniqueReferences: references)).decode([TokenSearchResult].self)
    }

    func activate(_ reference: String, user: String = "alice") async throws -> TokenActivationResponse {
        try await send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder(user), json: TokenActivationRequest(tokenUniqueReference: reference)).decode(TokenActivationResponse.self)
    }

    // MARK: Apple's side

    /// What Apple's servers hold after the issuer app answered `generateRequest`: the sealed
    /// card opened with the leaf's private key, and the activation data.
    struct AddPaymentPass: Sendable {
        var card: PassDataPayload
        var activationData: Data
        var deviceType: DeviceType

        var tokenization: TokenizationRequest {
            TokenizationRequest(card: card, activationData: activationData, deviceType: deviceType)
        }
    }

    /// Runs `signed-cards` for `card` with a fresh Wallet nonce and opens the answer as Apple would.
    func addPaymentPass(_ card: String, user: String = "alice", device: DeviceType = .phone) async throws -> AddPaymentPass {
        let nonce = Data(SHA256.hash(data: Data("nonce-\(UUID())".utf8)))
        let signature = Data("apple-nonce-signature".utf8)
        let request = SignedCardRequest(externalCardId: card, deviceType: device, certificates: tmp.pki.walletCertificates, nonce: nonce, nonceSignature: signature)
        let reply = try await send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder(user), json: request)
        guard reply.status == .ok else { throw TestFailure("signed-cards \(card): \(reply.status) \(reply.text)") }
        let sealed = try reply.decode(SignedCardResponse.self)
        let opened = try ECCV2.open(SealedPassData(encryptedData: sealed.encryptedData.data, ephemeralPublicKey: sealed.ephemeralPublicKey.data), with: tmp.pki.leafPrivateKey)
        let payload = try PassDataPayload(jsonData: opened)
        guard payload.nonce == nonce, payload.nonceSignature == signature else { throw TestFailure("the sealed card does not carry Wallet's nonce") }
        return AddPaymentPass(card: payload, activationData: sealed.activationData.data, deviceType: device)
    }

    /// Adds `card` through Apple and the token service; fails unless a token was created.
    func provision(_ card: String, user: String = "alice", device: DeviceType = .phone) async throws -> NetworkToken {
        let outcome = try await simulator.tokenize(try await addPaymentPass(card, user: user, device: device).tokenization)
        guard let token = outcome.token else { throw TestFailure("tokenization of \(card) declined: \(outcome)") }
        return token
    }

    // MARK: TMP's records

    func tmpToken(_ reference: String) async throws -> TokenRecord? {
        try await tmp.store.token(reference: reference)
    }
}
