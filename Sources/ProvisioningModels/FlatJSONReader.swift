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
    /// A string member as it lies in the body: the bytes between its quotes.
    package struct RawString: Equatable {
        /// Where the bytes are in the body.
        package var range: Range<Int>
        /// Whether the bytes hold `\/` escapes (the only escape the reader takes).
        package var escapedSlashes: Bool
    }

    /// One member's value.
    package enum Value: Equatable {
        /// A string.
        case string(RawString)
        /// An array of strings.
        case strings([RawString])
    }

    /// The members by name, or `nil` when the body is not in the plain form. Values stay in
    /// the body until read with ``string(_:in:)`` or ``base64(_:in:)``.
    ///
    /// - Parameter keys: the member names the caller knows; any other name gives `nil`.
    package static func members(of data: Data, keys: Set<String>) -> [String: Value]? {
        data.withUnsafeBytes { raw in
            var reader = Cursor(bytes: raw.bindMemory(to: UInt8.self))
            return reader.object(keys: keys)
        }
    }

    /// The text of a string member of `data`.
    package static func string(_ raw: RawString, in data: Data) -> String {
        data.withUnsafeBytes { body in
            let bytes = UnsafeBufferPointer(rebasing: body.bindMemory(to: UInt8.self)[raw.range])
            guard raw.escapedSlashes else { return String(decoding: bytes, as: UTF8.self) }
            return String(unsafeUninitializedCapacity: bytes.count) { text in
                var length = 0
                var at = 0
                while at < bytes.count {
                    if bytes[at] == UInt8(ascii: "\\") { at += 1 }
                    text[length] = bytes[at]
                    length += 1
                    at += 1
                }
                return length
            }
        }
    }

    /// The bytes a string member of `data` holds in standard, padded base64, decoded straight
    /// from the body; `nil` for anything else (the caller then leaves the whole body to
    /// `JSONDecoder`, whose answer stands).
    ///
    /// Only the canonical form is taken: the alphabet `A–Z a–z 0–9 + /`, whole groups of four
    /// with `=` padding, and zero bits after the last byte. Whatever it takes, Foundation's
    /// `Data(base64Encoded:)` decodes to the same bytes (tests compare the two).
    package static func base64(_ raw: RawString, in data: Data) -> Data? {
        data.withUnsafeBytes { body in
            decodeBase64(UnsafeBufferPointer(rebasing: body.bindMemory(to: UInt8.self)[raw.range]))
        }
    }

    /// Decodes base64 text whose only escape is `\/` (as ``Cursor/string()`` checked).
    static func decodeBase64(_ text: UnsafeBufferPointer<UInt8>) -> Data? {
        // Escapes only lengthen the text, so this bounds the decoded size.
        var decoded = Data(count: text.count / 4 * 3)
        var length = 0
        let valid = decoded.withUnsafeMutableBytes { (output: UnsafeMutableRawBufferPointer) -> Bool in
            sextetValues.withUnsafeBufferPointer { values -> Bool in
                var group: UInt32 = 0
                var sextets = 0
                var padding = 0
                var at = 0
                while at < text.count {
                    var byte = text[at]
                    at += 1
                    if byte == UInt8(ascii: "\\") {
                        guard at < text.count else { return false }
                        byte = text[at]
                        at += 1
                    }
                    if byte == UInt8(ascii: "=") {
                        padding += 1
                        continue
                    }
                    let value = values[Int(byte)]
                    guard padding == 0, value < 64 else { return false }
                    group = group << 6 | UInt32(value)
                    sextets += 1
                    if sextets == 4 {
                        output[length] = UInt8(truncatingIfNeeded: group >> 16)
                        output[length + 1] = UInt8(truncatingIfNeeded: group >> 8)
                        output[length + 2] = UInt8(truncatingIfNeeded: group)
                        length += 3
                        group = 0
                        sextets = 0
                    }
                }
                switch (sextets, padding) {
                case (0, 0):
                    return true
                case (2, 2):
                    guard group & 0xF == 0 else { return false }
                    output[length] = UInt8(truncatingIfNeeded: group >> 4)
                    length += 1
                    return true
                case (3, 1):
                    guard group & 0x3 == 0 else { return false }
                    output[length] = UInt8(truncatingIfNeeded: group >> 10)
                    output[length + 1] = UInt8(truncatingIfNeeded: group >> 2)
                    length += 2
                    return true
                default:
                    return false
                }
            }
        }
        guard valid else { return nil }
        decoded.count = length
        return decoded
    }

    /// Each byte's base64 value, or 0xFF for a byte outside the standard alphabet.
    private static let sextetValues: [UInt8] = {
        var values = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            values[Int(character)] = UInt8(value)
        }
        return values
    }()

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
        mutating func string() -> RawString? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = index
            var escapedSlashes = false
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return RawString(range: start..<(index - 1), escapedSlashes: escapedSlashes)
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

        /// A member name: its text (names have no escapes here).
        mutating func key() -> String? {
            guard let raw = string(), !raw.escapedSlashes else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[raw.range]), as: UTF8.self)
        }

        mutating func value() -> Value? {
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "\"") { return string().map(Value.string) }
            guard consume(UInt8(ascii: "[")) else { return nil }
            var items: [RawString] = []
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
                    guard let key = key(), keys.contains(key), members[key] == nil, consume(UInt8(ascii: ":")), let value = value() else { return nil }
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
            case .string(let walletText)? = members["walletType"], let walletType = WalletType(exactly: FlatJSONReader.string(walletText, in: data)),
            case .string(let deviceText)? = members["deviceType"], let deviceType = DeviceType(exactly: FlatJSONReader.string(deviceText, in: data)),
            case .strings(let certificateTexts)? = members["certificates"],
            case .string(let nonceText)? = members["nonce"], let nonce = FlatJSONReader.base64(nonceText, in: data),
            case .string(let signatureText)? = members["nonceSignature"], let nonceSignature = FlatJSONReader.base64(signatureText, in: data)
        else { return nil }
        var certificates: [Data] = []
        certificates.reserveCapacity(certificateTexts.count)
        for text in certificateTexts {
            guard let certificate = data.withUnsafeBytes({ body in RecentBase64.certificates.decoded(UnsafeBufferPointer(rebasing: body.bindMemory(to: UInt8.self)[text.range])) }) else { return nil }
            certificates.append(certificate)
        }
        return SignedCardRequest(
            externalCardId: FlatJSONReader.string(externalCardId, in: data), walletType: walletType, deviceType: deviceType,
            certificates: certificates, nonce: nonce, nonceSignature: nonceSignature
        )
    }
}

