import Foundation

/// Where the app and its Wallet extensions keep secrets they share — the cardholder session
/// the authorization extension hands the non-UI extension — as opposed to the plain files of
/// ``SharedWalletDirectory``.
///
/// On iOS: ProvisioningPassKit's `KeychainSecretStore` (a Keychain access group the three
/// targets share). On Linux and in tests: ``FileSecretStore``. Calls are synchronous and
/// fast, so Wallet's 100 ms `status` can read a secret.
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
