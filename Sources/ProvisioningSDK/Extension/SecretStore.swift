import Foundation

/// Where the app and its Wallet extensions keep secrets they share — the cardholder session
/// the authorization extension hands the non-UI extension — as opposed to the plain files of
/// ``SharedWalletDirectory``.
///
/// On iOS: ProvisioningPassKit's `KeychainSecretStore` (a Keychain access group the three
/// targets share). On Linux and in tests: ``FileSecretStore``. Calls are synchronous and
/// fast, so Wallet's 100 ms `status` can read a secret.
///
/// Every implementation holds to the same rules (``SecretStoreRules``), so code tried against
/// one store behaves the same against another: a key is 1 to 64 of `A–Z a–z 0–9 . _ -`, not
/// starting with a dot, and any other is refused with ``SharedStorageError/Code/invalidName``
/// by every call that takes a key; a secret is at most ``SecretStoreRules/maximumSecretBytes``
/// bytes, and a larger one is refused with ``SharedStorageError/Code/tooLarge``; a refused
/// call changes nothing. An empty secret is a secret (read back as empty data, not nil).
/// ProvisioningPassKit's tests hold every store to these rules in one contract suite.
public protocol SecretStore: Sendable {
    /// The secret stored under `key`, or nil if there is none.
    func secret(for key: String) throws -> Data?
    /// Stores `secret` under `key`, replacing any secret there.
    func setSecret(_ secret: Data, for key: String) throws
    /// Removes the secret under `key`; removing a missing secret is not an error.
    func removeSecret(for key: String) throws
    /// Removes every secret this store holds (sign-out).
    func removeAllSecrets() throws
}

/// The rules every ``SecretStore`` holds to, for implementations to check with.
public enum SecretStoreRules {
    /// The largest secret a store keeps (64 KiB: a session is a few hundred bytes).
    public static let maximumSecretBytes = 64 * 1024

    /// Refuses a key that is not 1 to 64 of `A–Z a–z 0–9 . _ -` or that starts with a dot.
    public static func validate(key: String) throws(SharedStorageError) {
        try SecretKey.validate(key)
    }

    /// Refuses a secret larger than ``maximumSecretBytes``.
    public static func validate(secret: Data) throws(SharedStorageError) {
        guard secret.count <= maximumSecretBytes else {
            throw SharedStorageError(.tooLarge, "a secret may be at most \(maximumSecretBytes) bytes; this one is \(secret.count)")
        }
    }
}

/// Names of secrets: 1 to 64 of `A–Z a–z 0–9 . _ -`, not starting with a dot.
enum SecretKey {
    static func validate(_ key: String) throws(SharedStorageError) {
        guard !key.isEmpty, key.utf8.count <= 64, !key.hasPrefix("."),
            key.utf8.allSatisfy({ $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) })
        else {
            throw SharedStorageError(.invalidName, "a secret key must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' or '-' and must not start with '.'")
        }
    }
}
