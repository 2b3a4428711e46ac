import Foundation

/// Reads the plainest form of a flat JSON object — members whose values are strings or
/// arrays of strings, every string printable ASCII with no escape but `\/` — and gives up on
/// anything else.
///
/// It is the fast path for request bodies decoded on every call (`signed-cards`,
/// `tokens/searches`): `JSONDecoder` builds a tree and walks it through `Codable` containers,
/// which was a tenth of the server's non-cryptographic time per `signed-cards` call. The
/// reader never decides that a body is wrong: whenever it returns `nil` (an escape, a number,
/// a nested object, a duplicate or unknown key, trailing bytes, …) the caller decodes the same
/// bytes with `JSONDecoder`, which accepts or refuses them with its usual message. So for
/// every input it either returns `nil` or exactly what `JSONDecoder` would produce (tests
/// compare the two on valid, mutated and random bodies).
package struct FlatJSONReader {
    /// One member's value.
    package enum Value: Equatable {
        /// A string.
        case string(String)
        /// An array of strings.
        case strings([String])
    }

    /// The members in document order, or `nil` when the body is not in the plain form.
    ///
    /// - Parameter keys: the member names the caller knows; any other name gives `nil`.
    package static func members(of data: Data, keys: Set<String>) -> [String: Value]? {
        data.withUnsafeBytes { raw in
            var reader = Cursor(bytes: raw.bindMemory(to: UInt8.self))
            return reader.object(keys: keys)
        }
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// A string of printable ASCII whose only escape is `\/` (what `JSONEncoder` writes for
        /// `/` by default, so base64 from the app has it).
        mutating func string() -> String? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = index
            var escapedSlashes = false
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    guard escapedSlashes else { return String(decoding: raw, as: UTF8.self) }
                    var unescaped: [UInt8] = []
                    unescaped.reserveCapacity(raw.count)
                    var at = 0
                    while at < raw.count {
                        if raw[at] == UInt8(ascii: "\\") { at += 1 }
                        unescaped.append(raw[at])
                        at += 1
                    }
                    return String(decoding: unescaped, as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") {
                    // Any other escape, like control characters and non-ASCII, goes to JSONDecoder.
                    guard index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "/") else { return nil }
                    escapedSlashes = true
                    index += 2
                    continue
                }
                guard byte >= 0x20, byte < 0x7F else { return nil }
                index += 1
            }
            return nil
        }

        mutating func value() -> Value? {
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "\"") { return string().map(Value.string) }
            guard consume(UInt8(ascii: "[")) else { return nil }
            var items: [String] = []
            if consume(UInt8(ascii: "]")) { return .strings(items) }
            repeat {
                guard let item = string() else { return nil }
                items.append(item)
            } while consume(UInt8(ascii: ","))
            return consume(UInt8(ascii: "]")) ? .strings(items) : nil
        }

        mutating func object(keys: Set<String>) -> [String: Value]? {
            guard consume(UInt8(ascii: "{")) else { return nil }
            var members: [String: Value] = [:]
            if !consume(UInt8(ascii: "}")) {
                repeat {
                    guard let key = string(), keys.contains(key), members[key] == nil, consume(UInt8(ascii: ":")), let value = value() else { return nil }
                    members[key] = value
                } while consume(UInt8(ascii: ","))
                guard consume(UInt8(ascii: "}")) else { return nil }
            }
            skipWhitespace()
            return index == bytes.count ? members : nil
        }
    }
}

/// A request type with a fast path for its plainest JSON form (see ``FlatJSONReader``).
package protocol FlatJSONDecodable: Decodable {
    /// The value `JSONDecoder` would decode from `data`, or `nil` to let it decide.
    static func decodeFlat(_ data: Data) -> Self?
}

extension SignedCardRequest: FlatJSONDecodable {
    private static let flatKeys: Set<String> = ["externalCardId", "walletType", "deviceType", "certificates", "nonce", "nonceSignature"]

    package static func decodeFlat(_ data: Data) -> SignedCardRequest? {
        guard let members = FlatJSONReader.members(of: data, keys: flatKeys), members.count == flatKeys.count,
            case .string(let externalCardId)? = members["externalCardId"],
            case .string(let walletText)? = members["walletType"], let walletType = WalletType(rawValue: walletText),
            case .string(let deviceText)? = members["deviceType"], let deviceType = DeviceType(rawValue: deviceText),
            case .strings(let certificateTexts)? = members["certificates"],
            case .string(let nonceText)? = members["nonce"], let nonce = Data(base64Encoded: nonceText),
            case .string(let signatureText)? = members["nonceSignature"], let nonceSignature = Data(base64Encoded: signatureText)
        else { return nil }
        var certificates: [Data] = []
        certificates.reserveCapacity(certificateTexts.count)
        for text in certificateTexts {
            guard let certificate = Data(base64Encoded: text) else { return nil }
            certificates.append(certificate)
        }
        return SignedCardRequest(
            externalCardId: externalCardId, walletType: walletType, deviceType: deviceType,
            certificates: certificates, nonce: nonce, nonceSignature: nonceSignature
        )
    }
}

extension TokenSearchRequest: FlatJSONDecodable {
    private static let flatKeys: Set<String> = ["walletType", "tokenUniqueReferences"]

    package static func decodeFlat(_ data: Data) -> TokenSearchRequest? {
        guard let members = FlatJSONReader.members(of: data, keys: flatKeys), members.count == flatKeys.count,
            case .string(let walletText)? = members["walletType"], let walletType = WalletType(rawValue: walletText),
            case .strings(let references)? = members["tokenUniqueReferences"]
        else { return nil }
        return TokenSearchRequest(walletType: walletType, tokenUniqueReferences: references)
    }
}
