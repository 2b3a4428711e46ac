import Foundation
import ProvisioningModels
import Testing
import TokenPlatform

/// History older than the retention goes; state and newer history stay (``HistoryPruning``).
@Suite("History pruning")
struct HistoryPruningTests {
    static let now = TMPStoreContractTests.now
    static func day(_ days: Double) -> Date { now.addingTimeInterval(days * 86_400) }

    /// One card with a token, and one row of every history table at each of `days` (days
    /// from `now`, negative: in the past), each made the way the server makes it.
    static func seed(_ store: any TMPStore, days: [Double]) async throws {
        let audit = { (subject: String, at: Date) in AuditEntry(at: at, actor: "test", action: "test", subject: subject, detail: "") }
        _ = try await store.putCard(try TMPStoreContractTests.card("c1"), audit: audit("card:c1", day(days.min() ?? 0)))
        for (index, offset) in days.enumerated() {
            let at = day(offset)
            let id = "jti-\(index)"
            _ = try await store.applyTokenEvent(eventId: "e-\(index)", event: .created, tokenReference: "T\(index)", audit: audit("token:T\(index)", at)) { _, _ in
                .insert(TMPStoreContractTests.token("T\(index)"))
            }
            try await store.recordProvisioningAttempt(ProvisioningAttempt(activationDataId: id, externalCardId: "c1", userId: "alice", deviceType: .phone, nonceHash: "nh", leafFingerprint: "ab", createdAt: at, expiresAt: at.addingTimeInterval(600)))
            _ = try await store.recordTokenizationDecision(TokenizationDecisionRecord(requestId: "r-\(index)", panUniqueReference: "PUR-c1", deviceType: .phone, decision: .approved, reason: "activation_data_valid", decidedAt: at), consumingActivationData: id)
        }
    }

    static func counts(_ store: any TMPStore, before cutoff: Date) async throws -> [HistoryTable: Int] {
        try await HistoryPruning(store: store).count(before: cutoff)
    }

