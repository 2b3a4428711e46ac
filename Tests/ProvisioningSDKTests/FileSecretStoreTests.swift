import Foundation
import ProvisioningSDK
import SDKTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The 0600-file secret store: created owner-only, replaced atomically, loose files refused.
@Suite("File secret store")
struct FileSecretStoreTests {
    func mode(_ path: String) -> mode_t {
        var status = stat()
        _ = lstat(path, &status)
        return status.st_mode & 0o777
    }

    @Test func aSecretIsWrittenOwnerOnlyAndReadBack() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let store = FileSecretStore(directory: folder.url.appendingPathComponent("secrets"))
        try store.setSecret(Data("s3cret".utf8), for: "session")
        #expect(try store.secret(for: "session") == Data("s3cret".utf8))
        #expect(mode(store.directory.appendingPathComponent("session").path) == 0o600)
        #expect(mode(store.directory.path) == 0o700)
        try store.setSecret(Data("second".utf8), for: "session")
        #expect(try store.secret(for: "session") == Data("second".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory.path) == ["session"])
    }

    @Test func aMissingSecretIsNil() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        #expect(try FileSecretStore(directory: folder.url).secret(for: "session") == nil)
    }

    @Test func aFileOthersCanReadIsRefusedNotRead() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let store = FileSecretStore(directory: folder.url.appendingPathComponent("secrets"))
        try store.setSecret(Data("s3cret".utf8), for: "session")
        let path = store.directory.appendingPathComponent("session").path
        chmod(path, 0o644)
        do {
            _ = try store.secret(for: "session")
            Issue.record("a world-readable secret was read")
        } catch let error as SharedStorageError {
            #expect(error.code == .insecureFile)
            #expect(error.message.contains("644"))
            #expect(!error.message.contains("s3cret"))
        }
    }

    @Test func aSymbolicLinkIsRefused() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let store = FileSecretStore(directory: folder.url.appendingPathComponent("secrets"))
        try store.setSecret(Data("s3cret".utf8), for: "real")
        symlink(store.directory.appendingPathComponent("real").path, store.directory.appendingPathComponent("session").path)
        #expect(throws: SharedStorageError.self) { try store.secret(for: "session") }
    }

    @Test func aFolderOthersCanWriteIsRefusedForWriting() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = folder.url.appendingPathComponent("shared")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        chmod(directory.path, 0o777)
        let store = FileSecretStore(directory: directory)
        #expect { try store.setSecret(Data("s3cret".utf8), for: "session") } throws: { ($0 as? SharedStorageError)?.code == .insecureFile }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test func keysThatCouldBePathsAreRefused() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let store = FileSecretStore(directory: folder.url)
        for key in ["", "../escape", ".hidden", "a/b", String(repeating: "k", count: 65)] {
            #expect(throws: SharedStorageError.self, "\(key)") { try store.setSecret(Data("x".utf8), for: key) }
        }
    }

    @Test func removingAllSecretsEmptiesTheStore() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let store = FileSecretStore(directory: folder.url.appendingPathComponent("secrets"))
        try store.setSecret(Data("1".utf8), for: "one")
        try store.setSecret(Data("2".utf8), for: "two")
        try store.removeSecret(for: "one")
        try store.removeSecret(for: "one")
        #expect(try store.secret(for: "one") == nil)
        try store.removeAllSecrets()
        #expect(try store.secret(for: "two") == nil)
    }

    @Test func theSessionsDescriptionNeverShowsTheToken() {
        let session = Fixtures.session(token: "eyJ.secret.token")
        #expect(!"\(session)".contains("eyJ"))
        #expect("\(session)".contains("alice"))
    }
}
