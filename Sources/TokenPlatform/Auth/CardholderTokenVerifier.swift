import Crypto
import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// Verifies the cardholder JWTs the issuer's identity provider signs (ES256, compact JWS).
///
/// Requires a known `kid`, a valid signature, a non-empty `sub` (the user id) and an `exp`
/// in the future; `nbf`/`iat` may not lie further ahead than the allowed clock skew, and a
/// configured issuer or audience must match.
public struct CardholderTokenVerifier: Sendable {
    /// Verification keys by key id.
    public var keys: [String: P256.Signing.PublicKey]
    /// Tolerated clock difference with the identity provider (bounded to 5 minutes).
    public var allowedClockSkew: TimeInterval
    /// Required `iss`, if any.
    public var issuer: String?
    /// Required `aud`, if any.
    public var audience: String?
    /// Required header `typ`, if any: compared as media types are, ignoring case and an
    /// `application/` prefix (RFC 7515, 4.1.9), so `at+jwt` matches `application/AT+JWT`.
    public var type: String?

    /// Creates a verifier.
    public init(keys: [String: P256.Signing.PublicKey], allowedClockSkew: TimeInterval = 60, issuer: String? = nil, audience: String? = nil, type: String? = nil) {
        self.keys = keys
        self.allowedClockSkew = min(max(allowedClockSkew, 0), 300)
        self.issuer = issuer
        self.audience = audience
        self.type = type
    }

    /// Why a token was refused (logged, never returned to the caller).
    public enum Refusal: String, Error, Sendable {
        /// Not a compact JWS with an ES256 header and JSON claims.
        case malformed
        /// Signed with a key id that no configured key has.
        case unknownKey = "unknown_key"
        /// The signature does not verify with the key its id names.
        case badSignature = "bad_signature"
        /// `exp` has passed (beyond the allowed clock skew).
        case expired
        /// `nbf` or `iat` is in the future (beyond the allowed clock skew).
        case notYetValid = "not_yet_valid"
        /// No `sub` claim, or an empty one: the token names no cardholder.
        case missingSubject = "missing_subject"
        /// No `exp` claim: tokens that never expire are refused.
        case missingExpiry = "missing_expiry"
        /// `iss` is not the configured issuer.
        case wrongIssuer = "wrong_issuer"
        /// `aud` does not include the configured audience.
        case wrongAudience = "wrong_audience"
        /// `sub` is too long, or holds control characters, line separators or bidirectional-text
        /// controls (``InputRules/userId(_:field:)``).
        case invalidSubject = "invalid_subject"
        /// The header's `typ` is not the type the verifier requires.
        case wrongType = "wrong_type"
    }

    private struct Claims: Decodable {
        var sub: String?
        var exp: Double?
        var nbf: Double?
        var iat: Double?
        var iss: String?
        var aud: Audience?

