import Crypto
import Foundation
import ProvisioningModels

/// The claims of a piece of activation data.
///
/// Activation data is a compact ES256 JWS (`typ` = `pushprov-activation+jws`) that TMP issues
/// with each sealed card and a token service provider verifies with TMP's published keys
/// before it activates a token on the green path. It binds the card by its pan-unique
/// reference (never the PAN) and the Wallet nonce by its SHA-256, and it lives at most ten
/// minutes. `jti` makes it single-use: verifiers record it.
///
/// `dev` says which device the app asked for, and is not a binding: when the card is on
/// neither device, Wallet's add sheet lets the cardholder pick the iPhone or the paired Watch
/// after the app has asked for the card data, and PassKit does not tell the app which one.
/// The nonce, which Wallet makes for this one add, is what ties the data to the add.
public struct ActivationDataClaims: Codable, Sendable, Hashable {
    /// The card's pan-unique reference.
    public var pur: String
    /// base64url SHA-256 of the nonce Wallet supplied.
    public var nh: String
    /// The device the app asked to add the card to (informational; see the type's notes).
    public var dev: DeviceType
    /// Issued at, seconds since 1970.
    public var iat: Int64
    /// Expires at, seconds since 1970.
    public var exp: Int64
    /// Unique id, for single use.
    public var jti: String

    /// Creates claims from their wire fields.
    public init(pur: String, nh: String, dev: DeviceType, iat: Int64, exp: Int64, jti: String) {
        self.pur = pur
        self.nh = nh
        self.dev = dev
        self.iat = iat
        self.exp = exp
        self.jti = jti
    }

    /// The card's pan-unique reference.
    public var panUniqueReference: String { pur }
    /// The device the app asked for.
    public var requestedDeviceType: DeviceType { dev }
    /// When it was issued.
    public var issuedAt: Date { Date(timeIntervalSince1970: TimeInterval(iat)) }
    /// When it stops being valid.
    public var expiresAt: Date { Date(timeIntervalSince1970: TimeInterval(exp)) }
    /// The unique id.
    public var id: String { jti }

    /// The JSON form that is signed, built directly: what `JSONEncoder` with sorted keys and
    /// unescaped slashes writes.
    func jsonData() -> Data {
        var writer = CompactJSONWriter(capacity: 192)
        writer.add("dev", dev.rawValue)
        writer.add("exp", exp)
        writer.add("iat", iat)
        writer.add("jti", jti)
        writer.add("nh", nh)
        writer.add("pur", pur)
        return writer.finish()
    }
}

/// Issues activation data with TMP's current signing key.
public struct ActivationDataIssuer: Sendable {
    /// The longest lifetime activation data may have.
    public static let maximumLifetime: TimeInterval = 600
    /// The JWS `typ` header value.
    public static let type = "pushprov-activation+jws"

    /// The key new activation data is signed with.
    public let signingKey: SigningKey
    /// How long issued activation data stays valid (at most ten minutes).
    public let lifetime: TimeInterval

    /// Creates an issuer.
    ///
    /// - Precondition: `lifetime` is positive and at most ``maximumLifetime``.
    public init(signingKey: SigningKey, lifetime: TimeInterval = maximumLifetime) {
        precondition(lifetime > 0 && lifetime <= Self.maximumLifetime, "activation data lifetime must be within (0, 600] seconds")
        self.signingKey = signingKey
        self.lifetime = lifetime
    }

    /// Issues activation data for a card and a Wallet nonce, noting the device the app asked for.
    ///
    /// - Parameters:
    ///   - now: The issue time (injected so tests are deterministic).
    ///   - id: A unique id; by default a new time-ordered UUID (``identifier(at:)``).
    public func issue(
        panUniqueReference: String,
        nonce: Data,
        deviceType: DeviceType,
        now: Date,
        id: String? = nil
    ) throws -> (token: String, claims: ActivationDataClaims) {
        let id = id ?? Self.identifier(at: now)
        let issuedAt = Int64(now.timeIntervalSince1970.rounded(.down))
        let claims = ActivationDataClaims(
            pur: panUniqueReference,
            nh: ActivationDataVerifier.nonceHash(nonce),
            dev: deviceType,
            iat: issuedAt,
            exp: issuedAt + Int64(lifetime),
            jti: id
        )
        let token = try CompactJWS.sign(payload: claims.jsonData(), key: signingKey.privateKey, keyID: signingKey.id, type: Self.type)
        return (token, claims)
    }
}

