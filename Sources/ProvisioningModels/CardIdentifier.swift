/// The shape of the identifiers TMP accepts for cards, card art and token references:
/// 1 to 64 of `A–Z a–z 0–9 . _ -`.
///
/// Shared by the server's input checks and the SDK, which puts card ids into URL paths and
/// file names: a valid identifier never holds a `/`, a `:`, a space or a control character.
public enum CardIdentifier {
    /// The longest identifier, in bytes.
    public static let maximumLength = 64

    /// Whether `value` has the shape of a TMP identifier.
    public static func isValid(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= maximumLength && value.utf8.allSatisfy(isIdentifierByte)
    }

    private static func isIdentifierByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default: false
        }
    }
}