        enum Audience: Decodable {
            case one(String), many([String])
            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let one = try? container.decode(String.self) { self = .one(one) } else { self = .many(try container.decode([String].self)) }
            }
            func contains(_ value: String) -> Bool {
                switch self {
                case .one(let one): one.isSameIdentifier(as: value)
                case .many(let many): many.contains { $0.isSameIdentifier(as: value) }
                }
            }
        }
    }

    /// What a token proved once its signature verified: who, and when it may be used.
    public struct VerifiedClaims: Sendable, Hashable {
        /// The user id.
        public var subject: String
        /// `exp`, seconds since 1970.
        public var expiresAt: Double
        /// The later of `nbf` and `iat`, if present.
        public var notBefore: Double?
    }

    /// The user id (`sub`) of a valid token.
    public func userId(from token: String, now: Date) -> Result<String, Refusal> {
        verify(token).flatMap { check($0, now: now) }
    }

    /// The time checks, applied on every use (also to claims taken from a cache).
    public func check(_ claims: VerifiedClaims, now: Date) -> Result<String, Refusal> {
        let seconds = now.timeIntervalSince1970
        guard seconds < claims.expiresAt + allowedClockSkew else { return .failure(.expired) }
        if let notBefore = claims.notBefore, notBefore > seconds + allowedClockSkew { return .failure(.notYetValid) }
        return .success(claims.subject)
    }

    /// A `typ` value as compared: lowercased, without an `application/` prefix.
    static func mediaType(_ value: String) -> Substring {
        let lowered = value.lowercased()
        return lowered.hasPrefix("application/") ? lowered.dropFirst("application/".count) : Substring(lowered)
    }

    /// What can be judged of `token` without verifying its signature: its form, a known key
    /// id, and — from claims not yet proven — `exp` present and not past, `nbf`/`iat` not
    /// ahead, beyond the allowed skew. A refusal here is final (a valid signature would not
    /// change it); nil means only the signature and the remaining claims are left to check.
    /// For the HTTP front, which must not spend an ECDSA verification on its event loop.
    public func precheck(_ token: String, now: Date) -> Refusal? {
        guard let parts = try? CompactJWS.parse(token) else { return .malformed }
        guard let kid = parts.header.kid, keys[kid] != nil else { return .unknownKey }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: parts.payload) else { return .malformed }
        guard let exp = claims.exp else { return .missingExpiry }
        let notBefore = [claims.nbf, claims.iat].compactMap { $0 }.max()
        if case .failure(let refusal) = check(VerifiedClaims(subject: "", expiresAt: exp, notBefore: notBefore), now: now) { return refusal }
        return nil
    }

    /// Signature, key id, issuer, audience, type and the presence of `sub` and `exp`: everything
    /// that does not depend on the time, so the result can be cached per token.
    public func verify(_ token: String) -> Result<VerifiedClaims, Refusal> {
        guard let parts = try? CompactJWS.parse(token) else { return .failure(.malformed) }
        guard let kid = parts.header.kid, let key = keys[kid] else { return .failure(.unknownKey) }
        guard CompactJWS.isValidSignature(parts, key: key) else { return .failure(.badSignature) }
        guard CompactJWS.claimsHaveUniqueMemberNames(parts) else { return .failure(.malformed) }
        if let type, parts.header.typ.map({ Self.mediaType($0) == Self.mediaType(type) }) != true { return .failure(.wrongType) }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: parts.payload) else { return .failure(.malformed) }
        guard let exp = claims.exp else { return .failure(.missingExpiry) }
        if let issuer, claims.iss?.isSameIdentifier(as: issuer) != true { return .failure(.wrongIssuer) }
        if let audience, claims.aud?.contains(audience) != true { return .failure(.wrongAudience) }
        guard let sub = claims.sub, !sub.isEmpty else { return .failure(.missingSubject) }
        // The shape the Lifecycle API accepts for a card's userId: at most 128 bytes, no control characters.
        guard (try? InputRules.userId(sub)) != nil else { return .failure(.invalidSubject) }
        let notBefore = [claims.nbf, claims.iat].compactMap { $0 }.max()
        return .success(VerifiedClaims(subject: sub, expiresAt: exp, notBefore: notBefore))
    }
}

/// Signs cardholder JWTs with the embedded run's development key (`pushprov dev-token`).
public struct DevelopmentTokenIssuer: Sendable {
    /// The `iss` of development tokens unless another is configured.
    public static let issuer = "pushprov-dev"
    /// The signing key.
    public let key: SigningKey
    /// The tokens' `iss`.
    public let tokenIssuer: String
    /// The tokens' `aud`, if any.
    public let audience: String?
    /// The tokens' header `typ`.
    public let type: String

    /// Creates an issuer of tokens with `iss` = `issuer`, when given `aud` = `audience`, and
    /// header `typ` = `type` (the server's `--jwt-issuer`, `--jwt-audience` and `--jwt-type`,
    /// so that it accepts them).
    public init(key: SigningKey, issuer: String = DevelopmentTokenIssuer.issuer, audience: String? = nil, type: String = "JWT") {
        self.key = key
        self.tokenIssuer = issuer
        self.audience = audience
        self.type = type
    }

    /// A JWT for `userId`, valid for `lifetime` seconds from `now`.
    public func token(userId: String, lifetime: TimeInterval, now: Date) throws -> String {
        struct Claims: Encodable {
            var sub: String
            var iss: String
            var aud: String?
            var iat: Int64
            var exp: Int64
        }
        let iat = Int64(now.timeIntervalSince1970)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let payload = try encoder.encode(Claims(sub: userId, iss: tokenIssuer, aud: audience, iat: iat, exp: iat + Int64(lifetime)))
        return try CompactJWS.sign(payload: payload, key: key.privateKey, keyID: key.id, type: type)
    }
}
