import Crypto
import Foundation
import GRDB
import ProvisioningCrypto
import ProvisioningModels
import Testing
import TokenPlatform

@Suite("pushprov vault reencrypt", .serialized)
struct VaultCommandTests {
    @Test func aRotationEndsWithEveryCardUnderTheNewKeyAndTheOldKeyRemovable() async throws {
        let path = MigrateCommandTests.temporaryPath("tmp.sqlite")
        defer { MigrateCommandTests.removeTemporary(path) }
        let (keyFile, json) = try await Self.threeCardsUnderAnOldKey(path)

        // A dry run with a key file of another lookup key stops as the run would.
        var otherLookup = json
        otherLookup["panLookupKey"] = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
        let otherKeyFile = ((path as NSString).deletingLastPathComponent as NSString).appendingPathComponent("other-keys.json")
        try LocalKeyFile.createOwnerOnlyFile(try JSONSerialization.data(withJSONObject: otherLookup), at: otherKeyFile)
        let wrong = try await CLI.run(["vault", "reencrypt", "--dry-run", "--database", path, "--key-file", otherKeyFile])
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("the dry run found what would stop the re-encryption (nothing changed): the key file's lookup key is not the one card c0 was indexed with"), "\(wrong.stderr)")

        let dry = try await CLI.run(["vault", "reencrypt", "--dry-run", "--database", path, "--key-file", keyFile])
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout == "database \(path)\n3 cards under keys other than the current key pan-new would be encrypted again\n")
        let run = try await CLI.run(["vault", "reencrypt", "--batch-size", "2", "--database", path], environment: ["PUSHPROV_KEY_FILE": keyFile])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.split(separator: "\n") == [
            "database \(path)",
            "encrypting 3 cards again under key pan-new",
            "encrypted 3 cards again under key pan-new",
            "no card is left under another key: keys other than pan-new can leave the key file once every server has restarted with it",
        ])
        let reread = try SQLiteStore(path: path)
        let after = try LocalKeyFile.load(at: keyFile).panVault
        for index in 0..<3 {
            let card = try #require(try await reread.card(externalCardId: "c\(index)"))
            let stored = try #require(EncryptedPAN(serialized: card.encryptedPAN))
            #expect(stored.keyID == "pan-new")
            #expect(throws: Never.self) { try PANVault(keys: after).decrypt(stored, cardID: "c\(index)") }
        }
        await reread.close()
        let again = try await CLI.run(["vault", "reencrypt", "--database", path, "--key-file", keyFile])
        #expect(again.stdout == "database \(path)\n0 cards under keys other than the current key pan-new\n")
        #expect(!(run.stdout + run.stderr + dry.stdout).contains("4111"))
    }

    /// A card stored meanwhile under the old key by a server with an older key file is left
    /// under it: the run says so and exits 3, so a script that removes the old key when the
    /// command succeeds does not lose that card's number. (Before, it exited 0.)
    @Test func aRunThatLeavesCardsUnderAnotherKeyExitsThree() async throws {
        let path = MigrateCommandTests.temporaryPath("tmp.sqlite")
        defer { MigrateCommandTests.removeTemporary(path) }
        let (keyFile, _) = try await Self.threeCardsUnderAnOldKey(path)
        // Stands in for that server: c1's new value never lands, as when it is replaced meanwhile.
        let database = try DatabaseQueue(path: path)
        try await database.write { try $0.execute(sql: "CREATE TRIGGER hold BEFORE UPDATE OF encrypted_pan ON card WHEN OLD.external_card_id = 'c1' BEGIN SELECT RAISE(IGNORE); END") }
        try database.close()
        let run = try await CLI.run(["vault", "reencrypt", "--database", path, "--key-file", keyFile])
        #expect(run.status == 3, "\(run.stdout) \(run.stderr)")
        #expect(run.stdout.split(separator: "\n").last == "1 card still under other keys (stored meanwhile by a server with an older key file?): run it again", "\(run.stdout)")
        #expect(run.stderr.isEmpty, "\(run.stderr)")
    }

    /// A migrated SQLite database at `path` with three cards under the key file's first PAN
    /// key, and that key file (beside it) given a new current key `pan-new`: its path and JSON.
    static func threeCardsUnderAnOldKey(_ path: String) async throws -> (String, [String: Any]) {
        let migrated = try await CLI.run(["migrate", "--database", path])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        let keyFile = ((path as NSString).deletingLastPathComponent as NSString).appendingPathComponent("keys.json")
        let original = try LocalKeyFile.loadOrCreate(at: keyFile).keys
        // Three cards stored by a server on the original key file.
        let before = PANVault(keys: original.panVault)
        let store = try SQLiteStore(path: path)
        for (index, digits) in ["4111111111111111", "5555555555554444", "378282246310005"].enumerated() {
            let pan = try PrimaryAccountNumber(digits)
            let id = "c\(index)"
            let card = CardRecord(
                externalCardId: id, userId: "alice", encryptedPAN: try before.encrypt(pan, cardID: id).serialized, panLookupHash: before.lookupHash(pan),
                panLast4: pan.last4, panUniqueReference: "PUR-\(id)", expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa,
                productTitle: "Gold", artId: nil, status: .active, createdAt: Date(), updatedAt: Date()
            )
            _ = try await store.putCard(card, audit: AuditEntry(at: Date(), actor: "test", action: "card.create", subject: "card:\(id)", detail: ""))
        }
        await store.close()
        // The key file gets a new current key beside the old one.
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: keyFile))) as? [String: Any])
        var encryption = try #require(json["panEncryptionKeys"] as? [String: String])
        encryption["pan-new"] = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
        json["panEncryptionKeys"] = encryption
        json["panEncryptionCurrentKeyId"] = "pan-new"
        try FileManager.default.removeItem(atPath: keyFile)
        try LocalKeyFile.createOwnerOnlyFile(try JSONSerialization.data(withJSONObject: json), at: keyFile)

        return (keyFile, json)
    }

    @Test func aMissingKeyFileOrABadBatchSizeIsOneLine() async throws {
        let path = MigrateCommandTests.temporaryPath("tmp.sqlite")
        defer { MigrateCommandTests.removeTemporary(path) }
        let missing = try await CLI.run(["vault", "reencrypt", "--database", path, "--key-file", path + ".keys"])
        #expect(missing.status != 0)
        #expect(missing.stderr.hasPrefix("Error: cannot read key file \(path).keys: No such file or directory"), "\(missing.stderr)")
        let batch = try await CLI.run(["vault", "reencrypt", "--batch-size", "0", "--database", path])
        #expect(batch.status != 0)
        #expect(batch.stderr.contains("--batch-size must be from 1 to 10000 (got 0)"), "\(batch.stderr)")
    }

    /// An empty --data-dir would be the current directory, taken without the data directory's
    /// checks (a key file ./keys.json in a directory anyone may write): refused.
    @Test func anEmptyDataDirectoryFlagIsRefused() async throws {
        for arguments in [["vault", "reencrypt", "--dry-run", "--data-dir", ""], ["dev-token", "--user", "alice", "--data-dir", ""], ["prune", "--keep-days", "400", "--data-dir", ""], ["migrate", "--data-dir", ""], ["serve", "--data-dir", ""]] {
            let refused = try await CLI.run(arguments)
            #expect(refused.status != 0, "\(arguments)")
            #expect(refused.stderr.contains("--data-dir must not be empty"), "\(arguments): \(refused.stderr)")
            #expect(refused.stdout.isEmpty, "\(arguments): \(refused.stdout)")
        }
    }

    /// An empty PUSHPROV_KEY_FILE or PUSHPROV_DATA_DIR (an env file's `NAME=`) counts as unset,
    /// as `serve` and `dev-token` take it: the key file is then found in the data directory.
    @Test func anEmptyKeyFileOrDataDirectoryVariableCountsAsUnset() async throws {
        let path = MigrateCommandTests.temporaryPath("tmp.sqlite")
        defer { MigrateCommandTests.removeTemporary(path) }
        let directory = (path as NSString).deletingLastPathComponent
        let migrated = try await CLI.run(["migrate", "--database", path])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        _ = try LocalKeyFile.loadOrCreate(at: (directory as NSString).appendingPathComponent("keys.json"))
        let emptyKeyFile = try await CLI.run(["vault", "reencrypt", "--dry-run", "--database", path, "--data-dir", directory], environment: ["PUSHPROV_KEY_FILE": ""])
        #expect(emptyKeyFile.status == 0, "\(emptyKeyFile.stderr)")
        #expect(emptyKeyFile.stdout.hasPrefix("database \(path)\n0 cards under keys other than the current key "), "\(emptyKeyFile.stdout)")
        // With no --data-dir, an empty PUSHPROV_DATA_DIR leaves the default ./.pushprov (not
        // "", which made the key file ./keys.json).
        try FileManager.default.createDirectory(atPath: directory + "/.pushprov", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try FileManager.default.moveItem(atPath: directory + "/keys.json", toPath: directory + "/.pushprov/keys.json")
        let emptyDirectory = try await CLI.run(["vault", "reencrypt", "--dry-run", "--database", path], environment: ["PUSHPROV_DATA_DIR": ""], currentDirectory: directory)
        #expect(emptyDirectory.status == 0, "\(emptyDirectory.stderr)")
        #expect(emptyDirectory.stdout.hasPrefix("database \(path)\n0 cards under keys other than the current key "), "\(emptyDirectory.stdout)")
    }

    /// `vault reencrypt` and `dev-token` read a file of the data directory (the key file,
    /// `secrets.json`), so they refuse a directory every user can write, as `serve` does:
    /// anyone could have put their own file there.
    @Test func aDataDirectoryEveryUserCanWriteIsRefusedByTheCommandsThatReadFromIt() async throws {
        let path = MigrateCommandTests.temporaryPath("tmp.sqlite")
        defer { MigrateCommandTests.removeTemporary(path) }
        let directory = (path as NSString).deletingLastPathComponent
        #expect(try await CLI.run(["migrate", "--database", path]).status == 0)
        _ = try LocalKeyFile.loadOrCreate(at: (directory as NSString).appendingPathComponent("keys.json"))
        _ = try EmbeddedSecrets.loadOrCreate(at: (directory as NSString).appendingPathComponent("secrets.json"))
        #expect(try await CLI.run(["vault", "reencrypt", "--dry-run", "--database", path, "--data-dir", directory]).status == 0)
        #expect(try await CLI.run(["dev-token", "--user", "alice", "--data-dir", directory]).status == 0)
        // The server's own rule for user ids: no token is made that it would refuse.
        for user in ["al\u{202E}ecila", "alice\u{2028}", String(repeating: "a", count: 129)] {
            let refused = try await CLI.run(["dev-token", "--user", user, "--data-dir", directory])
            #expect(refused.status != 0 && refused.stdout.isEmpty, "\(user.debugDescription)")
            #expect(refused.stderr.contains("--user must be 1 to 128 bytes without control characters, line separators or bidirectional-text controls"), "\(refused.stderr)")
        }
        #expect(try await CLI.run(["dev-token", "--user", "\u{05D9}\u{05D5}\u{200F}", "--data-dir", directory]).status == 0)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory)
        let refusal = "Error: data directory \(directory) can be written by every user (mode 777)"
        let vault = try await CLI.run(["vault", "reencrypt", "--dry-run", "--database", path, "--data-dir", directory])
        #expect(vault.status != 0 && vault.stderr.hasPrefix(refusal), "\(vault.stderr)")
        let token = try await CLI.run(["dev-token", "--user", "alice", "--data-dir", directory])
        #expect(token.status != 0 && token.stderr.hasPrefix(refusal) && token.stdout.isEmpty, "\(token.stderr)")
        // A key file named outright is not the data directory's.
        let named = try await CLI.run(["vault", "reencrypt", "--dry-run", "--database", path, "--data-dir", directory, "--key-file", (directory as NSString).appendingPathComponent("keys.json")])
        #expect(named.status == 0, "\(named.stderr)")
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory)
    }
}
