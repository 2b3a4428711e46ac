import Crypto
import Foundation

/// A public EC P-256 key as a JSON Web Key (RFC 7517), for publishing verification keys.
public struct JSONWebKey: Codable, Sendable, Hashable {
    /// Key type; always `EC`.
    public var kty: String
    /// Curve; always `P-256`.
    public var crv: String
    /// base64url of the 32-byte x coordinate.
    public var x: String
    /// base64url of the 32-byte y coordinate.
    public var y: String
    /// Key id.
    public var kid: String?
    /// Intended use; `sig`.
    public var use: String?
    /// Algorithm; `ES256`.
    public var alg: String?

    /// The JWK of `publicKey` with id `keyID`.
    public init(publicKey: P256.Signing.PublicKey, keyID: String) {
        let raw = publicKey.rawRepresentation
        kty = "EC"
        crv = "P-256"
        x = Data(raw.prefix(32)).base64URLEncodedString
        y = Data(raw.suffix(32)).base64URLEncodedString
        kid = keyID
        use = "sig"
        alg = "ES256"
    }

    /// The P-256 key this JWK describes; nil when it is not a valid EC P-256 point.
    public var p256PublicKey: P256.Signing.PublicKey? {
        // A key published for encryption ("use":"enc") must not verify signatures.
        guard kty == "EC", crv == "P-256", alg == nil || alg == "ES256", use == nil || use == "sig",
            let xBytes = Data(base64URLEncoded: x), let yBytes = Data(base64URLEncoded: y),
            xBytes.count == 32, yBytes.count == 32
        else { return nil }
        return try? P256.Signing.PublicKey(rawRepresentation: xBytes + yBytes)
    }
}

/// A JSON Web Key Set: `{"keys":[…]}`.
public struct JSONWebKeySet: Codable, Sendable, Hashable {
    /// The keys.
    public var keys: [JSONWebKey]

    /// Wraps keys.
    public init(keys: [JSONWebKey]) {
        self.keys = keys
    }

    /// Reads `{"keys":[…]}`, keeping the entries that are EC keys in this type's shape and
    /// skipping the others: an identity provider's set usually mixes in RSA keys (no `crv`,
    /// `x`, `y`), which this server does not use but must not refuse the whole set for.
    public init(from decoder: any Decoder) throws {
        struct Entry: Decodable {
            var key: JSONWebKey?
            init(from decoder: any Decoder) throws { key = try? JSONWebKey(from: decoder) }
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        keys = try container.decode([Entry].self, forKey: .keys).compactMap(\.key)
    }

    /// Key ids that more than one usable P-256 key carries (a set that cannot say which key
    /// signed a token naming one of them).
    public var repeatedP256KeyIDs: [String] {
        var seen: Set<String> = []
        var repeated: [String] = []
        for key in keys {
            guard let id = key.kid, key.p256PublicKey != nil else { continue }
            if !seen.insert(id).inserted, !repeated.contains(id) { repeated.append(id) }
        }
        return repeated
    }

    /// The usable P-256 keys by key id; keys without an id or of another type are skipped, and
    /// so is an id given to two different keys: it names neither, so a signature under it is
    /// refused as by an unknown key rather than checked against whichever key came last.
    /// (``repeatedP256KeyIDs`` lists such ids, for a refusal that says so.)
    public var p256KeysByID: [String: P256.Signing.PublicKey] {
        var result: [String: P256.Signing.PublicKey] = [:]
        var ambiguous: Set<String> = []
        for key in keys {
            guard let id = key.kid, let publicKey = key.p256PublicKey else { continue }
            if let earlier = result[id], earlier.rawRepresentation != publicKey.rawRepresentation { ambiguous.insert(id) }
            result[id] = publicKey
        }
        for id in ambiguous { result[id] = nil }
        return result
    }
}
