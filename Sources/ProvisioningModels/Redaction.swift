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
    /// written as one run or in groups of any length joined by single spaces or hyphens, as
    /// cards print them (`4111 1111 1111 1111`, `3782-822463-10005`) and ids may split them
    /// (`41-11111111111111`), or dots or underscores (as a form or a URL may carry them) —
    /// replaced by its last
    /// four, as ``pan(last4:)`` writes them: for messages that echo what a caller sent (an id
    /// or a path), in case a card number was sent there. Other digit runs (most numeric ids,
    /// times, dates) are left as they are.
    ///
    /// In a chain of groups, every group that is part of some card number is hidden, so a
    /// group before the card (a year, an order number) cannot take part of the card's digits
    /// into a span of its own and leave the rest in clear; the groups hidden together show the
    /// last four of their digits. The result is redacted again until nothing changes (the
    /// four digits shown may start a card number with the groups after them), so redacting
    /// twice changes nothing more; an input that keeps chaining after 16 rounds, which only
    /// one built for it does, has every digit hidden.
    public static func cardNumbers(in text: String) -> String {
        cardNumbers(in: text, rounds: 16)
    }

    /// ``cardNumbers(in:)`` with at most `rounds` rounds before every digit is hidden (tests).
    static func cardNumbers(in text: String, rounds: Int) -> String {
        var current = text
        for _ in 0..<rounds {
            let next = redactingOnce(current)
            if next == current { return current }
            current = next
        }
        return String(String.UnicodeScalarView(current.unicodeScalars.map { ("0"..."9").contains($0) ? "•" : $0 }))
    }

    /// One round of ``cardNumbers(in:)``.
    private static func redactingOnce(_ text: String) -> String {
        let bytes = Array(text.utf8)
        func isDigit(_ index: Int) -> Bool { index < bytes.count && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9") }
        func isSeparator(_ index: Int) -> Bool {
            index < bytes.count && (bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: ".") || bytes[index] == UInt8(ascii: "_"))
        }
        func runEnd(_ start: Int) -> Int {
            var end = start
            while isDigit(end) { end += 1 }
            return end
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
            // The chain starting here: runs of digits joined by single separators.
            var runs: [Range<Int>] = [index..<runEnd(index)]
            while isSeparator(runs[runs.count - 1].upperBound), isDigit(runs[runs.count - 1].upperBound + 1) {
                let start = runs[runs.count - 1].upperBound + 1
                runs.append(start..<runEnd(start))
            }
            var hidden = [Bool](repeating: false, count: runs.count)
            for first in runs.indices {
                var digits = 0
                var span: [UInt8] = []
                for last in first..<runs.count {
                    digits += runs[last].count
                    guard digits <= 19 else { break }
                    span += bytes[runs[last]]
                    if digits >= 12, Self.passesLuhn(span[...]) {
                        for covered in first...last { hidden[covered] = true }
                    }
                }
            }
            var run = 0
            while run < runs.count {
                if run > 0 { output.append(bytes[runs[run].lowerBound - 1]) }
                guard hidden[run] else {
                    output.append(contentsOf: bytes[runs[run]])
                    run += 1
                    continue
                }
                var digits: [UInt8] = []
                while run < runs.count, hidden[run] {
                    digits += bytes[runs[run]]
                    run += 1
                }
                output.append(contentsOf: pan(last4: String(decoding: digits.suffix(4), as: UTF8.self)).utf8)
            }
            index = runs[runs.count - 1].upperBound
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func passesLuhn(_ digits: ArraySlice<UInt8>) -> Bool {
        var sum = 0
        for (offset, byte) in digits.reversed().enumerated() {
            let digit = Int(byte - UInt8(ascii: "0"))
            sum += offset % 2 == 1 ? (digit * 2 > 9 ? digit * 2 - 9 : digit * 2) : digit
        }
        return sum % 10 == 0
    }

    /// The first `count` characters of an identifier followed by `…`, for logging token
    /// references and similar identifiers without writing them out in full. An identifier
    /// holding a card number (as ``cardNumbers(in:)`` finds them) is first redacted as that
    /// function writes it: its first digits would be the card's.
    public static func prefix(_ identifier: String, count: Int = 8) -> String {
        let redacted = cardNumbers(in: identifier)
        // The mark `•••• 1234` is kept whole when it starts the text, so a reference that is a
        // card number reads as one.
        let shown = redacted != identifier && redacted.hasPrefix("•••• ") ? max(count, 9) : count
        return redacted.count <= shown ? redacted : String(redacted.prefix(shown)) + "…"
    }
}
