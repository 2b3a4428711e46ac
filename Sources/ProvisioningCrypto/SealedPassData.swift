import Foundation

/// The output of ECC_V2 sealing: what the issuer back end returns to Wallet.
public struct SealedPassData: Sendable, Hashable {
    /// AES-256-GCM ciphertext followed by its 16-byte tag (`encryptedPassData`).
    public var encryptedData: Data
    /// The ephemeral P-256 public key as a raw 65-byte uncompressed point (`04 || X || Y`).
    public var ephemeralPublicKey: Data

    /// Wraps the two values of an ECC_V2 response.
    public init(encryptedData: Data, ephemeralPublicKey: Data) {
        self.encryptedData = encryptedData
        self.ephemeralPublicKey = ephemeralPublicKey
    }
}
