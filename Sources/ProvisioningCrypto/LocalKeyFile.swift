import Crypto
import Foundation
import ProvisioningModels

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The keys an embedded (non-production) run generates once and keeps in its data directory.
public struct LocalKeys: Sendable {
    /// The PAN vault's keys.
    public var panVault: PANVaultKeys
    /// Activation-data signing keys, newest first; the first signs, all verify.
    public var activationSigningKeys: [SigningKey]

    /// Assembles a key set.
    public init(panVault: PANVaultKeys, activationSigningKeys: [SigningKey]) {
        self.panVault = panVault
        self.activationSigningKeys = activationSigningKeys
    }

    /// A fresh key set.
    public static func generate() -> LocalKeys {
        LocalKeys(panVault: .generate(), activationSigningKeys: [.generate()])
    }
}

/// Reads and writes ``LocalKeys`` as a JSON file readable by its owner only (mode 0600).
///
/// ``loadOrCreate(at:)`` generates the file on first use and reuses it afterwards. A file
/// that others can read is refused rather than used, as ssh does with private keys.
public enum LocalKeyFile {
    /// Loads the key file at `path`, creating it with fresh keys if it does not exist.
    ///
    /// Creation is atomic: the keys are written to a temporary file with mode 0600 and linked
    /// into place, so a concurrent starter either wins or reads the winner's complete file.
    public static func loadOrCreate(at path: String) throws -> (keys: LocalKeys, created: Bool) {
        if FileManager.default.fileExists(atPath: path) {
            return (try load(at: path), false)
        }
        let keys = LocalKeys.generate()
        guard try createOwnerOnlyFileAtomically(encode(keys), at: path) else { return (try load(at: path), false) }
        return (keys, true)
    }

