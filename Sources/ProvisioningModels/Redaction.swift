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

    /// The first `count` characters of an identifier followed by `…`, for logging token
    /// references and similar identifiers without writing them out in full.
    public static func prefix(_ identifier: String, count: Int = 8) -> String {
        identifier.count <= count ? identifier : String(identifier.prefix(count)) + "…"
    }
}
