/// The kind of Apple device a pass is provisioned to.
public enum DeviceType: String, Sendable, Hashable, Codable, CaseIterable {
    /// The iPhone running the issuer app.
    case phone = "PHONE"
    /// The Apple Watch paired with that iPhone.
    case watch = "WATCH"
}

/// The wallet a token lives in. Only Apple Pay is supported.
public enum WalletType: String, Sendable, Hashable, Codable, CaseIterable {
    /// Apple Wallet.
    case applePay = "APPLE_PAY"
}
