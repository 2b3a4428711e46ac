import Foundation
import ProvisioningSDK

/// A ``SecretStore`` in memory that records every removal, for tests that check what the
/// SDK leaves behind in the shared Keychain. It refuses keys and sizes as every store does
/// (``SecretStoreRules``), so a test on it cannot pass with a key the real stores refuse.
public final class MemorySecretStore: SecretStore {
    private let secrets = Locked<[String: Data]>([:])
    private let removals = Locked<[String]>([])

    /// An empty store.
    public init() {}

    /// The keys removed so far, in order (one entry per `removeSecret` call).
    public var removedKeys: [String] { removals.current }

    /// The secret under `key`, or nil.
    public func secret(for key: String) throws -> Data? {
        try SecretStoreRules.validate(key: key)
        return secrets.withValue { $0[key] }
    }

    /// Stores `secret` under `key`.
    public func setSecret(_ secret: Data, for key: String) throws {
        try SecretStoreRules.validate(key: key)
        try SecretStoreRules.validate(secret: secret)
        secrets.withValue { $0[key] = secret }
    }

    /// Removes the secret under `key` and records the call.
    public func removeSecret(for key: String) throws {
        try SecretStoreRules.validate(key: key)
        secrets.withValue { $0[key] = nil }
        removals.withValue { $0.append(key) }
    }

    /// Removes every secret.
    public func removeAllSecrets() throws {
        secrets.withValue { $0.removeAll() }
    }
}
