import Foundation
import ProvisioningModels
import TMPTestSupport
import Testing
import TokenPlatform

/// ``SQLiteStore/close()``: after it the database file alone holds everything (no write-ahead
/// log left to lose in a copy), a second call is harmless, and calls racing it either finish
/// or are refused as ``DatabaseUnavailable``.
@Suite("SQLite store close")
struct SQLiteStoreCloseTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func card(_ id: String) throws -> CardRecord {
        CardRecord(
            externalCardId: id, userId: "alice", encryptedPAN: "v1.k.AAAA", panLookupHash: "hash-\(id)", panLast4: "1111", panUniqueReference: "PUR-\(id)",
            expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold", artId: nil, status: .active, createdAt: now, updatedAt: now
        )
    }

    static func put(_ id: String, into store: SQLiteStore) async throws {
        _ = try await store.putCard(try card(id), audit: AuditEntry(at: now, actor: "test", action: "card.create", subject: "card:\(id)", detail: ""))
    }

    /// The database file copied alone (no -wal, no -shm beside it) and opened.
    static func copyOfTheFileAlone(_ path: String) throws -> (SQLiteStore, TemporarySQLiteFile) {
        let copy = TemporarySQLiteFile("pushprov-close-copy")
        try FileManager.default.copyItem(atPath: path, toPath: copy.path)
        return (try SQLiteStore(path: copy.path), copy)
    }

    @Test func afterCloseTheFileAloneHoldsTheDataAndTheLogIsGone() async throws {
        let file = TemporarySQLiteFile("pushprov-close")
        defer { file.remove() }
        let store = try SQLiteStore(path: file.path)
        try await store.migrate()
        for index in 0..<20 { try await Self.put("c\(index)", into: store) }
        // Reads through the store's connections and the pool's (the migrations read there).
        #expect(try await store.card(externalCardId: "c0") != nil)
        #expect(try await store.pendingMigrations().isEmpty)
        await store.close()
        // No other process has it open: the last connection to close (the writer) removed both.
        #expect(!FileManager.default.fileExists(atPath: file.path + "-wal"), "the -wal is left after close")
        #expect(!FileManager.default.fileExists(atPath: file.path + "-shm"), "the -shm is left after close")
        let (copy, copyFile) = try Self.copyOfTheFileAlone(file.path)
        defer { copyFile.remove() }
        #expect(try await copy.pendingMigrations().isEmpty)
        for index in 0..<20 { #expect(try await copy.card(externalCardId: "c\(index)") != nil, "c\(index)") }
        await copy.close()

        // Again: nothing more happens; a call now is refused, not run on a closed connection.
        await store.close()
        await #expect(throws: DatabaseUnavailable.self) { _ = try await store.card(externalCardId: "c0") }
        await #expect(throws: DatabaseUnavailable.self) { try await Self.put("late", into: store) }
        await #expect(throws: DatabaseUnavailable.self) { try await store.ping() }
    }

    @Test func callsRacingCloseFinishOrAreRefusedAndEveryAnsweredWriteIsKept() async throws {
        let file = TemporarySQLiteFile("pushprov-close-race")
        defer { file.remove() }
        let store = try SQLiteStore(path: file.path)
        try await store.migrate()
        let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for index in 0..<300 {
                group.addTask {
                    do {
                        try await Self.put("r\(index)", into: store)
                        _ = try await store.card(externalCardId: "r\(index)")
                        return ("r\(index)", true)
                    } catch is DatabaseUnavailable {
                        return ("r\(index)", false)
                    }
                }
                if index == 150 { group.addTask { await store.close(); return ("", false) } }
            }
            // Two closes at once as well: both return once the connections are closed.
            group.addTask { await store.close(); return ("", false) }
            var outcomes: [String: Bool] = [:]
            for try await (id, stored) in group where !id.isEmpty { outcomes[id] = stored }
            return outcomes
        }
        #expect(outcomes.count == 300)
        await store.close()
        let (copy, copyFile) = try Self.copyOfTheFileAlone(file.path)
        defer { copyFile.remove() }
        for (id, answered) in outcomes where answered {
            #expect(try await copy.card(externalCardId: id) != nil, "\(id) was answered stored but is not in the file")
        }
        await copy.close()
    }

    @Test func anInMemoryStoreClosesToo() async throws {
        let store = try SQLiteStore.inMemory()
        try await store.migrate()
        try await Self.put("m", into: store)
        await store.close()
        await store.close()
        await #expect(throws: DatabaseUnavailable.self) { _ = try await store.card(externalCardId: "m") }
    }
}
