/// Helpers that turn sensitive values into forms that may be logged or shown.
public enum Redaction {
    /// `•••• 1234` for a card whose last four digits are `1234`.
    public static func pan(last4: String) -> String { "•••• \(last4)" }

    /// Redacts a string that may hold a PAN: keeps only its last four characters.
    ///
    /// Use this for values that have not been validated yet (for example an input that failed
    /// validation), so even a mistyped card number never reaches a log line.
    public static func pan(_ value: String) -> String {
        value.count <= 4 ? "••••" : pan(last4: String(value.suffix(4)))
    }

    /// `text` with every card number in it — 12 to 19 ASCII digits passing the Luhn check,
    /// written as one run, inside a longer run of digits, or in groups of any length joined by
    /// separators, as cards print them (`4111 1111 1111 1111`, `3782-822463-10005`), ids may
    /// split them (`41-11111111111111`), and forms, paths and URLs may carry them — replaced
    /// by its last four, as ``pan(last4:)`` writes them: for messages that echo what a caller
    /// sent (an id or a path), in case a card number was sent there. A separator is one to
    /// three of: space, tab, line feed, carriage return, no-break space, the other Unicode
    /// spaces digits are grouped or aligned with (U+2000 to U+200A, the narrow no-break space
    /// U+202F, U+205F, U+3000, U+1680), the invisible characters copying leaves between digits
    /// (U+200B to U+200F, U+2060, U+FEFF), the Unicode hyphens, dashes and minus signs (U+2010
    /// to U+2015, U+2212, U+FF0D), `-`, `.`, `_`, `/`, `+` and `%20`. Other digit runs
    /// (most numeric ids, times, dates) are left as they are, and so are lists: a comma or a
    /// quote ends a chain.
    ///
    /// Every stretch of 12 to 19 consecutive digits of a chain is checked, so a card number
    /// inside a longer run (`4111111111111111` followed by a sequence number) is found; the
    /// cost is that a long run of digits is hidden more often than a short one (the safe
    /// side). In a chain of groups, every group that holds part of some card number is hidden,
    /// so a group before the card (a year, an order number) cannot take part of the card's
    /// digits into a span of its own and leave the rest in clear; the groups hidden together
    /// show the last four of their digits. The four digits shown and the groups after them
    /// were a stretch of the input already, so a second round finds nothing more; the result
    /// is still redacted again until nothing changes, as a guard, and an input still changing
    /// after 16 rounds would have every digit hidden.
    public static func cardNumbers(in text: String) -> String {
        cardNumbers(in: text, rounds: 16)
    }

    /// An id a caller chose (a card id, a token or event reference, an art id), for an error
    /// message or a log line that names it: ``cardNumbers(in:)``, and then, because an id is
    /// one word and not text, groups of digits joined by any run of ASCII characters other than
    /// letters and digits (and the spaces, invisible marks and dashes outside ASCII that
    /// ``cardNumbers(in:)`` takes) are read as one chain too
    /// (`4111----1111----1111----1111`, `4111:1111:1111:1111`, `(4111) 1111 …`); any other
    /// character outside ASCII ends a chain, as a letter does. A chain holding 12 to 19 digits that pass the
    /// Luhn check has the groups holding them hidden, showing the last four of their digits as
    /// ``pan(last4:)`` writes them. A letter ends a chain, so ids made of hexadecimal (UUIDs,
    /// hashes) keep their digits unless a card number appears in them as ``cardNumbers(in:)``
    /// finds it. Digits split by letters (`4111a1111b1111c1111`) are not looked for.
    public static func identifier(_ id: String) -> String {
        redacting(id, rounds: 16, joining: [.written(percentSpace: true), .written(percentSpace: false), .anythingButLettersAndDigits])
    }

    /// ``cardNumbers(in:)`` with at most `rounds` rounds before every digit is hidden (tests).
    static func cardNumbers(in text: String, rounds: Int) -> String {
        // `%20` is read both ways: as a separator, and as `%` before the digits `20` (which may
        // start a card number: `25%204111…` holds `204111…`).
        redacting(text, rounds: rounds, joining: [.written(percentSpace: true), .written(percentSpace: false)])
    }

    /// `text` redacted by one pass per rule of `joining`, in order, repeated until nothing
    /// changes, or with every digit hidden after `rounds` rounds.
    static func redacting(_ text: String, rounds: Int, joining: [Separators]) -> String {
        var current = text
        for _ in 0..<rounds {
            let next = joining.reduce(current) { redactingOnce($0, joining: $1) }
            if next == current { return current }
            current = next
        }
        return String(String.UnicodeScalarView(current.unicodeScalars.map { ("0"..."9").contains($0) ? "•" : $0 }))
    }

