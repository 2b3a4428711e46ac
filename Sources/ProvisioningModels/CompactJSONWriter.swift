import Foundation

/// Writes one flat JSON object byte by byte, for the few documents made on every
/// `signed-cards` call (the pass-data payload, the activation data's header and claims, the
/// response).
///
/// `JSONEncoder` builds a tree of boxed values and sorts keys per object; for these small,
/// fixed shapes that was most of the cost of producing them. The output is byte-for-byte what
/// `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` writes for the same fields
/// (tests compare the two), so readers and signatures see no difference:
/// - keys are written in the order given, which must be ascending (checked in debug builds);
/// - strings escape `"` and `\`, use `\b \t \n \f \r` and `\u00XX` for the other control
///   characters, and leave `/` and all non-ASCII characters as they are (UTF-8);
/// - a `nil` optional value is left out, as the synthesized `Encodable` does.
package struct CompactJSONWriter {
    private var bytes: [UInt8]
    private var empty = true
    #if DEBUG
    private var lastKey: String?
    #endif

    /// Starts an object; `capacity` is a hint of the final size in bytes.
    package init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// Adds a string member.
    package mutating func add(_ key: String, _ value: String) {
        member(key)
        Self.appendString(value, to: &bytes)
    }

    /// Adds a string member, or nothing when `value` is `nil`.
    package mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        add(key, value)
    }

    /// Adds an integer member.
    package mutating func add(_ key: String, _ value: Int64) {
        member(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    /// Adds bytes as a standard, padded base64 string (how ``Base64Data`` encodes).
    package mutating func addBase64(_ key: String, _ value: Data) {
        member(key)
        bytes.append(UInt8(ascii: "\""))
        // Base64 has no character that needs escaping.
        bytes.append(contentsOf: value.base64EncodedString().utf8)
        bytes.append(UInt8(ascii: "\""))
    }

    /// The finished object.
    package consuming func finish() -> Data {
        bytes.append(UInt8(ascii: "}"))
        return Data(bytes)
    }

    private mutating func member(_ key: String) {
        #if DEBUG
        if let lastKey { assert(lastKey < key, "CompactJSONWriter keys must be ascending: \(lastKey) then \(key)") }
        lastKey = key
        #endif
        if !empty { bytes.append(UInt8(ascii: ",")) }
        empty = false
        Self.appendString(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func appendString(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            // Runs that need no escape (all of a base64 or JWS value) are copied whole.
            var runStart = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                appendEscape(byte, to: &bytes)
                runStart = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func appendEscape(_ byte: UInt8, to bytes: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
        case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
        case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        default:
            bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            bytes.append(hexDigits[Int(byte >> 4)])
            bytes.append(hexDigits[Int(byte & 0x0F)])
        }
    }
}
