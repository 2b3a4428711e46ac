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

    /// `text` with every run of ASCII digits that could be a card number — 12 to 19 digits
    /// passing the Luhn check — replaced by its last four, as ``pan(last4:)`` writes them: for
    /// messages that echo what a caller sent (an id or a path), in case a card number was sent
    /// there. Other digit runs (most numeric ids, times) are left as they are.
    public static func cardNumbers(in text: String) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            guard bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") else {
                output.append(bytes[index])
                index += 1
                continue
            }
            var end = index
            while end < bytes.count, bytes[end] >= UInt8(ascii: "0"), bytes[end] <= UInt8(ascii: "9") { end += 1 }
            if (12...19).contains(end - index), Self.passesLuhn(bytes[index..<end]) {
                output.append(contentsOf: pan(last4: String(decoding: bytes[(end - 4)..<end], as: UTF8.self)).utf8)
            } else {
                output.append(contentsOf: bytes[index..<end])
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
