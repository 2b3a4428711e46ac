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
    /// written as one run or in groups joined by single spaces or hyphens (`4111 1111 1111
    /// 1111`, `4111-1111-1111-1111`) — replaced by its last four, as ``pan(last4:)`` writes
    /// them: for messages that echo what a caller sent (an id or a path), in case a card number
    /// was sent there. Other digit runs (most numeric ids, times, dates) are left as they are.
    ///
    /// In a chain of runs joined by separators, each run in turn starts the longest span of
    /// runs that is a card number, if any; a run right after a redaction's `•••• ` stands
    /// alone, so redacting twice changes nothing more.
    public static func cardNumbers(in text: String) -> String {
        let bytes = Array(text.utf8)
        let mark = Array(pan(last4: "").utf8)
        func isDigit(_ index: Int) -> Bool { index < bytes.count && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9") }
        func isSeparator(_ index: Int) -> Bool { index < bytes.count && (bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "-")) }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            guard isDigit(index) else {
                output.append(bytes[index])
                index += 1
                continue
            }
            // The chain of runs starting here.
            let afterMark = index >= mark.count && bytes[(index - mark.count)..<index].elementsEqual(mark)
            var runs: [Range<Int>] = []
            var end = index
            while true {
                let start = end
                while isDigit(end) { end += 1 }
                runs.append(start..<end)
                guard !afterMark, isSeparator(end), isDigit(end + 1) else { break }
                end += 1
            }
            var run = 0
            while run < runs.count {
                if run > 0 { output.append(bytes[runs[run].lowerBound - 1]) }
                var longest: (last: Int, digits: [UInt8])?
                var digits: [UInt8] = []
                for last in run..<runs.count {
                    digits += bytes[runs[last]]
                    guard digits.count <= 19 else { break }
                    if digits.count >= 12, Self.passesLuhn(digits[...]) { longest = (last, digits) }
                }
                if let longest {
                    output.append(contentsOf: pan(last4: String(decoding: longest.digits.suffix(4), as: UTF8.self)).utf8)
                    run = longest.last + 1
                } else {
                    output.append(contentsOf: bytes[runs[run]])
                    run += 1
                }
            }
            index = end
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
    /// references and similar identifiers without writing them out in full.
    public static func prefix(_ identifier: String, count: Int = 8) -> String {
        identifier.count <= count ? identifier : String(identifier.prefix(count)) + "…"
    }
}