    @Test(arguments: StoreFactory.all)
    func deletingHistoryTakesOnlyRowsOlderThanTheCutoffInBatches(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await Self.seed(store, days: [-800, -700, -500, -10, 0])
            let cutoff = Self.day(-400)
            let everything = Self.day(1)
            // Token events also write audit entries: the card's put plus one per event.
            #expect(try await Self.counts(store, before: cutoff) == [.auditEvents: 4, .provisioningAttempts: 3, .tokenizationDecisions: 3, .tokenEventIds: 3, .activationDataUses: 3])
            #expect(try await Self.counts(store, before: everything) == [.auditEvents: 6, .provisioningAttempts: 5, .tokenizationDecisions: 5, .tokenEventIds: 5, .activationDataUses: 5])
            // Batches of 2 from the start: two, then the last one (and the pass ends).
            #expect(try await store.deleteHistory(.provisioningAttempts, before: cutoff, limit: 0, after: nil) == HistoryBatch(deleted: 0, next: nil))
            let first = try await store.deleteHistory(.provisioningAttempts, before: cutoff, limit: 2, after: nil)
            #expect(first.deleted == 2 && first.next != nil)
            #expect(try await store.deleteHistory(.provisioningAttempts, before: cutoff, limit: 2, after: first.next) == HistoryBatch(deleted: 1, next: nil))
            #expect(try await store.deleteHistory(.provisioningAttempts, before: cutoff, limit: 2, after: nil) == HistoryBatch(deleted: 0, next: nil))
            #expect(try await store.provisioningAttempt(activationDataId: "jti-2") == nil)
            #expect(try await store.provisioningAttempt(activationDataId: "jti-3") != nil)
            for table in HistoryTable.allCases where table != .provisioningAttempts {
                var position: HistoryPosition?
                repeat { position = try await store.deleteHistory(table, before: cutoff, limit: 2, after: position).next } while position != nil
            }
            #expect(try await Self.counts(store, before: cutoff).values.allSatisfy { $0 == 0 })
            #expect(try await Self.counts(store, before: everything) == [.auditEvents: 2, .provisioningAttempts: 2, .tokenizationDecisions: 2, .tokenEventIds: 2, .activationDataUses: 2])
            // What remains reads as before; state is untouched.
            #expect(try await store.auditEntries(subject: "token:T3").count == 1)
            #expect(try await store.auditEntries(subject: "token:T0").isEmpty)
            #expect(try await store.tokenizationDecision(requestId: "r-4")?.reason == "activation_data_valid")
            #expect(try await store.tokenizationDecision(requestId: "r-0") == nil)
            let reuse = TokenizationDecisionRecord(requestId: "r-reuse", panUniqueReference: "PUR-c1", deviceType: .phone, decision: .approved, reason: "activation_data_valid", decidedAt: Self.now)
            #expect(try await store.recordTokenizationDecision(reuse, consumingActivationData: "jti-4") == false, "a recent use still counts")
            #expect(try await store.card(externalCardId: "c1") != nil)
            #expect(try await store.tokens(externalCardId: "c1").count == 5)
        }
    }

    @Test func theRetentionIsAtLeastAYear() throws {
        let refusal = #expect(throws: ConfigurationError.self) { try HistoryPruning.cutoff(keepingDays: 365, now: Self.now) }
        #expect(refusal?.message.contains("at least 366") == true)
        #expect(throws: ConfigurationError.self) { try HistoryPruning.cutoff(keepingDays: 36_501, now: Self.now) }
        #expect(try HistoryPruning.cutoff(keepingDays: 366, now: Self.now) == Self.day(-366))
    }

    @Test(arguments: StoreFactory.all)
    func pruningGoesThroughEveryTableABatchAtATimeAndReportsProgress(factory: StoreFactory) async throws {
        try await factory.withStore { store in try await Self.pruneInBatches(store) }
    }

    static func pruneInBatches(_ store: any TMPStore) async throws {
        try await Self.seed(store, days: [-900, -800, -700, -600, -500, 0])
        var progress: [String] = []
        let totals = try await HistoryPruning(store: store, batchSize: 2).prune(before: Self.day(-400)) { table, total in
            progress.append("\(table.rawValue) \(total)")
        }
        #expect(totals == [.auditEvents: 6, .provisioningAttempts: 5, .tokenizationDecisions: 5, .tokenEventIds: 5, .activationDataUses: 5])
        #expect(progress == [
            "audit_event 2", "audit_event 4", "audit_event 6",
            "provisioning_attempt 2", "provisioning_attempt 4", "provisioning_attempt 5",
            "tokenization_decision 2", "tokenization_decision 4", "tokenization_decision 5",
            "token_event 2", "token_event 4", "token_event 5",
            "activation_data_use 2", "activation_data_use 4", "activation_data_use 5",
        ])
        #expect(try await HistoryPruning(store: store).prune(before: Self.day(-400)).values.allSatisfy { $0 == 0 })
        #expect(try await Self.counts(store, before: Self.day(1)).values.allSatisfy { $0 == 1 })
    }

    @Test(arguments: StoreFactory.all)
    func pruningWhileAnotherConnectionWritesLosesNoNewRowAndLeavesNoOldOne(factory: StoreFactory) async throws {
        try await factory.withTwoHandles { pruner, server in
            func attempt(_ id: String, at: Date) -> ProvisioningAttempt {
                ProvisioningAttempt(activationDataId: id, externalCardId: "c1", userId: "alice", deviceType: .phone, nonceHash: "nh", leafFingerprint: "ab", createdAt: at, expiresAt: at.addingTimeInterval(600))
            }
            for index in 0..<300 {
                try await server.recordProvisioningAttempt(attempt(String(format: "old-%03d", index), at: Self.day(-500)))
            }
            // A server records new attempts while the pruner deletes in batches of 10.
            async let writes: Void = {
                for index in 0..<100 {
                    try await server.recordProvisioningAttempt(attempt(String(format: "new-%03d", index), at: Self.day(0)))
                }
            }()
            let totals = try await HistoryPruning(store: pruner, batchSize: 10).prune(before: Self.day(-400))
            try await writes
            #expect(totals[.provisioningAttempts] == 300)
            #expect(try await server.historyCount(.provisioningAttempts, before: Self.day(-400)) == 0)
            #expect(try await server.historyCount(.provisioningAttempts, before: Self.day(1)) == 100)
        }
    }

    /// The year's floor holds for every caller of the library, not only for the command's
    /// `--keep-days`: a cutoff inside it is refused and nothing is deleted.
    @Test func aCutoffInsideTheRetentionFloorIsRefusedDeletingNothing() async throws {
        try await StoreFactory.sqlite[0].withStore { store in
            let at = Date()
            try await store.recordProvisioningAttempt(ProvisioningAttempt(activationDataId: "recent", externalCardId: "c1", userId: "alice", deviceType: .phone, nonceHash: "nh", leafFingerprint: "ab", createdAt: at.addingTimeInterval(-3_600), expiresAt: at.addingTimeInterval(-3_000)))
            let refused = await #expect(throws: ConfigurationError.self) {
                try await HistoryPruning(store: store).prune(before: at, now: at)
            }
            #expect(refused?.message.contains("at least 366 days") == true, "\(String(describing: refused))")
            #expect(try await store.provisioningAttempt(activationDataId: "recent") != nil)
            // At the floor itself, it goes ahead.
            let totals = try await HistoryPruning(store: store).prune(before: at.addingTimeInterval(-366 * 86_400), now: at)
            #expect(totals[.provisioningAttempts] == 0)
        }
    }

    @Test(arguments: StoreFactory.all)
    func aRowAtTheCutoffOrOutOfStorageOrderIsJudgedByItsTime(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let cutoff = Self.day(-400)
            // Stored newest first: a new row, one exactly at the cutoff, then two old ones.
            for (id, at) in [("new", Self.day(0)), ("at-cutoff", cutoff), ("old-1", Self.day(-900)), ("old-2", Self.day(-401))] {
                try await store.recordProvisioningAttempt(ProvisioningAttempt(activationDataId: id, externalCardId: "c1", userId: "alice", deviceType: .phone, nonceHash: "nh", leafFingerprint: "ab", createdAt: at, expiresAt: at.addingTimeInterval(600)))
            }
            let totals = try await HistoryPruning(store: store, batchSize: 1).prune(before: cutoff)
            #expect(totals[.provisioningAttempts] == 2)
            for (id, kept) in [("new", true), ("at-cutoff", true), ("old-1", false), ("old-2", false)] {
                #expect((try await store.provisioningAttempt(activationDataId: id) != nil) == kept, "\(id)")
            }
        }
    }
}
