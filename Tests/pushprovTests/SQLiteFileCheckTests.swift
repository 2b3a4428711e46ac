import Foundation
import ProvisioningCrypto
import Testing
import TokenPlatform

/// Every command that opens a SQLite database refuses files others can read or write, the same
/// way, whether the file is new or the operator's.
@Suite("pushprov and the SQLite database files' mode", .serialized)
struct SQLiteFileCheckTests {
    /// A migrated database (0600, as `migrate` makes it) in a folder of its own, with a key file.
    struct Database {
        let directory: String
        var path: String { directory + "/db.sqlite" }
        var keyFile: String { directory + "/keys.json" }

        /// In `base` (default: the temporary directory).
        init(base: String? = nil) async throws {
            directory = URL(fileURLWithPath: base ?? FileManager.default.temporaryDirectory.path).appendingPathComponent("pushprov-sqlite-mode-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            let migrated = try await CLI.run(["migrate", "--database", directory + "/db.sqlite"])
            try #require(migrated.status == 0, "\(migrated.stderr)")
            _ = try LocalKeyFile.loadOrCreate(at: directory + "/keys.json")
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }

        func chmod(_ file: String, _ mode: Int) throws {
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file)
        }

        /// Each command that opens the database, as an operator runs it.
        var commands: [(String, [String], [String: String])] {
            [
                ("serve", ["serve", "--port", "0", "--data-dir", directory, "--database", path], [:]),
                ("serve --production", ["serve", "--production", "--port", "0", "--jwt-issuer", "https://id.example", "--jwt-audience", "pushprov", "--database", path], [
                    "PUSHPROV_ISSUER_API_KEY": String(repeating: "i", count: 32), "PUSHPROV_TSP_API_KEY": String(repeating: "t", count: 32),
                    "PUSHPROV_JWKS": directory + "/jwks.json", "PUSHPROV_KEY_FILE": keyFile,
                ]),
                ("migrate", ["migrate", "--database", path], [:]),
                ("prune", ["prune", "--keep-days", "400", "--dry-run", "--database", path], [:]),
                ("vault reencrypt", ["vault", "reencrypt", "--dry-run", "--key-file", keyFile, "--database", path], [:]),
            ]
        }

        func writeJWKS() throws {
            let set = JSONWebKeySet(keys: [SigningKey.generate().publicJWK])
            try LocalKeyFile.createOwnerOnlyFile(try JSONEncoder().encode(set), at: directory + "/jwks.json")
        }
    }

    @Test(arguments: ["", "-wal", "-shm"])
    func aFileGroupOrOthersCanReadIsRefusedByEveryCommand(suffix: String) async throws {
        let database = try await Database()
        defer { database.remove() }
        try database.writeJWKS()
        let file = database.path + suffix
        if !FileManager.default.fileExists(atPath: file) {
            #expect(FileManager.default.createFile(atPath: file, contents: nil))
        }
        for (mode, shown) in [(0o644, "644"), (0o660, "660"), (0o602, "602")] {
            try database.chmod(file, mode)
            for (name, arguments, environment) in database.commands {
                // Refused before anything opens: a server that started would run into the limit.
                let result = try await CLI.run(arguments, environment: environment, timeout: .seconds(30))
                #expect(result.status != 0, "\(name)")
                #expect(result.stderr.contains("database file \(file) has mode \(shown); it must be readable and writable by its owner only (chmod 600 \(file))"), "\(name): \(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count == 1, "\(name): \(result.stderr)")
            }
        }
    }

    /// A first `serve` in a new data directory with a database that will be refused (others can
    /// read it; a directory; a symbolic link to nothing; none, with `--no-migrate`) makes no
    /// data directory, keys or secrets (which it would print once) before refusing.
    @Test func serveRefusesABadDatabaseBeforeMakingItsDataDirectory() async throws {
        let database = try await Database()
        defer { database.remove() }
        try database.chmod(database.path, 0o640)
        let folder = database.directory + "/folder.sqlite"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let dangling = database.directory + "/dangling.sqlite"
        try FileManager.default.createSymbolicLink(atPath: dangling, withDestinationPath: database.directory + "/missing.sqlite")
        let missing = database.directory + "/new.sqlite"
        for (path, options, refusal) in [
            (database.path, [], "has mode 640"), (folder, [], folder),
            (dangling, [], "is a symbolic link to \(database.directory)/missing.sqlite, which does not exist"),
            (missing, ["--no-migrate"], "lacks migrations v1,"),
            (dangling, ["--no-migrate"], "is a symbolic link to \(database.directory)/missing.sqlite, which does not exist"),
        ] {
            let dataDirectory = database.directory + "/fresh-\(UUID().uuidString)"
            let result = try await CLI.run(["serve", "--port", "0", "--data-dir", dataDirectory, "--database", path] + options, timeout: .seconds(30))
            #expect(result.status != 0)
            #expect(result.stderr.contains(refusal), "\(result.stderr)")
            #expect(!result.stdout.contains("API key"), "\(result.stdout)")
            #expect(!FileManager.default.fileExists(atPath: dataDirectory), "\(path)")
        }
    }

