#if canImport(Security)
import Foundation
import ProvisioningSDK
import Security

/// The ``SecretStore`` of an iOS app and its Wallet extensions: generic-password items of
/// one service in a Keychain access group the three targets share, readable after the first
/// unlock and never leaving this device (no backup, no iCloud Keychain). Keys and sizes follow
/// ``SecretStoreRules``, as every store's do.
public struct KeychainSecretStore: SecretStore {
    /// The service the items belong to.
    public let service: String
    /// The shared Keychain access group (e.g. `TEAMID.com.bank.app.wallet`); nil for the
    /// target's default group, which the extensions cannot read.
    public let accessGroup: String?
    /// On macOS, whether the items live in the data-protection Keychain, which iOS has alone:
    /// what access groups and `ThisDeviceOnly` need there, and which a process may use only
    /// with a `keychain-access-groups` or application-identifier entitlement (an unsigned
    /// test run gets `errSecMissingEntitlement`). Off by default, the login keychain; a macOS
    /// app sharing the store with extensions sets it. Other platforms ignore it.
    public let usesDataProtectionKeychain: Bool

    /// A store of `service` items in `accessGroup`.
    public init(service: String = "PushProvisioning.WalletExtension", accessGroup: String?, usesDataProtectionKeychain: Bool = false) {
        self.service = service
        self.accessGroup = accessGroup
        self.usesDataProtectionKeychain = usesDataProtectionKeychain
    }

    /// Implements ``SecretStore/secret(for:)``.
    public func secret(for key: String) throws -> Data? {
        try SecretStoreRules.validate(key: key)
        var query = baseQuery(account: key)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw Self.failure("read", key, status) }
        return item as? Data
    }

    /// Implements ``SecretStore/setSecret(_:for:)``.
    public func setSecret(_ secret: Data, for key: String) throws {
        try SecretStoreRules.validate(key: key)
        try SecretStoreRules.validate(secret: secret)
        let attributes: [String: Any] = [
            kSecValueData as String: secret,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        let updated = SecItemUpdate(baseQuery(account: key) as CFDictionary, attributes as CFDictionary)
        if updated == errSecSuccess { return }
        guard updated == errSecItemNotFound else { throw Self.failure("update", key, updated) }
        let added = SecItemAdd(baseQuery(account: key).merging(attributes) { $1 } as CFDictionary, nil)
        guard added == errSecSuccess else { throw Self.failure("add", key, added) }
    }

    /// Implements ``SecretStore/removeSecret(for:)``.
    public func removeSecret(for key: String) throws {
        try SecretStoreRules.validate(key: key)
        let status = SecItemDelete(baseQuery(account: key) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw Self.failure("remove", key, status) }
    }

    /// Implements ``SecretStore/removeAllSecrets()``.
    public func removeAllSecrets() throws {
        let status = SecItemDelete(baseQuery(account: nil) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw Self.failure("remove all", "*", status) }
    }

    private func baseQuery(account: String?) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
        ]
        if usesDataProtectionKeychain { query[kSecUseDataProtectionKeychain as String] = true }
        if let account { query[kSecAttrAccount as String] = account }
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }

    private static func failure(_ operation: String, _ key: String, _ status: OSStatus) -> SharedStorageError {
        SharedStorageError(.io, "Keychain \(operation) of secret \(key) failed with OSStatus \(status)")
    }
}
#endif
