import Foundation
import ProvisioningModels
import TMPTestSupport
import Testing
import TokenPlatform

/// The file store's read-only connections: they see the schema migrated after they opened,
/// every committed write at once, and more concurrent reads than connections still succeed.
@Suite("SQLite read connections")
struct SQLiteReadConnectionTests {
    @Test func readsSeeMigrationsAndCommitsAndNeverRunOutOfConnections() async throws {
        let file = TemporarySQLiteFile("pushprov-readers")
        defer { file.remove() }
        let path = file.path
        // The read connections open before the schema exists.
        let store = try SQLiteStore(path: path)
        try await store.migrate()
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let card = CardRecord(
            externalCardId: "c1", userId: "alice", encryptedPAN: "v1.k.AAAA", panLookupHash: "hash-c1", panLast4: "1111", panUniqueReference: "PUR-c1",
            expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold", artId: nil, status: .active, createdAt: now, updatedAt: now
        )
        _ = try await store.putCard(card, audit: AuditEntry(at: now, actor: "test", action: "card.create", subject: "card:c1", detail: ""))
        #expect(try await store.card(externalCardId: "c1")?.status == .active)

        // Far more concurrent reads than read connections: every one answers.
        let found = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<200 { group.addTask { try await store.card(externalCardId: "c1") != nil } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(found == 200)

        // A committed change is visible to the very next read.
        for (index, status) in [CardStatus.blocked, .active, .blocked].enumerated() {
            _ = try await store.setCardStatus(externalCardId: "c1", status: status, at: now + Double(index + 1)) { previous in
                AuditEntry(at: now + Double(index + 1), actor: "test", action: "card.status", subject: "card:c1", detail: "\(previous.rawValue) -> \(status.rawValue)")
            }
            #expect(try await store.card(externalCardId: "c1")?.status == status)
        }
    }

    /// GRDB's WAL set-up leaves `synchronous = NORMAL`; the store raises its writer to FULL so
    /// an answered write survives a power cut, on a new file and on reopening an existing one.
    @Test func theWriterSyncsEveryCommit() async throws {
        let file = TemporarySQLiteFile("pushprov-sync")
        defer { file.remove() }
        let store = try SQLiteStore(path: file.path)
        try await store.migrate()
        #expect(try store.writerSynchronousLevel() == 2)
        let reopened = try SQLiteStore(path: file.path)
        #expect(try reopened.writerSynchronousLevel() == 2)
    }
}
