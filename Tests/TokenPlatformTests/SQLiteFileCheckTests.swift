import Foundation
import Logging
import Testing
@testable import TokenPlatform

/// ``DatabaseConfiguration/checkSQLiteFiles(at:user:logger:)``: the owner rule, which the CLI
/// tests cannot reach without a second user (they cover the modes).
@Suite("SQLite database files: owner")
struct SQLiteFileCheckTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    /// A directory or a device named as the database is refused as what it is, not for its
    /// mode (whose advice, `chmod 600`, would break it).
    @Test func aDirectoryOrADeviceIsRefusedAsNoDatabaseFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-sqlite-kind-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for (path, kind) in [(directory, "a directory"), ("/dev/null", "not a regular file")] {
            do {
                try DatabaseConfiguration.checkSQLiteFiles(at: path, logger: Self.logger)
                Issue.record("\(path) was accepted as a database file")
            } catch {
                #expect(error.message == "database file \(path) is \(kind); give the path of a SQLite database file (it is created if missing)")
            }
        }
    }

    @Test func aFileOfAnotherUserIsRefusedOneOfRootOrTheUsersOwnIsNot() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-sqlite-owner-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/db.sqlite"
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]))
        var status = stat()
        try #require(stat(path, &status) == 0)
        let owner = status.st_uid
        // Checked as another user (not root) than the file's owner.
        let other: uid_t = owner == 0 ? 4242 : owner + 1
        if owner != 0 {
            #expect(throws: ConfigurationError.self) { try DatabaseConfiguration.checkSQLiteFiles(at: path, user: other, logger: Self.logger) }
            do {
                try DatabaseConfiguration.checkSQLiteFiles(at: path, user: other, logger: Self.logger)
            } catch {
                #expect(error.message == "database file \(path) belongs to user id \(owner), neither this process's user (\(other)) nor root; whoever owns it can read and change the stored cards: chown it, or run as its owner")
            }
        } else {
            // Root owns it: allowed for anyone, as for the key file.
            #expect(throws: Never.self) { try DatabaseConfiguration.checkSQLiteFiles(at: path, user: other, logger: Self.logger) }
        }
        #expect(throws: Never.self) { try DatabaseConfiguration.checkSQLiteFiles(at: path, user: owner, logger: Self.logger) }
        // A -wal of another user is refused the same way (only root can make one here).
        if geteuid() == 0 {
            #expect(FileManager.default.createFile(atPath: path + "-wal", contents: nil, attributes: [.posixPermissions: 0o600]))
            #expect(chown(path + "-wal", 4242, 4242) == 0)
            do {
                try DatabaseConfiguration.checkSQLiteFiles(at: path, user: 0, logger: Self.logger)
                Issue.record("a -wal of user 4242 was accepted")
            } catch {
                #expect(error.message == "database file \(path)-wal belongs to user id 4242, neither this process's user (0) nor root; whoever owns it can read and change the stored cards: chown it, or run as its owner")
            }
        }
    }
}
