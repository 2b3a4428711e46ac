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
        return signingInput + "." + lowS(signature.rawRepresentation).base64URLEncodedString
    }

    /// The order n of P-256's group, big-endian.
    static let p256Order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    /// Whether the `s` half of a raw 64-byte `r‖s` signature is at most n/2. ECDSA accepts
    /// `(r, s)` and `(r, n − s)` alike, so every signature has a twin; signatures this module
    /// makes are in the low form, and a verifier that requires it accepts one text per signature.
    public static func hasLowS(_ rawSignature: some DataProtocol) -> Bool {
        let bytes = Array(rawSignature)
        guard bytes.count == 64 else { return false }
        // s ≤ ⌊n/2⌋ exactly when 2s < n (n is odd): compare 2s, computed with its carry, with n.
        var doubled = [UInt8](repeating: 0, count: 32)
        var carry: UInt16 = 0
        for index in stride(from: 31, through: 0, by: -1) {
            let value = UInt16(bytes[32 + index]) << 1 | carry
            doubled[index] = UInt8(value & 0xFF)
            carry = value >> 8
        }
        if carry != 0 { return false }
        for (a, b) in zip(doubled, p256Order) where a != b { return a < b }
        return false
    }

    /// `rawSignature` with `s` replaced by `n − s` when it is above n/2 (the same signature's
    /// low form).
    public static func lowS(_ rawSignature: Data) -> Data {
        guard rawSignature.count == 64, !hasLowS(rawSignature) else { return rawSignature }
        var bytes = Array(rawSignature)
        var borrow = 0
        for index in stride(from: 31, through: 0, by: -1) {
            var value = Int(p256Order[index]) - Int(bytes[32 + index]) - borrow
            borrow = value < 0 ? 1 : 0
            if value < 0 { value += 256 }
            bytes[32 + index] = UInt8(value)
        }
        return Data(bytes)
    }

    /// Splits and decodes a compact JWS without verifying it.
    ///
    /// The header must be a JSON object whose member names are all different: RFC 7515 (§4)
    /// lets a reader refuse duplicates or take the last, and `JSONDecoder` takes the first. The
    /// payload is held to the same rule by ``claimsHaveUniqueMemberNames(_:)`` once its
    /// signature has verified (so an unsigned token costs no scan of it).
    public static func parse(_ token: String) throws(ParseError) -> Parts {
        guard token.utf8.count <= maximumLength else { throw .malformed }
        let segments = token.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3,
            let headerBytes = Data(base64URLEncoded: segments[0]),
            let payload = Data(base64URLEncoded: segments[1]),
            let signature = Data(base64URLEncoded: segments[2]),
            hasUniqueMemberNames(headerBytes),
            let header = try? JSONDecoder().decode(Header.self, from: headerBytes)
        else { throw .malformed }
        guard header.alg == "ES256" else { throw .unsupportedAlgorithm(header.alg) }
        // A critical extension this reader does not implement must not be ignored.
        guard header.crit == nil else { throw .malformed }
        let signingInput = Data(token.utf8.prefix(segments[0].utf8.count + 1 + segments[1].utf8.count))
        return Parts(header: header, payload: payload, signingInput: signingInput, signature: signature)
    }

    /// Whether `parts`' payload is a JSON object whose member names are all different: a token
    /// with two `sub` would mean one user here (`JSONDecoder` takes the first) and another to a
    /// reader taking the last (RFC 7519, §4), so its verifiers refuse it. Call it after the
    /// signature verified.
    public static func claimsHaveUniqueMemberNames(_ parts: Parts) -> Bool {
        hasUniqueMemberNames(parts.payload)
    }

    /// Whether `json` is a JSON object whose member names are all different, compared as a
    /// decoder sees them (`"s\u0075b"` is `sub`). Only the top level is looked at: the claims
    /// this project reads are all there. Anything this scan cannot follow gives `false`; the
    /// values themselves are left for the decoder to judge.
    static func hasUniqueMemberNames(_ json: Data) -> Bool {
        json.withUnsafeBytes { raw -> Bool in
            let bytes = raw.bindMemory(to: UInt8.self)
            var at = 0
            func skipWhitespace() {
                while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x09 || bytes[at] == 0x0A || bytes[at] == 0x0D { at += 1 }
            }
            func next(is byte: UInt8) -> Bool {
                skipWhitespace()
                guard at < bytes.count, bytes[at] == byte else { return false }
                at += 1
                return true
            }
            // A string from its opening quote: its bytes with the quotes, and whether it has escapes.
            func string() -> (Range<Int>, escaped: Bool)? {
                guard at < bytes.count, bytes[at] == 0x22 else { return nil }
                let start = at
                var escaped = false
                at += 1
                while at < bytes.count {
                    switch bytes[at] {
                    case 0x22:
                        at += 1
                        return (start..<at, escaped)
                    case 0x5C:
                        escaped = true
                        at += 2
                    default:
                        at += 1
                    }
                }
                return nil
            }
            // One value, however nested: strings followed, brackets counted, scalars skipped.
            func skipValue() -> Bool {
                skipWhitespace()
                guard at < bytes.count else { return false }
                var depth = 0
                repeat {
                    guard at < bytes.count else { return false }
                    switch bytes[at] {
                    case 0x22: guard string() != nil else { return false }
                    case 0x7B, 0x5B: depth += 1; at += 1
                    case 0x7D, 0x5D:
                        guard depth > 0 else { return false }
                        depth -= 1
                        at += 1
                    default:
                        guard depth == 0 else { at += 1; continue }
                        while at < bytes.count, ![0x2C, 0x7D, 0x5D, 0x20, 0x09, 0x0A, 0x0D].contains(bytes[at]) { at += 1 }
                    }
                } while depth > 0
                return true
            }
            guard next(is: 0x7B) else { return false }
            var names = Set<String>()
            skipWhitespace()
            if next(is: 0x7D) {
                skipWhitespace()
                return at == bytes.count
            }
            while true {
                skipWhitespace()
                guard let (range, escaped) = string() else { return false }
                let name: String
                if escaped {
                    let text = Data(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[range]))
                    guard let decoded = (try? JSONSerialization.jsonObject(with: text, options: .fragmentsAllowed)) as? String else { return false }
                    name = decoded
                } else {
                    name = String(decoding: UnsafeBufferPointer(rebasing: bytes[range.lowerBound + 1..<range.upperBound - 1]), as: UTF8.self)
                }
                guard names.insert(name).inserted, next(is: 0x3A), skipValue() else { return false }
                if next(is: 0x2C) { continue }
                guard next(is: 0x7D) else { return false }
                skipWhitespace()
                return at == bytes.count
            }
        }
    }

    /// Whether `parts` carries a valid ES256 signature by `key` (in its low-S form only, when
    /// `requiringLowS`: see ``hasLowS(_:)``).
    public static func isValidSignature(_ parts: Parts, key: P256.Signing.PublicKey, requiringLowS: Bool = false) -> Bool {
        if requiringLowS, !hasLowS(parts.signature) { return false }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parts.signature) else { return false }
        return key.isValidSignature(signature, for: parts.signingInput)
    }
}
