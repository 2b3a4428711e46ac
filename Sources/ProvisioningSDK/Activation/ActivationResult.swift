import ProvisioningModels

/// The issuer's answer to an activation deep link.
public struct ActivationResult: Sendable, Hashable {
    /// `APPROVED`, `DECLINED` or `FAILED`.
    public var outcome: ActivationOutcome
    /// The server's explanation, for people.
    public var comment: String
    /// The card's last four digits, as the server reports them.
    public var cardLast4Digits: String
    /// The activated pass.
    public var pass: WalletPass
    /// The wallet status read after the activation (nil if that read failed).
    public var status: WalletStatusSnapshot?

    /// Creates a result.
    public init(outcome: ActivationOutcome, comment: String, cardLast4Digits: String, pass: WalletPass, status: WalletStatusSnapshot?) {
        self.outcome = outcome
        self.comment = comment
        self.cardLast4Digits = cardLast4Digits
        self.pass = pass
        self.status = status
    }
}