    /// Creates the owner-only (0600) file `path` holding `data`, whole or not at all: the bytes
    /// go to a temporary file that is then linked into place, so a concurrent starter reads
    /// either nothing or the complete file, and a process killed halfway leaves no partial
    /// file behind. Returns false, writing nothing, when `path` already exists.
    public static func createOwnerOnlyFileAtomically(_ data: Data, at path: String) throws -> Bool {
        // A random name: a process killed between creating and removing it (in a container,
        // always the same pid) must not block every later start.
        let temporary = path + ".\(UInt64.random(in: 0...UInt64.max)).tmp"
        try createOwnerOnlyFile(data, at: temporary)
        defer { unlink(temporary) }
        if link(temporary, path) != 0 {
            if errno == EEXIST { return false }
            throw KeyConfigurationError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        // The file's bytes were synced before the link; the directory entry that names it is
        // synced now, so a power cut cannot leave the keys written and their name lost (the
        // next start would make new keys that read none of the stored card numbers).
        unlink(temporary)
        syncDirectory(containing: path)
        return true
    }

    /// Syncs the directory holding `path` (its entries), as far as the file system allows:
    /// one that cannot sync a directory is left as it is.
    static func syncDirectory(containing path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let descriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }

    /// Loads the key file at `path`.
    ///
    /// - Throws: ``KeyConfigurationError`` when the file is missing, readable by group or
    ///   others, or not a valid key file.
    public static func load(at path: String) throws -> LocalKeys {
        try decode(readOwnerOnlyFile(at: path), path: path)
    }

    /// Reads a secret file, refusing one that group or others can read or write, or that
    /// belongs to a user other than this process's or root.
    ///
    /// - Throws: ``KeyConfigurationError`` naming the file and, for loose permissions, the fix.
    /// - Parameter kind: What the file is, for the messages ("key file", "secrets file").
    public static func readOwnerOnlyFile(at path: String, kind: String = "key file") throws -> Data {
        // The mode is checked on the file opened, and the bytes read from it: a file swapped in
        // at the path between a check by name and a read by name is never read. (Symbolic
        // links are followed: Kubernetes mounts secrets as links.) Opened without blocking, so
        // a FIFO at the path is refused below instead of holding the start for a writer.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw KeyConfigurationError("cannot read \(kind) \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw KeyConfigurationError("cannot read \(kind) \(path): \(String(cString: strerror(errno)))")
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw KeyConfigurationError("\(kind) \(path) is not a regular file")
        }
        // Its owner can replace the keys (a PAN key of theirs, an activation key that signs
        // for any card): only this process's user or root may own it, as ssh asks of its keys.
        guard status.st_uid == geteuid() || status.st_uid == 0 else {
            throw KeyConfigurationError("\(kind) \(path) belongs to user id \(status.st_uid), neither this process's user (\(geteuid())) nor root; whoever owns it can replace the keys: chown it")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw KeyConfigurationError("\(kind) \(path) has mode \(String(mode, radix: 8)); it must be readable by its owner only (chmod 600 \(path))")
        }
        // Key files are a few kilobytes; a larger one is not a key file.
        guard status.st_size <= maximumFileSize else {
            throw KeyConfigurationError("\(kind) \(path) is larger than \(maximumFileSize) bytes")
        }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { break }
            guard count > 0 else {
                if errno == EINTR { continue }
                throw KeyConfigurationError("cannot read \(kind) \(path): \(String(cString: strerror(errno)))")
            }
            data.append(contentsOf: buffer[..<count])
            guard data.count <= maximumFileSize else {
                throw KeyConfigurationError("\(kind) \(path) is larger than \(maximumFileSize) bytes")
            }
        }
        return data
    }

    /// The largest secret file read (key files and `secrets.json` are a few kilobytes).
    static let maximumFileSize = 1 << 20

    private struct Stored: Codable {
        struct StoredSigningKey: Codable {
            var id: String
            var privateKey: String
        }
        var version: Int
        var panEncryptionKeys: [String: String]
        var panEncryptionCurrentKeyId: String
        var panLookupKey: String
        var activationSigningKeys: [StoredSigningKey]
    }

    static func encode(_ keys: LocalKeys) throws -> Data {
        let stored = Stored(
            version: 1,
            panEncryptionKeys: keys.panVault.encryptionKeys.mapValues { $0.withUnsafeBytes { Data($0).base64EncodedString() } },
            panEncryptionCurrentKeyId: keys.panVault.currentEncryptionKeyID,
            panLookupKey: keys.panVault.lookupKey.withUnsafeBytes { Data($0).base64EncodedString() },
            activationSigningKeys: keys.activationSigningKeys.map {
                .init(id: $0.id, privateKey: $0.privateKey.rawRepresentation.base64EncodedString())
            }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(stored)
    }

    static func decode(_ data: Data, path: String) throws -> LocalKeys {
        guard let stored = try? JSONDecoder().decode(Stored.self, from: data), stored.version == 1 else {
            throw KeyConfigurationError("key file \(path) is not a version-1 pushprov key file")
        }
        func key(_ base64: String, _ name: String) throws -> SymmetricKey {
            guard let bytes = Data(base64Encoded: base64) else {
                throw KeyConfigurationError("key file \(path): \(name) is not base64")
            }
            return SymmetricKey(data: bytes)
        }
        var encryptionKeys: [String: SymmetricKey] = [:]
        for (id, value) in stored.panEncryptionKeys { encryptionKeys[id] = try key(value, "PAN encryption key \(id)") }
        let vault = try PANVaultKeys(
            encryptionKeys: encryptionKeys,
            currentEncryptionKeyID: stored.panEncryptionCurrentKeyId,
            lookupKey: key(stored.panLookupKey, "PAN lookup key")
        )
        let signingKeys = try stored.activationSigningKeys.map { entry in
            guard let raw = Data(base64Encoded: entry.privateKey), let privateKey = try? P256.Signing.PrivateKey(rawRepresentation: raw) else {
                throw KeyConfigurationError("key file \(path): activation signing key \(entry.id) is not a P-256 private key")
            }
            return SigningKey(id: entry.id, privateKey: privateKey)
        }
        guard !signingKeys.isEmpty else {
            throw KeyConfigurationError("key file \(path) holds no activation signing key")
        }
        // The token service finds a key by its id in the published JWKS: two keys under one id
        // (a rotation done by hand) would have it check signatures against the wrong one.
        var ids = Set<String>()
        for key in signingKeys {
            guard CardIdentifier.isValid(key.id) else {
                throw KeyConfigurationError("key file \(path): activation signing key id \"\(key.id)\" must be 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-'")
            }
            guard ids.insert(key.id).inserted else {
                throw KeyConfigurationError("key file \(path): activation signing key id \(key.id) appears twice; give each key its own id")
            }
        }
        return LocalKeys(panVault: vault, activationSigningKeys: signingKeys)
    }

    /// Writes `data` to a new file created with mode 0600 (never briefly wider).
    ///
    /// - Throws: ``KeyConfigurationError`` if the file already exists or cannot be written.
    public static func createOwnerOnlyFile(_ data: Data, at path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw KeyConfigurationError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(descriptor) == 0 else {
            unlink(path)
            throw KeyConfigurationError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
