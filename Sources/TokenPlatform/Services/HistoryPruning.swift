import Foundation

/// Deletes history older than a retention period, so the tables that grow with every call
/// and event (``HistoryTable``) do not grow for ever. `pushprov prune` runs it.
///
/// Only history goes: cards, tokens, card art and retired PAN references are state and are
/// never touched. The retention is at least ``minimumRetentionDays``: the card industry's
/// rules keep audit history for a year (PCI DSS requirement 10.5.1), far beyond the minutes
/// and hours for which TMP itself reads these rows (single use of activation data, the
/// correlation of a token service's decision with its attempt, retried events and requests).
public struct HistoryPruning: Sendable {
    /// The shortest retention accepted, in days.
    public static let minimumRetentionDays = 366
    /// Rows deleted per transaction by default: short transactions, so a running server's
    /// writes wait at most for one batch.
    public static let defaultBatchSize = 5_000

    /// The store pruned.
    public let store: any TMPStore
    /// Rows deleted per transaction.
    public let batchSize: Int

    /// Prunes `store` in transactions of `batchSize` rows (positive).
    public init(store: any TMPStore, batchSize: Int = defaultBatchSize) {
        precondition(batchSize > 0, "a pruning batch must hold at least one row")
        self.store = store
        self.batchSize = batchSize
    }

    /// The time before which history goes when `days` are kept, counted back from `now`.
    ///
    /// Throws a ``ConfigurationError`` for fewer than ``minimumRetentionDays`` days (or more
    /// than a hundred years).
    public static func cutoff(keepingDays days: Int, now: Date) throws(ConfigurationError) -> Date {
        guard days >= minimumRetentionDays else {
            throw ConfigurationError("--keep-days must be at least \(minimumRetentionDays): the card industry's rules keep audit history for a year (PCI DSS 10.5.1)")
        }
        guard days <= 36_500 else { throw ConfigurationError("--keep-days must be at most 36500") }
        return now.addingTimeInterval(-Double(days) * 86_400)
    }

    /// How many rows of each table are older than `cutoff` (what ``prune(before:progress:)``
    /// would delete now).
    public func count(before cutoff: Date) async throws -> [HistoryTable: Int] {
        var counts: [HistoryTable: Int] = [:]
        for table in HistoryTable.allCases {
            counts[table] = try await store.historyCount(table, before: cutoff)
        }
        return counts
    }

    /// Deletes every row of every history table recorded before `cutoff`, a batch at a time,
    /// calling `progress` with each table's running total after every batch; returns the
    /// totals. A failure leaves the batches already deleted deleted, and running it again
    /// goes on from there.
    ///
    /// Throws a ``ConfigurationError``, deleting nothing, for a cutoff less than
    /// ``minimumRetentionDays`` days before `now`: the rows a running platform still relies on
    /// (activation data's single use within its ten minutes, token event ids the token service
    /// may send again, the attempts its decisions are matched with) and a year of audit history
    /// are never pruned, whoever calls.
    @discardableResult
    public func prune(before cutoff: Date, now: Date = Date(), progress: (HistoryTable, Int) -> Void = { _, _ in }) async throws -> [HistoryTable: Int] {
        let latest = now.addingTimeInterval(-Double(Self.minimumRetentionDays) * 86_400)
        guard cutoff <= latest else {
            throw ConfigurationError("history recorded after \(latest.formatted(.iso8601)) is kept: at least \(Self.minimumRetentionDays) days are (cutoff \(cutoff.formatted(.iso8601)))")
        }
        var totals: [HistoryTable: Int] = [:]
        for table in HistoryTable.allCases {
            var total = 0
            var position: HistoryPosition?
            repeat {
                let batch = try await store.deleteHistory(table, before: cutoff, limit: batchSize, after: position)
                total += batch.deleted
                if batch.deleted > 0 { progress(table, total) }
                position = batch.next
            } while position != nil
            totals[table] = total
        }
        return totals
    }
}
