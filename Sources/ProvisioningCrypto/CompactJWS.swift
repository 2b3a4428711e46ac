import Crypto
import Foundation
import ProvisioningModels

/// JWS compact serialization (RFC 7515) with ES256 only: `header.payload.signature`.
///
/// Used for activation data and for the embedded run's cardholder tokens. Only ES256 is
/// produced or accepted, so there is no algorithm confusion to defend against.
public enum CompactJWS {
    /// The largest serialized JWS accepted for parsing, in bytes.
    public static let maximumLength = 8 * 1024

    /// A parsed, not yet verified, compact JWS.
    public struct Parts: Sendable {
        /// The decoded protected header JSON.
        public var header: Header
        /// The decoded payload bytes.
        public var payload: Data
        /// `base64url(header) || "." || base64url(payload)`: what the signature covers.
        public var signingInput: Data
        /// The raw 64-byte `r || s` signature.
        public var signature: Data
    }

    /// The protected header fields this project reads.
    public struct Header: Codable, Sendable, Hashable {
        /// Algorithm; always `ES256`.
        public var alg: String
        /// Key id, selecting the verification key.
        public var kid: String?
        /// Media type of the whole object, e.g. `JWT`.
        public var typ: String?
        /// Header parameters the signer marks as critical (RFC 7515, 4.1.11). This project
        /// understands none, so a token that has any is refused.
        public var crit: [String]?

        /// Creates a header.
        public init(alg: String = "ES256", kid: String?, typ: String?) {
            self.alg = alg
            self.kid = kid
            self.typ = typ
        }
    }

    /// Why a compact JWS could not be read.
    public enum ParseError: Error, Sendable, Hashable {
        /// Not three base64url segments, over the size bound, an undecodable JSON header, or
        /// a header with `crit`.
        case malformed
        /// A header algorithm other than ES256.
        case unsupportedAlgorithm(String)
    }

    /// Signs `payload` with `key`, putting `kid` and `typ` in the protected header.
    public static func sign(payload: Data, key: P256.Signing.PrivateKey, keyID: String?, type: String?) throws -> String {
        var writer = CompactJSONWriter(capacity: 96)
        writer.add("alg", "ES256")
        writer.add("kid", keyID)
        writer.add("typ", type)
        let header = writer.finish()
        let signingInput = header.base64URLEncodedString + "." + payload.base64URLEncodedString
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + signature.rawRepresentation.base64URLEncodedString
    }

    /// Splits and decodes a compact JWS without verifying it.
    public static func parse(_ token: String) throws(ParseError) -> Parts {
        guard token.utf8.count <= maximumLength else { throw .malformed }
        let segments = token.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3,
            let headerBytes = Data(base64URLEncoded: segments[0]),
            let payload = Data(base64URLEncoded: segments[1]),
            let signature = Data(base64URLEncoded: segments[2]),
            let header = try? JSONDecoder().decode(Header.self, from: headerBytes)
        else { throw .malformed }
        guard header.alg == "ES256" else { throw .unsupportedAlgorithm(header.alg) }
        // A critical extension this reader does not implement must not be ignored.
        guard header.crit == nil else { throw .malformed }
        let signingInput = Data(token.utf8.prefix(segments[0].utf8.count + 1 + segments[1].utf8.count))
        return Parts(header: header, payload: payload, signingInput: signingInput, signature: signature)
    }

    /// Whether `parts` carries a valid ES256 signature by `key`.
    public static func isValidSignature(_ parts: Parts, key: P256.Signing.PublicKey) -> Bool {
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parts.signature) else { return false }
        return key.isValidSignature(signature, for: parts.signingInput)
    }
}
