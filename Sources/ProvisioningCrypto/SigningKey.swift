import Crypto
import Foundation

/// A P-256 signing key with the id under which its public half is published.
///
/// Ids let keys rotate: new values are signed with the newest key while verifiers still
/// accept the previous ones for as long as they are published.
public struct SigningKey: Sendable {
    /// The key id (`kid`).
    public let id: String
    /// The private key.
    public let privateKey: P256.Signing.PrivateKey

    /// Pairs a key with its id.
    public init(id: String, privateKey: P256.Signing.PrivateKey) {
        self.id = id
        self.privateKey = privateKey
    }

    /// A fresh key with a random id.
    public static func generate() -> SigningKey {
        let id = Data(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }).base64URLEncodedString
        return SigningKey(id: id, privateKey: P256.Signing.PrivateKey())
    }

    /// The public half as a JWK.
    public var publicJWK: JSONWebKey { JSONWebKey(publicKey: privateKey.publicKey, keyID: id) }
}
