import Foundation
import ProvisioningModels

/// A token as the simulated token service holds it: what the Apple side needs to add the
/// pass, and the state TMP's lifecycle commands change.
public struct NetworkToken: Sendable, Hashable {
    /// The token reference; the pass's `deviceAccountIdentifier`.
    public var tokenUniqueReference: String
    /// The card's reference at TMP (its `panUniqueReference`). Not the pass's
    /// `primaryAccountIdentifier`: Wallet makes that one itself, per card account, shared by
    /// the card's passes on iPhone and Watch.
    public var panUniqueReference: String
    /// Last four digits of the card number; the pass's `primaryAccountNumberSuffix`.
    public var panLast4: String
    /// Last four digits of the token; the pass's `deviceAccountNumberSuffix`.
    public var tokenLast4: String
    /// The device the token lives on.
    public var deviceType: DeviceType
    /// Always Apple Pay.
    public var walletType: WalletType
    /// `ACTIVE` (green) or `INACTIVE` (yellow) at creation; then as TMP's commands change it.
    public var status: TokenStatus
    /// Green or yellow, as decided at tokenization.
    public var authorizationPath: AuthorizationPath
    /// When it was created.
    public var createdAt: Date
    /// When its state last changed.
    public var updatedAt: Date

    /// Creates a token.
    public init(
        tokenUniqueReference: String,
        panUniqueReference: String,
        panLast4: String,
        tokenLast4: String,
        deviceType: DeviceType,
        walletType: WalletType = .applePay,
        status: TokenStatus,
        authorizationPath: AuthorizationPath,
        createdAt: Date,
        updatedAt: Date
    ) {
        self.tokenUniqueReference = tokenUniqueReference
        self.panUniqueReference = panUniqueReference
        self.panLast4 = panLast4
        self.tokenLast4 = tokenLast4
        self.deviceType = deviceType
        self.walletType = walletType
        self.status = status
        self.authorizationPath = authorizationPath
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}
