import Foundation

/// A check of a JSON text against RFC 8259 as written, run before a decoder reads it.
///
/// Foundation's `JSONDecoder` is more lenient than the RFC — it takes trailing commas
/// (`{"a":1,}`), numbers such as `01` or `1.` in members it then ignores, and UTF-16 or UTF-32
/// text — and of a member given twice it keeps the first copy without looking at the others,
/// where most other readers (Python's `json`, many gateways and log pipelines) keep the last.
/// A request such a reader sees one way would then be acted on another way. This check refuses
/// all of that before any decoder runs:
///
/// - the text is one value, with only JSON whitespace around it (a UTF-8 byte order mark
///   first is allowed, as RFC 8259 lets readers ignore one);
/// - it is UTF-8, without overlong forms, encoded surrogates or code points past U+10FFFF;
/// - strings hold no raw control characters, only the RFC's escapes, and no `\u` escape of a
///   lone surrogate;
/// - numbers have the RFC's form (no leading zeros, no `+`, digits after `.` and `e`) and lie
///   within the range of a 64-bit float, as RFC 8259 advises for interoperability;
/// - no object names a member twice, names compared byte for byte after their escapes are
///   read (`"st\u0061tus"` is `"status"`);
/// - arrays and objects nest at most ``maximumDepth`` deep.
///
/// Refusals say what is wrong and where, and never echo the text (it may hold a card number):
/// a member's name is named only when it is a plain name (ASCII letters and `_`), and a path
/// of array indices is shown as ``Redaction/identifier(_:)`` writes it.
public enum StrictJSON {
    /// Why a text was refused, for people: it names the place, never a value.
    public struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        /// What is wrong.
        public var message: String
        /// Creates a problem.
        public init(_ message: String) { self.message = message }
        /// The message.
        public var description: String { message }
    }

    /// The deepest nesting of arrays and objects accepted (request bodies here are one or two
    /// levels deep).
    public static let maximumDepth = 64

    /// Refuses `data` unless it is one JSON value as RFC 8259 writes it, with no object naming
    /// a member twice.
    public static func check(_ data: Data) throws(Problem) {
        let outcome = data.withUnsafeBytes { raw -> Problem? in
            var scanner = Scanner(bytes: raw.bindMemory(to: UInt8.self))
            do throws(Problem) {
                try scanner.document()
                return nil
            } catch {
                return error
            }
        }
        if let outcome { throw outcome }
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0
        var depth = 0
        /// The names and indices leading to the value being read, for messages.
        var path: [String] = []

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        func invalid(_ why: String) -> Problem {
            Problem("body is not valid JSON: \(why) at byte \(position)")
        }

        var current: UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
        }

        mutating func expect(_ byte: UInt8, _ what: String) throws(Problem) {
            guard current == byte else { throw invalid(current == nil ? "the text ends where \(what) was expected" : "\(what) expected") }
            position += 1
        }

        mutating func document() throws(Problem) {
            if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { position = 3 }
            skipWhitespace()
            try value()
            skipWhitespace()
            guard current == nil else { throw invalid("more text after the JSON value") }
        }

        mutating func value() throws(Problem) {
            guard let byte = current else { throw invalid("the text ends where a value was expected") }
            switch byte {
            case UInt8(ascii: "{"): try object()
            case UInt8(ascii: "["): try array()
            case UInt8(ascii: "\""): _ = try string(keeping: false)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            default: throw invalid("a value was expected")
            }
        }

        mutating func literal(_ word: StaticString) throws(Problem) {
            let count = word.utf8CodeUnitCount
            guard position + count <= bytes.count else { throw invalid("a value was expected") }
            for offset in 0..<count where bytes[position + offset] != word.utf8Start[offset] {
                throw invalid("a value was expected")
            }
            position += count
        }

        mutating func enter() throws(Problem) {
            depth += 1
            guard depth <= StrictJSON.maximumDepth else { throw invalid("arrays and objects nested more than \(StrictJSON.maximumDepth) deep") }
        }

        /// An array or an object, its opening bracket at `position`: `element` reads each
        /// element (given its index), separated by commas, until `closing`. `[]` and `{}` are
        /// fine; a comma must be followed by another element (`[1,]` is not JSON).
        mutating func container(closing: UInt8, _ element: (inout Scanner, Int) throws(Problem) -> Void) throws(Problem) {
            let closer = Character(Unicode.Scalar(closing))
            try enter()
            position += 1
            skipWhitespace()
            if current == closing {
                position += 1
                depth -= 1
                return
            }
            var index = 0
            while true {
                skipWhitespace()
                try element(&self, index)
                skipWhitespace()
                guard current == UInt8(ascii: ",") else { break }
                position += 1
                skipWhitespace()
                if current == closing { throw invalid("a comma before '\(closer)'") }
                index += 1
            }
            try expect(closing, "',' or '\(closer)'")
            depth -= 1
        }

        mutating func object() throws(Problem) {
            // Swift strings: two names Foundation's decoder takes for one (it compares keys by
            // canonical equivalence: KELVIN SIGN and K) count as the same name here too.
            var names: Set<String> = []
            try container(closing: UInt8(ascii: "}")) { (scanner: inout Scanner, _: Int) throws(Problem) in
                guard scanner.current == UInt8(ascii: "\"") else {
                    throw scanner.invalid(scanner.current == nil ? "the text ends inside an object" : "a member name (a string) was expected")
                }
                let name = try scanner.string()
                let shown = Self.plainName(name)
                guard names.insert(String(decoding: name, as: UTF8.self)).inserted else {
                    let path = scanner.path
                    guard let shown else {
                        throw Problem("a member name appears more than once in one object\(path.isEmpty ? "" : " (in \(Redaction.identifier(Self.format(path))))")")
                    }
                    throw Problem("field \(Redaction.identifier(Self.format(path + [shown]))) appears more than once")
                }
                scanner.skipWhitespace()
                try scanner.expect(UInt8(ascii: ":"), "':' after a member name")
                scanner.skipWhitespace()
                scanner.path.append(shown ?? "?")
                try scanner.value()
                scanner.path.removeLast()
            }
        }

        mutating func array() throws(Problem) {
            try container(closing: UInt8(ascii: "]")) { (scanner: inout Scanner, index: Int) throws(Problem) in
                scanner.path.append("[\(index)]")
                try scanner.value()
                scanner.path.removeLast()
            }
        }

        mutating func digits() -> Int {
            let start = position
            while let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { position += 1 }
            return position - start
        }

        mutating func number() throws(Problem) {
            let start = position
            if current == UInt8(ascii: "-") { position += 1 }
            if current == UInt8(ascii: "0") {
                position += 1
                if let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { throw invalid("a number with a leading zero") }
            } else if digits() == 0 {
                throw invalid("a digit was expected in a number")
            }
            if current == UInt8(ascii: ".") {
                position += 1
                guard digits() > 0 else { throw invalid("a digit was expected after '.' in a number") }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                position += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
                guard digits() > 0 else { throw invalid("a digit was expected in a number's exponent") }
            }
            // RFC 8259 leaves the range to readers and advises that of a 64-bit float; past it,
            // readers differ (Foundation's parser refuses, others give infinity).
            guard let value = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)), value.isFinite else {
                throw invalid("a number beyond the range of a 64-bit floating-point number")
            }
        }

        /// Reads a string and returns its content as UTF-8 bytes, escapes read — when
        /// `keeping` (member names); a value's content is only checked, not copied (a request's
        /// certificates are kilobytes of base64).
        mutating func string(keeping: Bool = true) throws(Problem) -> [UInt8] {
            position += 1
            var content: [UInt8] = []
            while true {
                guard let byte = current else { throw invalid("the text ends inside a string") }
                switch byte {
                case UInt8(ascii: "\""):
                    position += 1
                    return content
                case UInt8(ascii: "\\"):
                    position += 1
                    try escape(into: &content, keeping: keeping)
                case 0x00..<0x20:
                    throw invalid("a control character inside a string (it must be escaped)")
                case 0x20..<0x80:
                    // A run of plain ASCII at once.
                    let start = position
                    while let next = current, next >= 0x20, next < 0x80, next != UInt8(ascii: "\""), next != UInt8(ascii: "\\") { position += 1 }
                    if keeping { content.append(contentsOf: bytes[start..<position]) }
                default:
                    let length = try utf8Sequence()
                    if keeping { content.append(contentsOf: bytes[position..<(position + length)]) }
                    position += length
                }
            }
        }

        /// Reads the escape after a backslash, appending what it stands for to `content` when
        /// `keeping`.
        mutating func escape(into content: inout [UInt8], keeping: Bool) throws(Problem) {
            guard let byte = current else { throw invalid("the text ends inside a string") }
            position += 1
            let simple: UInt8?
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): simple = byte
            case UInt8(ascii: "b"): simple = 0x08
            case UInt8(ascii: "f"): simple = 0x0C
            case UInt8(ascii: "n"): simple = 0x0A
            case UInt8(ascii: "r"): simple = 0x0D
            case UInt8(ascii: "t"): simple = 0x09
            default: simple = nil
            }
            if let simple {
                if keeping { content.append(simple) }
                return
            }
            switch byte {
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                        throw invalid("a \\u escape of a lone surrogate")
                    }
                    position += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw invalid("a \\u escape of a lone surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw invalid("a \\u escape of a lone surrogate")
                }
                if keeping { UTF8.encode(Unicode.Scalar(scalar)!) { content.append($0) } }
            default:
                throw invalid("an escape JSON does not have")
            }
        }

        mutating func hex4() throws(Problem) -> UInt32 {
            guard position + 4 <= bytes.count else { throw invalid("the text ends inside a \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[position]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw invalid("four hexadecimal digits were expected after \\u")
                }
                value = value << 4 | UInt32(digit)
                position += 1
            }
            return value
        }

        /// The length of the well-formed UTF-8 sequence of two to four bytes at `position`.
        func utf8Sequence() throws(Problem) -> Int {
            let lead = bytes[position]
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; high = 0x9F  // not an encoded surrogate
            case 0xF0: length = 4; low = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; high = 0x8F  // not past U+10FFFF
            default: throw invalid("bytes that are not UTF-8")
            }
            guard position + length <= bytes.count else { throw invalid("bytes that are not UTF-8") }
            for offset in 1..<length {
                let byte = bytes[position + offset]
                let (minimum, maximum) = offset == 1 ? (low, high) : (UInt8(0x80), UInt8(0xBF))
                guard byte >= minimum, byte <= maximum else { throw invalid("bytes that are not UTF-8") }
            }
            return length
        }

        /// A path as messages write it: `certificates[1]`, `card.status`.
        static func format(_ path: [String]) -> String {
            path.reduce(into: "") { text, segment in
                text += segment.hasPrefix("[") || text.isEmpty ? segment : "." + segment
            }
        }

        /// `name` when it is a plain name (1 to 64 ASCII letters and `_`, as every member name of
        /// this API is), else nil: a name with digits could spell a card number, and is not shown.
        static func plainName(_ name: [UInt8]) -> String? {
            guard !name.isEmpty, name.count <= 64,
                name.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F })
            else { return nil }
            return String(decoding: name, as: UTF8.self)
        }
    }
}
