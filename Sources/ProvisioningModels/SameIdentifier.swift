extension String {
    /// Whether this identity and `other` are the same one: the same UTF-8 bytes.
    ///
    /// Swift's `==` compares strings by Unicode canonical equivalence, so `"K"` equals
    /// `"\u{212A}"` (KELVIN SIGN) and `"é"` equals `"e\u{301}"`. Identities that decide access
    /// (user ids, a token's issuer and audience) are compared the way the stores compare them,
    /// byte for byte, so two different ids never count as one.
    public func isSameIdentifier(as other: String) -> Bool {
        utf8.count == other.utf8.count && utf8.elementsEqual(other.utf8)
    }
}
