import Crypto
import Foundation

/// The PAN vault's keys: AES-256 encryption keys by id (one current) and an HMAC lookup key.
public struct PANVaultKeys: Sendable {
    /// Encryption keys by id; older ones stay so existing values remain readable.
    public let encryptionKeys: [String: SymmetricKey]
    /// The id of the key new values are encrypted with.
    public let currentEncryptionKeyID: String
    /// The HMAC-SHA256 key for lookup hashes. Rotating it means recomputing every lookup hash.
    public let lookupKey: SymmetricKey

    /// Validates and assembles a key set.
    ///
    /// - Throws: ``KeyConfigurationError`` when a key is not 256 bits, the current id is not
    ///   among the keys, an id holds a `.`, or the lookup key equals an encryption key.
    public init(encryptionKeys: [String: SymmetricKey], currentEncryptionKeyID: String, lookupKey: SymmetricKey) throws {
        guard encryptionKeys[currentEncryptionKeyID] != nil else {
            throw KeyConfigurationError("the current PAN encryption key id \"\(currentEncryptionKeyID)\" is not among the configured keys")
        }
        for (id, key) in encryptionKeys {
            guard !id.isEmpty, !id.contains("."), !id.contains("\u{0}") else {
                throw KeyConfigurationError("PAN encryption key ids must be non-empty and contain no '.'")
            }
            guard key.bitCount == 256 else {
                throw KeyConfigurationError("PAN encryption key \"\(id)\" must be 256 bits (32 bytes), not \(key.bitCount)")
            }
            guard !key.withUnsafeBytes({ a in lookupKey.withUnsafeBytes { b in constantTimeEquals(Array(a), Array(b)) } }) else {
                throw KeyConfigurationError("the PAN lookup key must differ from every encryption key")
            }
        }
        guard lookupKey.bitCount == 256 else {
            throw KeyConfigurationError("the PAN lookup key must be 256 bits (32 bytes), not \(lookupKey.bitCount)")
        }
        self.encryptionKeys = encryptionKeys
        self.currentEncryptionKeyID = currentEncryptionKeyID
        self.lookupKey = lookupKey
    }

    /// A fresh key set with one random encryption key and a random lookup key.
    public static func generate() -> PANVaultKeys {
        let id = "pan-" + Data(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0.prefix(6)) }).lowercaseHex
        // Two independent random 256-bit keys cannot collide in practice; init re-checks anyway.
        return try! PANVaultKeys(
            encryptionKeys: [id: SymmetricKey(size: .bits256)],
            currentEncryptionKeyID: id,
            lookupKey: SymmetricKey(size: .bits256)
        )
    }
}

/// A key configuration that cannot be used; the message says what to fix.
public struct KeyConfigurationError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var message: String
    /// Creates an error.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}