extension ActivationDataIssuer {
    /// A new activation-data id: a version 7 UUID (RFC 9562), whose first 48 bits are the
    /// Unix time in milliseconds and whose other 74 variable bits are random.
    ///
    /// The id is the primary key of the attempt TMP records for each `signed-cards` call and
    /// of the single-use record the token service's decision writes. Ids that grow with time
    /// are appended at the right edge of those B-tree indexes, so a commit of several attempts
    /// touches one index page instead of one random page per attempt (random version 4 UUIDs
    /// did). The time it reveals is already in the signed claims (`iat`); 74 random bits keep
    /// ids unguessable and collisions out of reach.
    public static func identifier(at date: Date) -> String {
        var random = SystemRandomNumberGenerator()
        return identifier(milliseconds: UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded(.down))), random: (random.next(), random.next()))
    }

    /// The UUID for a time and 128 random bits (of which 74 are used); split out for tests.
    static func identifier(milliseconds: UInt64, random: (UInt64, UInt64)) -> String {
        let time = milliseconds & 0xFFFF_FFFF_FFFF
        let high = (time << 16) | 0x7000 | (random.0 & 0x0FFF)
        let low = 0x8000_0000_0000_0000 | (random.1 & 0x3FFF_FFFF_FFFF_FFFF)
        // Written digit by digit in `UUID.uuidString`'s form (upper case, 8-4-4-4-12): going
        // through Foundation's `UUID` cost more than drawing the random bits.
        return String(unsafeUninitializedCapacity: 36) { text in
            var at = 0
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    text[at] = UInt8(ascii: "-")
                    at += 1
                }
                let word = nibble < 16 ? high : low
                let digit = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (nibble % 16))) & 0xF
                text[at] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "A") + digit - 10
                at += 1
            }
            return at
        }
    }
}

/// Verifies activation data against published keys and what the caller knows of the request.
public struct ActivationDataVerifier: Sendable {
    /// The verification keys by key id.
    public var keys: [String: P256.Signing.PublicKey]
    /// How far a clock may run ahead of the issuer's without refusing fresh data.
    public var allowedClockSkew: TimeInterval

    /// Creates a verifier from keys by id.
    public init(keys: [String: P256.Signing.PublicKey], allowedClockSkew: TimeInterval = 30) {
        self.keys = keys
        self.allowedClockSkew = allowedClockSkew
    }

    /// Creates a verifier from a published JWKS.
    public init(keySet: JSONWebKeySet, allowedClockSkew: TimeInterval = 30) {
        self.init(keys: keySet.p256KeysByID, allowedClockSkew: allowedClockSkew)
    }

    /// base64url SHA-256 of a nonce, as carried in the `nh` claim.
    public static func nonceHash(_ nonce: Data) -> String {
        Data(SHA256.hash(data: nonce)).base64URLEncodedString
    }

    /// The claims of activation data that verifies in every respect but its time: signed by a
    /// published key, of the right type and lifetime, for `panUniqueReference` — checked as at
    /// the moment it was issued. Only for recognising the retry of a request that used the
    /// data up while it was valid (whose recorded answer is then given again); never a reason
    /// to accept data by itself.
    public func claimsIgnoringTime(_ token: String, panUniqueReference: String) -> ActivationDataClaims? {
        guard let parts = try? CompactJWS.parse(token),
            let unverified = try? JSONDecoder().decode(ActivationDataClaims.self, from: parts.payload)
        else { return nil }
        return verify(token, panUniqueReference: panUniqueReference, now: unverified.issuedAt).claims
    }