    /// What joins two groups of digits into one chain.
    enum Separators {
        /// One to three of the separators card numbers are written with
        /// (``separatorUnit(at:in:percentSpace:)``); `%20` counts only with `percentSpace`.
        case written(percentSpace: Bool)
        /// Any run of bytes that are neither ASCII letters nor ASCII digits nor the start of
        /// a character outside ASCII (which may be a letter), except the separators outside ASCII
        /// of ``separatorUnit(at:in:percentSpace:)``: for ids.
        case anythingButLettersAndDigits
    }

    /// The most separator units (``separatorUnit(at:in:percentSpace:)``) that join two groups
    /// of digits written as cards print them.
    private static let maximumSeparatorUnits = 3

    /// The length in bytes of the separator unit starting at `index`, or nil; `%20` counts only
    /// with `percentSpace`.
    private static func separatorUnit(at index: Int, in bytes: [UInt8], percentSpace: Bool) -> Int? {
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "/"), UInt8(ascii: "+"):
            return 1
        case 0xC2 where index + 1 < bytes.count && bytes[index + 1] == 0xA0:
            return 2
        case 0xE1, 0xE2, 0xE3, 0xEF:
            return unicodeSeparator(at: index, in: bytes)
        case UInt8(ascii: "%") where percentSpace && index + 2 < bytes.count && bytes[index + 1] == UInt8(ascii: "2") && bytes[index + 2] == UInt8(ascii: "0"):
            return 3
        default:
            return nil
        }
    }

    /// The length in bytes (3) of a space, an invisible mark or a dash outside ASCII and
    /// Latin-1 starting at `index`, or nil: the Ogham space mark U+1680; U+2000 to U+200A (en
    /// and em spaces, thin and hair spaces, the figure space digits are aligned with); the
    /// invisible U+200B to U+200F (zero-width space, joiners, direction marks), the word
    /// joiner U+2060 and U+FEFF, which copying from a web page or a PDF leaves between digits;
    /// the hyphens and dashes U+2010 to U+2015 (a word processor turns `-` into the en dash
    /// U+2013), the minus sign U+2212 and the fullwidth hyphen-minus U+FF0D; the narrow
    /// no-break space U+202F (which French and other locales group digits with), U+205F and
    /// the ideographic space U+3000.
    private static func unicodeSeparator(at index: Int, in bytes: [UInt8]) -> Int? {
        guard index + 2 < bytes.count else { return nil }
        switch (bytes[index], bytes[index + 1], bytes[index + 2]) {
        case (0xE1, 0x9A, 0x80), (0xE2, 0x80, 0x80...0x95), (0xE2, 0x80, 0xAF), (0xE2, 0x81, 0x9F), (0xE2, 0x81, 0xA0), (0xE2, 0x88, 0x92), (0xE3, 0x80, 0x80), (0xEF, 0xBB, 0xBF), (0xEF, 0xBC, 0x8D):
            return 3
        default: return nil
        }
    }

    /// The length in bytes of a character that may join digits in an id (anything but an ASCII
    /// letter or digit, and outside ASCII only the no-break space and those of
    /// ``unicodeSeparator(at:in:)``), or nil.
    private static func idSeparator(at index: Int, in bytes: [UInt8]) -> Int? {
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return nil
        case 0xC2 where index + 1 < bytes.count && bytes[index + 1] == 0xA0:
            return 2
        case 0xE1, 0xE2, 0xE3, 0xEF:
            return unicodeSeparator(at: index, in: bytes)
        case 0x80...:
            return nil
        default:
            return 1
        }
    }

    /// One pass of ``redacting(_:rounds:joining:)`` with one rule for what joins groups.
    private static func redactingOnce(_ text: String, joining separators: Separators) -> String {
        let bytes = Array(text.utf8)
        func isDigit(_ index: Int) -> Bool { index < bytes.count && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9") }
        func runEnd(_ start: Int) -> Int {
            var end = start
            while isDigit(end) { end += 1 }
            return end
        }
        /// Where the digits after a separator starting at `index` begin, if they do.
        func nextRun(after index: Int) -> Int? {
            var position = index
            switch separators {
            case .written(let percentSpace):
                for _ in 0..<maximumSeparatorUnits {
                    guard let length = separatorUnit(at: position, in: bytes, percentSpace: percentSpace) else { break }
                    position += length
                    if isDigit(position) { return position }
                }
            case .anythingButLettersAndDigits:
                while let length = idSeparator(at: position, in: bytes) {
                    position += length
                    if isDigit(position) { return position }
                }
            }
            return nil
        }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            guard isDigit(index) else {
                output.append(bytes[index])
                index += 1
                continue
            }
            // The chain starting here: runs of digits joined by separators.
            var runs: [Range<Int>] = [index..<runEnd(index)]
            while let start = nextRun(after: runs[runs.count - 1].upperBound) {
                runs.append(start..<runEnd(start))
            }
            // Its digits read together, each with the run it belongs to.
            var digits: [UInt8] = []
            var owner: [Int] = []
            for (number, run) in runs.enumerated() {
                digits += bytes[run]
                owner += repeatElement(number, count: run.count)
            }
            var hidden = [Bool](repeating: false, count: runs.count)
            if digits.count >= 12 {
                let sums = LuhnSums(digits)
                for first in digits.indices {
                    for length in 12...19 where first + length <= digits.count {
                        if sums.passes(first..<(first + length)) {
                            for covered in owner[first]...owner[first + length - 1] { hidden[covered] = true }
                        }
                    }
                }
            }
            var run = 0
            while run < runs.count {
                if run > 0 { output.append(contentsOf: bytes[runs[run - 1].upperBound..<runs[run].lowerBound]) }
                guard hidden[run] else {
                    output.append(contentsOf: bytes[runs[run]])
                    run += 1
                    continue
                }
                var covered: [UInt8] = []
                while run < runs.count, hidden[run] {
                    covered += bytes[runs[run]]
                    run += 1
                }
                output.append(contentsOf: pan(last4: String(decoding: covered.suffix(4), as: UTF8.self)).utf8)
            }
            index = runs[runs.count - 1].upperBound
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Luhn sums of any stretch of a chain's digits in constant time: prefix sums of each digit
    /// as it is and doubled (digit sum), apart by the parity of its position. In a stretch the
    /// last digit counts as it is, the one before it doubled, and so on, so a digit counts as it
    /// is when its position has the parity of the stretch's last one.
    struct LuhnSums {
        /// `asIs[parity][i]`: the sum of the digits before position `i` whose position has that
        /// parity (32 bits: 9 per digit fits for over 200 million digits, far beyond any text
        /// redacted here, and halves the memory of a long run).
        private var asIs: [[Int32]] = [[0], [0]]
        private var doubled: [[Int32]] = [[0], [0]]

        init(_ digits: [UInt8]) {
            for parity in 0..<2 {
                asIs[parity].reserveCapacity(digits.count + 1)
                doubled[parity].reserveCapacity(digits.count + 1)
            }
            for (position, byte) in digits.enumerated() {
                let digit = Int32(byte &- UInt8(ascii: "0"))
                let twice = digit * 2 > 9 ? digit * 2 - 9 : digit * 2
                for parity in 0..<2 {
                    let here = position % 2 == parity
                    asIs[parity].append(asIs[parity][position] + (here ? digit : 0))
                    doubled[parity].append(doubled[parity][position] + (here ? twice : 0))
                }
            }
        }

        /// Whether the digits in `stretch` (a non-empty range of positions) pass the Luhn check.
        func passes(_ stretch: Range<Int>) -> Bool {
            let last = (stretch.upperBound - 1) % 2
            let sum = asIs[last][stretch.upperBound] - asIs[last][stretch.lowerBound]
                + doubled[1 - last][stretch.upperBound] - doubled[1 - last][stretch.lowerBound]
            return sum % 10 == 0
        }
    }

    /// The first `count` characters of an identifier followed by `…`, for logging token
    /// references and similar identifiers without writing them out in full. An identifier
    /// holding a card number (as ``identifier(_:)`` finds them) is first redacted as that
    /// function writes it: its first digits would be the card's.
    public static func prefix(_ identifier: String, count: Int = 8) -> String {
        let redacted = Self.identifier(identifier)
        // The mark `•••• 1234` is kept whole when it starts the text, so a reference that is a
        // card number reads as one.
        let shown = redacted != identifier && redacted.hasPrefix("•••• ") ? max(count, 9) : count
        return redacted.count <= shown ? redacted : String(redacted.prefix(shown)) + "…"
    }
}