    /// A database this user may not reach, open or create is refused in one line that names
    /// the path and what is in the way, by every command: SQLite says only "unable to open
    /// database file", Foundation gives no path, and a directory that cannot be entered made
    /// `prune` say the database did not exist.
    @Test(.enabled(if: CLI.canRunAsAnotherUser, "running as another user needs root, setpriv and a binary others can run"))
    func aDatabaseThisUserCannotUseIsRefusedNamingWhatIsInTheWay() async throws {
        // In a folder of the system's /tmp that everyone may enter: the temporary directory
        // (CI's is 0700) may be closed to the other user on the way.
        let base = "/tmp/pushprov-other-user-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: base) }
        let database = try await Database(base: base)
        defer { database.remove() }
        let user = CLI.nobody
        // serve reads its keys from its data directory first: one of nobody's own.
        let dataDirectory = database.directory + "-nobody"
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700, .ownerAccountID: user, .groupOwnerAccountID: user])
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        let commands: [(String, [String])] = [
            ("serve", ["serve", "--port", "0", "--data-dir", dataDirectory, "--database", database.path]),
            ("migrate", ["migrate", "--database", database.path]),
            ("prune", ["prune", "--keep-days", "400", "--dry-run", "--database", database.path]),
        ]
        // The database's folder is root's, 0700: nobody may not enter it.
        for (name, arguments) in commands {
            let result = try await CLI.run(arguments, timeout: .seconds(30), asUser: user)
            #expect(result.status != 0, "\(name)")
            #expect(result.stderr.contains("cannot reach the database \(database.path): this process (user id \(user)) may not enter the directory \(database.directory)"), "\(name): \(result.stderr)")
        }
        // Open to enter, but the file is root's 0600: nobody may not read it.
        try database.chmod(database.directory, 0o755)
        for (name, arguments) in commands {
            let result = try await CLI.run(arguments, timeout: .seconds(30), asUser: user)
            #expect(result.status != 0, "\(name)")
            #expect(result.stderr.contains("cannot open the database \(database.path): this process (user id \(user)) may not read and write it (owner user id 0, mode 600); run the command as its owner"), "\(name): \(result.stderr)")
        }
        // A new database in a folder nobody may not write, or under one.
        for path in [database.directory + "/new.sqlite", database.directory + "/a/b/new.sqlite"] {
            let result = try await CLI.run(["migrate", "--database", path], asUser: user)
            #expect(result.status == 1)
            #expect(result.stderr == "Error: cannot create the database \(path): this process (user id \(user)) may not write the directory \(database.directory)\n", "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: database.directory + "/a"))
        }
        // What is missing is still said to be missing.
        let missing = try await CLI.run(["prune", "--keep-days", "400", "--database", database.directory + "/missing.sqlite"], asUser: user)
        #expect(missing.stderr == "Error: database \(database.directory)/missing.sqlite does not exist\n", "\(missing.stderr)")
    }

    /// Through a symbolic link, the directory SQLite writes its -wal and -shm in is the
    /// target's: a link kept in a directory the user may not write is fine.
    @Test(.enabled(if: CLI.canRunAsAnotherUser, "running as another user needs root, setpriv and a binary others can run"))
    func aDatabaseReachedThroughASymbolicLinkIsJudgedByItsTargetsDirectory() async throws {
        let base = "/tmp/pushprov-other-user-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: base + "/links", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: base) }
        let user = CLI.nobody
        let data = base + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700, .ownerAccountID: user, .groupOwnerAccountID: user])
        let migrated = try await CLI.run(["migrate", "--database", data + "/db.sqlite"], asUser: user)
        try #require(migrated.status == 0, "\(migrated.stderr)")
        // A clean close leaves no -wal or -shm: SQLite will make them again, beside the target.
        #expect(!FileManager.default.fileExists(atPath: data + "/db.sqlite-wal"))
        try FileManager.default.createSymbolicLink(atPath: base + "/links/db.sqlite", withDestinationPath: data + "/db.sqlite")
        let pruned = try await CLI.run(["prune", "--keep-days", "400", "--dry-run", "--database", base + "/links/db.sqlite"], asUser: user)
        #expect(pruned.status == 0, "\(pruned.stderr)")
        #expect(!pruned.stderr.contains("cannot open the database"), "\(pruned.stderr)")
    }

    @Test func anOwnerOnlyFileOpensForEveryCommand() async throws {
        let database = try await Database()
        defer { database.remove() }
        // The operator's own empty file, made 0600 before the first migration.
        let own = database.directory + "/own.sqlite"
        #expect(FileManager.default.createFile(atPath: own, contents: nil, attributes: [.posixPermissions: 0o600]))
        let migrated = try await CLI.run(["migrate", "--database", own])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        for (name, arguments, _) in database.commands where !name.hasPrefix("serve") {
            let result = try await CLI.run(arguments)
            #expect(result.status == 0, "\(name): \(result.stderr)")
            #expect(result.stderr.isEmpty, "\(name): \(result.stderr)")
        }
        let server = try ServeCommandTests.Server(dataDirectory: database.directory, arguments: ["--database", database.path])
        defer { server.stopBlocking() }
        _ = try await server.port()
        #expect(await server.stop() == 0)
    }

    @Test func aDirectoryEveryoneCanWriteWithoutTheStickyBitIsWarnedOf() async throws {
        let database = try await Database()
        defer { database.remove() }
        try database.chmod(database.directory, 0o777)
        let open = try await CLI.run(["migrate", "--database", database.path])
        #expect(open.status == 0, "\(open.stderr)")
        #expect(open.stderr.contains("database directory can be written by every user, without the sticky bit"), "\(open.stderr)")
        #expect(open.stderr.contains(database.directory), "\(open.stderr)")
        try database.chmod(database.directory, 0o1777)
        let sticky = try await CLI.run(["migrate", "--database", database.path])
        #expect(sticky.status == 0, "\(sticky.stderr)")
        #expect(sticky.stderr.isEmpty, "\(sticky.stderr)")
    }
}