extension TokenSearchRequest: FlatJSONDecodable {
    private static let flatKeys: Set<String> = ["walletType", "tokenUniqueReferences"]

    package static func decodeFlat(_ data: Data) -> TokenSearchRequest? {
        guard let members = FlatJSONReader.members(of: data, keys: flatKeys), members.count == flatKeys.count,
            case .string(let walletText)? = members["walletType"], let walletType = WalletType(exactly: FlatJSONReader.string(walletText, in: data)),
            case .strings(let references)? = members["tokenUniqueReferences"]
        else { return nil }
        return TokenSearchRequest(walletType: walletType, tokenUniqueReferences: references.map { FlatJSONReader.string($0, in: data) })
    }
}

/// The decoded bytes of the last few base64 texts decoded through it, found again by their
/// exact text.
///
/// Wallet hands every device the same few Apple certificates, so nearly every `signed-cards`
/// body repeats certificate texts seen moments before (about 2 KB of base64 each). A text found
/// here costs a comparison instead of decoding and a new 2 KB buffer. A hit answers exactly
/// what decoding the same bytes answers, since it is those bytes' own decoding; a text that does
/// not decode is not kept. Bodies that fill it with other texts only turn hits into decodings:
/// it holds ``capacity`` entries of at most ``maximumTextSize`` bytes, oldest out first.
/// (Certificates are public, so the comparison need not be constant-time.)
package final class RecentBase64: @unchecked Sendable {
    /// The memo for certificate texts in `signed-cards` bodies.
    package static let certificates = RecentBase64(capacity: 8, maximumTextSize: 8192)

    // @unchecked: `entries`, `oldest` and `hits` are only touched while holding `lock`.
    private let lock = NSLock()
    private var entries: [(text: [UInt8], decoded: Data)] = []
    private var oldest = 0
    private var hits = 0
    /// How many texts it keeps.
    package let capacity: Int
    /// Longer texts are decoded every time and not kept.
    package let maximumTextSize: Int

    package init(capacity: Int, maximumTextSize: Int) {
        self.capacity = max(0, capacity)
        self.maximumTextSize = maximumTextSize
    }

    /// What ``FlatJSONReader`` decodes `text` (base64 with `\/` escapes) to, from the memo when
    /// the same text was decoded recently.
    package func decoded(_ text: UnsafeBufferPointer<UInt8>) -> Data? {
        // An empty text (which decodes to no bytes) is never kept or compared.
        guard capacity > 0, !text.isEmpty, text.count <= maximumTextSize else { return FlatJSONReader.decodeBase64(text) }
        lock.lock()
        if let decoded = held(text) {
            hits += 1
            lock.unlock()
            return decoded
        }
        lock.unlock()
        guard let decoded = FlatJSONReader.decodeBase64(text) else { return nil }
        lock.lock()
        defer { lock.unlock() }
        // Another thread may have decoded the same text meanwhile: keep it once.
        guard held(text) == nil else { return decoded }
        if entries.count < capacity {
            entries.append((Array(text), decoded))
        } else {
            entries[oldest] = (Array(text), decoded)
            oldest = (oldest + 1) % capacity
        }
        return decoded
    }

    /// The decoding kept for `text` (not empty), if any; called holding `lock`.
    private func held(_ text: UnsafeBufferPointer<UInt8>) -> Data? {
        for entry in entries where entry.text.count == text.count {
            let same = entry.text.withUnsafeBufferPointer { kept in
                memcmp(UnsafeRawPointer(kept.baseAddress!), UnsafeRawPointer(text.baseAddress!), text.count) == 0
            }
            if same { return entry.decoded }
        }
        return nil
    }

    /// How many texts it holds.
    package var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return entries.count
    }

    /// How many texts were answered from the memo (tests and diagnostics).
    package var hitCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return hits
    }
}