    /// Verifies activation data.
    ///
    /// - Parameters:
    ///   - token: The activation data as received.
    ///   - panUniqueReference: The card the caller found for this request; must match when
    ///     given. A token service that learns the card's reference only from the issuer's
    ///     decision passes nil here and compares ``ActivationDataClaims/panUniqueReference``
    ///     once it knows it.
    ///   - nonce: The Wallet nonce, when the caller knows it; must match when given.
    ///   - now: The verification time.
    ///
    /// The device type is deliberately not compared (see ``ActivationDataClaims``).
    /// - Returns: The claims, or the first reason the data is refused. Single use is the
    ///   caller's to enforce with the returned `jti`.
    public func verify(
        _ token: String,
        panUniqueReference: String?,
        nonce: Data? = nil,
        now: Date
    ) -> ActivationDataVerdict {
        let parts: CompactJWS.Parts
        do {
            parts = try CompactJWS.parse(token)
        } catch .unsupportedAlgorithm(let alg) {
            return .refused(.init(.malformed, "activation data must be signed with ES256, not \(alg)"))
        } catch {
            return .refused(.init(.malformed, "activation data is not a compact JWS"))
        }
        guard parts.header.typ == ActivationDataIssuer.type else {
            return .refused(.init(.malformed, "activation data has type \(parts.header.typ ?? "none"), expected \(ActivationDataIssuer.type)"))
        }
        guard let keyID = parts.header.kid, let key = keys[keyID] else {
            return .refused(.init(.unknownKeyID, "activation data was signed with key \(parts.header.kid ?? "(none)"), which is not published"))
        }
        // TMP signs in the low-S form, so each activation data has exactly one valid text.
        guard CompactJWS.isValidSignature(parts, key: key, requiringLowS: true) else {
            return .refused(.init(.badSignature, "activation data signature does not verify with key \(keyID) (in its low-S form)"))
        }
        guard CompactJWS.claimsHaveUniqueMemberNames(parts), let claims = try? JSONDecoder().decode(ActivationDataClaims.self, from: parts.payload) else {
            return .refused(.init(.malformed, "activation data claims are missing, of the wrong type, or named twice"))
        }
        // Subtracted with overflow reported: signed times far apart must be refused, not trap.
        let (lifetime, overflow) = claims.exp.subtractingReportingOverflow(claims.iat)
        guard !overflow, lifetime > 0, TimeInterval(lifetime) <= ActivationDataIssuer.maximumLifetime else {
            return .refused(.init(.lifetimeTooLong, "activation data lifetime exceeds \(Int(ActivationDataIssuer.maximumLifetime)) seconds"))
        }
        let nowSeconds = now.timeIntervalSince1970
        if TimeInterval(claims.iat) > nowSeconds + allowedClockSkew {
            return .refused(.init(.notYetValid, "activation data is issued in the future"))
        }
        if nowSeconds >= TimeInterval(claims.exp) {
            return .refused(.init(.expired, "activation data expired at \(claims.expiresAt)"))
        }
        if let panUniqueReference, !constantTimeEquals(claims.pur, panUniqueReference) {
            return .refused(.init(.wrongCard, "activation data was issued for another card"))
        }
        if let nonce, !constantTimeEquals(claims.nh, Self.nonceHash(nonce)) {
            return .refused(.init(.wrongNonce, "activation data was issued for another Wallet nonce"))
        }
        return .valid(claims)
    }
}

/// The result of verifying activation data.
public enum ActivationDataVerdict: Sendable, Hashable {
    /// Valid; the claims are trustworthy.
    case valid(ActivationDataClaims)
    /// Refused, with the reason.
    case refused(ActivationDataRefusal)

    /// The refusal, or nil.
    public var refusal: ActivationDataRefusal? {
        if case .refused(let refusal) = self { refusal } else { nil }
    }

    /// The claims, or nil.
    public var claims: ActivationDataClaims? {
        if case .valid(let claims) = self { claims } else { nil }
    }
}

/// Why activation data was refused.
public struct ActivationDataRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable reason codes.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// Not a compact ES256 JWS of the activation-data type with well-formed claims.
        case malformed
        /// Signed with a key id that is not published.
        case unknownKeyID = "unknown_key_id"
        /// The signature does not verify.
        case badSignature = "bad_signature"
        /// Past its expiry.
        case expired
        /// Issued later than now plus the allowed clock skew.
        case notYetValid = "not_yet_valid"
        /// Its lifetime exceeds ten minutes.
        case lifetimeTooLong = "lifetime_too_long"
        /// Bound to another card.
        case wrongCard = "wrong_card"
        /// Bound to another Wallet nonce.
        case wrongNonce = "wrong_nonce"
    }

    /// The reason.
    public var code: Code
    /// A sentence for logs and error responses (never contains card data).
    public var message: String

    /// Creates a refusal.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}
