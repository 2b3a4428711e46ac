import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``SecretStore`` of one file per secret, readable by its owner only: for Linux, tests and
/// development builds (iOS apps use the Keychain store of ProvisioningPassKit).
///
/// - The folder is created with mode 0700; one that group or others may write is refused.
/// - Each secret is written to a fresh temporary file created with mode 0600 (never briefly
///   wider), flushed, then renamed over the old one: readers see the old or the new secret.
/// - A secret file that is not a plain file owned by this user, or that group or others may
///   read or write, is refused rather than read, as ssh does with private keys.
/// - Secrets are at most ``maximumSecretBytes``; errors never contain a secret.
public struct FileSecretStore: SecretStore {
    /// The largest secret stored or read (``SecretStoreRules/maximumSecretBytes``).
    public static let maximumSecretBytes = SecretStoreRules.maximumSecretBytes

    /// The folder holding the secrets; the store's own (``removeAllSecrets()`` empties it).
    public let directory: URL

    /// A store in `directory` (created on first write).
    public init(directory: URL) {
        self.directory = directory
    }

    /// Implements ``SecretStore/secret(for:)``.
    public func secret(for key: String) throws -> Data? {
        try SecretKey.validate(key)
        let path = self.path(key)
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw SharedStorageError(errno == ELOOP ? .insecureFile : .io, "cannot open secret \(key): \(Self.reason())")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw SharedStorageError(.io, "cannot inspect secret \(key): \(Self.reason())")
        }
        guard status.st_mode & 0o170000 == 0o100000, status.st_uid == getuid() else {
            throw SharedStorageError(.insecureFile, "secret \(key) is not a plain file owned by this user; remove \(path)")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw SharedStorageError(.insecureFile, "secret \(key) has mode \(String(mode, radix: 8)); it must be readable by its owner only (chmod 600 \(path))")
        }
        guard Int(status.st_size) <= Self.maximumSecretBytes else {
            throw SharedStorageError(.tooLarge, "secret \(key) is \(status.st_size) bytes; at most \(Self.maximumSecretBytes) are read")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
        let data = try handle.read(upToCount: Self.maximumSecretBytes + 1) ?? Data()
        guard data.count <= Self.maximumSecretBytes else {
            throw SharedStorageError(.tooLarge, "secret \(key) grew past \(Self.maximumSecretBytes) bytes while it was read")
        }
        return data
    }

    /// Implements ``SecretStore/setSecret(_:for:)``.
    public func setSecret(_ secret: Data, for key: String) throws {
        try SecretKey.validate(key)
        try SecretStoreRules.validate(secret: secret)
        try prepareDirectory()
        let temporary = directory.appendingPathComponent(".\(key).\(UUID().uuidString).tmp").path
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw SharedStorageError(.io, "cannot create a file for secret \(key) in \(directory.path): \(Self.reason())")
        }
        do {
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
            try handle.write(contentsOf: secret)
            try handle.synchronize()
        } catch {
            close(descriptor)
            unlink(temporary)
            throw SharedStorageError(.io, "cannot write secret \(key) in \(directory.path)")
        }
        close(descriptor)
        guard rename(temporary, path(key)) == 0 else {
            let reason = Self.reason()
            unlink(temporary)
            throw SharedStorageError(.io, "cannot replace secret \(key): \(reason)")
        }
    }

    /// Implements ``SecretStore/removeSecret(for:)``.
    public func removeSecret(for key: String) throws {
        try SecretKey.validate(key)
        guard unlink(path(key)) == 0 || errno == ENOENT else {
            throw SharedStorageError(.io, "cannot remove secret \(key): \(Self.reason())")
        }
    }

    /// Implements ``SecretStore/removeAllSecrets()``.
    public func removeAllSecrets() throws {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names {
            let path = directory.appendingPathComponent(name).path
            guard unlink(path) == 0 || errno == ENOENT else {
                throw SharedStorageError(.io, "cannot remove \(path): \(Self.reason())")
            }
        }
    }

    // MARK: Helpers

    private func path(_ key: String) -> String {
        directory.appendingPathComponent(key).path
    }

    /// Creates the folder with mode 0700, or checks that an existing one is a folder that
    /// only its owner may write to.
    private func prepareDirectory() throws {
        let path = directory.path
        if mkdir(path, 0o700) == 0 { return }
        var failure = errno
        if failure == ENOENT {
            try FileManager.default.createDirectory(at: directory.deletingLastPathComponent(), withIntermediateDirectories: true)
            if mkdir(path, 0o700) == 0 { return }
            failure = errno
        }
        guard failure == EEXIST else {
            throw SharedStorageError(.io, "cannot create \(path): \(String(cString: strerror(failure)))")
        }
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & 0o170000 == 0o040000, status.st_uid == getuid() else {
            throw SharedStorageError(.insecureFile, "\(path) is not a folder owned by this user")
        }
        guard status.st_mode & 0o022 == 0 else {
            throw SharedStorageError(.insecureFile, "\(path) has mode \(String(status.st_mode & 0o777, radix: 8)); group and others must not write to it (chmod 700 \(path))")
        }
    }

    private static func reason() -> String {
        String(cString: strerror(errno))
    }
}
