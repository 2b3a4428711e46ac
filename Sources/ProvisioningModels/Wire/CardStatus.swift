/// A card's status in the issuer's back office.
public enum CardStatus: String, Codable, Sendable, Hashable, CaseIterable {
    /// Usable; may be provisioned.
    case active = "ACTIVE"
    /// Temporarily blocked; its tokens are suspended.
    case blocked = "BLOCKED"
    /// Closed for good; its tokens are deactivated.
    case closed = "CLOSED"
}

/// A payment card network.
public enum CardNetwork: String, Codable, Sendable, Hashable, CaseIterable {
    /// Visa.
    case visa = "VISA"
    /// Mastercard.
    case mastercard = "MASTERCARD"
    /// American Express.
    case amex = "AMEX"
    /// Discover.
    case discover = "DISCOVER"
    /// JCB.
    case jcb = "JCB"
    /// China UnionPay.
    case unionPay = "UNIONPAY"
    /// Maestro.
    case maestro = "MAESTRO"
    /// Interac.
    case interac = "INTERAC"
    /// eftpos Australia.
    case eftpos = "EFTPOS"
    /// Cartes Bancaires.
    case cartesBancaires = "CARTES_BANCAIRES"
}
