import Foundation
import GRDB
import Testing
import TokenPlatform

@Suite("pushprov prune", .serialized)
struct PruneCommandTests {
    /// A migrated SQLite file with one attempt (and nothing else) recorded `daysAgo` days ago
    /// and one now.
    static func database(daysAgo: Double) async throws -> String {
        let path = MigrateCommandTests.temporaryPath("tmp.sqlite")
        let migrated = try await CLI.run(["migrate", "--database", path])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        let store = try SQLiteStore(path: path)
        for (id, at) in [("jti-old", Date().addingTimeInterval(-daysAgo * 86_400)), ("jti-new", Date())] {
            try await store.recordProvisioningAttempt(ProvisioningAttempt(activationDataId: id, externalCardId: "c1", userId: "alice", deviceType: .phone, nonceHash: "nh", leafFingerprint: "ab", createdAt: at, expiresAt: at.addingTimeInterval(600)))
        }
        await store.close()
        return path
    }

    @Test func aDryRunCountsAndARunDeletesOnlyWhatIsOlderThanTheRetention() async throws {
        let path = try await Self.database(daysAgo: 500)
        defer { MigrateCommandTests.removeTemporary(path) }
        let dry = try await CLI.run(["prune", "--keep-days", "400", "--dry-run", "--database", path])
        #expect(dry.status == 0, "\(dry.stderr)")
        let dryLines = dry.stdout.split(separator: "\n")
        #expect(dryLines.first.map(String.init) == "database \(path)", "\(dry.stdout)")
        #expect(dryLines.count == HistoryTable.allCases.count + 1)
        #expect(dryLines.contains { $0.hasPrefix("provisioning_attempt: 1 row recorded before ") && $0.hasSuffix(" would be deleted") }, "\(dry.stdout)")
        #expect(dryLines.contains { $0.hasPrefix("audit_event: 0 rows recorded before ") })

        let run = try await CLI.run(["prune", "--keep-days", "400", "--batch-size", "1", "--database", path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("provisioning_attempt: deleted 1 row recorded before "), "\(run.stdout)")
        let store = try SQLiteStore(path: path)
        #expect(try await store.provisioningAttempt(activationDataId: "jti-old") == nil)
        #expect(try await store.provisioningAttempt(activationDataId: "jti-new") != nil)
        await store.close()

        let again = try await CLI.run(["prune", "--keep-days", "400", "--database", path])
        #expect(again.stdout.contains("provisioning_attempt: deleted 0 rows"), "\(again.stdout)")
    }

    @Test func aLongRunReportsProgressEvery100000RowsOfATable() async throws {
        let path = try await Self.database(daysAgo: 500)
        defer { MigrateCommandTests.removeTemporary(path) }
        // 150,000 more old attempts, as old as the first.
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150000)
                INSERT INTO provisioning_attempt (activation_data_id, external_card_id, user_id, device_type, nonce_hash, leaf_fingerprint, created_at, expires_at)
                SELECT 'old-' || i, 'c1', 'alice', 'PHONE', 'nh', 'ab', old.created_at, old.expires_at
                FROM n, (SELECT created_at, expires_at FROM provisioning_attempt WHERE activation_data_id = 'jti-old') AS old
                """)
        }
        try queue.close()
        let run = try await CLI.run(["prune", "--keep-days", "400", "--batch-size", "50000", "--database", path])
        #expect(run.status == 0, "\(run.stderr)")
        let progress = run.stdout.split(separator: "\n").filter { $0.hasSuffix("deleted so far") }
        #expect(progress == ["provisioning_attempt: 100000 rows deleted so far"], "\(run.stdout)")
        #expect(run.stdout.contains("provisioning_attempt: deleted 150001 rows recorded before "), "\(run.stdout)")
        // The progress line comes before the totals.
        let lines = run.stdout.split(separator: "\n")
        #expect(lines.prefix(2) == ["database \(path)", "provisioning_attempt: 100000 rows deleted so far"], "\(run.stdout)")
    }

    @Test func aRetentionUnderAYearOrAnUnmigratedDatabaseIsRefusedInOneLine() async throws {
        let path = try await Self.database(daysAgo: 500)
        defer { MigrateCommandTests.removeTemporary(path) }
        let short = try await CLI.run(["prune", "--keep-days", "30", "--database", path])
        #expect(short.status != 0)
        #expect(short.stderr.contains("--keep-days must be at least 366"), "\(short.stderr)")
        #expect(short.stderr.split(separator: "\n").count == 1)
        let store = try SQLiteStore(path: path)
        #expect(try await store.provisioningAttempt(activationDataId: "jti-old") != nil, "nothing deleted")
        await store.close()

        let batch = try await CLI.run(["prune", "--keep-days", "400", "--batch-size", "0", "--database", path])
        #expect(batch.status != 0 && batch.stderr.contains("--batch-size must be from 1 to 100000"), "\(batch.stderr)")
        // A negative number is refused for its value, not taken for a missing one.
        let negative = try await CLI.run(["prune", "--keep-days", "-5", "--database", path])
        #expect(negative.status != 0 && negative.stderr.contains("--keep-days must be at least 366"), "\(negative.stderr)")
        let negativeBatch = try await CLI.run(["prune", "--keep-days", "400", "--batch-size", "-1", "--database", path])
        #expect(negativeBatch.status != 0 && negativeBatch.stderr.contains("--batch-size must be from 1 to 100000"), "\(negativeBatch.stderr)")

        // A mistyped path is not created.
        let missing = MigrateCommandTests.temporaryPath("missing.sqlite")
        defer { MigrateCommandTests.removeTemporary(missing) }
        let none = try await CLI.run(["prune", "--keep-days", "400", "--database", missing])
        #expect(none.status != 0)
        #expect(none.stderr == "Error: database \(missing) does not exist\n", "\(none.stderr)")
        #expect(!FileManager.default.fileExists(atPath: missing))

        // An existing database with pending migrations is refused, saying what to do.
        let unmigratedPath = MigrateCommandTests.temporaryPath("unmigrated.sqlite")
        defer { MigrateCommandTests.removeTemporary(unmigratedPath) }
        try FileManager.default.createDirectory(atPath: (unmigratedPath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        // Owner-only, as the commands require of a database file.
        #expect(FileManager.default.createFile(atPath: unmigratedPath, contents: nil, attributes: [.posixPermissions: 0o600]))
        let empty = try SQLiteStore(path: unmigratedPath)
        await empty.close()
        let unmigrated = try await CLI.run(["prune", "--keep-days", "400", "--database", unmigratedPath])
        #expect(unmigrated.status != 0)
        #expect(unmigrated.stderr.contains("lacks migrations v1, v2, v3, v4, v5, v6, v7, v8, v9, v10; run `pushprov migrate --database …` first\n"), "\(unmigrated.stderr)")
    }
}
