import ArgumentParser
import Foundation
import TokenPlatform

/// `pushprov prune`: deletes history older than a retention period (audit trail, provisioning
/// attempts, tokenization decisions, token-event ids, activation data uses), a batch at a time.
struct PruneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Delete history older than --keep-days (at least 366) from the database; cards and tokens are never touched.",
        discussion: """
            Run it from a scheduled job (cron, a Kubernetes CronJob) against the database the \
            servers use; it may run while they serve: it deletes in short transactions of \
            --batch-size rows. --dry-run only counts.
            """
    )

    @OptionGroup var databaseOptions: DatabaseOptions
    @Option(name: .customLong("data-dir"), help: "Data directory holding the default SQLite file (PUSHPROV_DATA_DIR; default ./.pushprov).") var dataDirectory: String?
    @Option(name: .customLong("keep-days"), parsing: .unconditional, help: "Keep this many days of history (at least 366).") var keepDays: Int
    @Option(name: .customLong("batch-size"), parsing: .unconditional, help: "Rows deleted per transaction (1 to 100000).") var batchSize: Int = HistoryPruning.defaultBatchSize
    @Flag(name: .customLong("dry-run"), help: "Count what would be deleted, delete nothing.") var dryRun = false

    func run() async throws {
        let cutoff: Date
        do {
            cutoff = try HistoryPruning.cutoff(keepingDays: keepDays, now: Date())
        } catch {
            throw CLIError(error.message)
        }
        guard (1...100_000).contains(batchSize) else { throw CLIError("--batch-size must be from 1 to 100000 (got \(batchSize))") }
        // The schema must be current: pruning never migrates.
        let (database, store, _) = try await databaseOptions.openStore(dataDirectory: dataDirectory, migrate: false, pendingAdvice: "run `pushprov migrate --database …` first")
        // Said first: a run on the wrong database (a setting forgotten) must not pass for done.
        print("database \(database)")
        let pruning = HistoryPruning(store: store, batchSize: batchSize)
        let before = cutoff.formatted(.iso8601)
        var deletedSoFar: [HistoryTable: Int] = [:]
        do {
            if dryRun {
                let counts = try await pruning.count(before: cutoff)
                for table in HistoryTable.allCases {
                    print("\(table.rawValue): \(Self.rows(counts[table] ?? 0)) recorded before \(before) would be deleted")
                }
            } else {
                let totals = try await pruning.prune(before: cutoff) { table, total in
                    // Progress on long runs, every 100,000 rows of a table, shown at once even
                    // when the output is a pipe (a scheduled job's log).
                    if total / 100_000 > (deletedSoFar[table] ?? 0) / 100_000 {
                        print("\(table.rawValue): \(Self.rows(total)) deleted so far")
                        fflush(nil)
                    }
                    deletedSoFar[table] = total
                }
                for table in HistoryTable.allCases {
                    print("\(table.rawValue): deleted \(Self.rows(totals[table] ?? 0)) recorded before \(before)")
                }
            }
        } catch {
            await store.close()
            let done = HistoryTable.allCases.compactMap { table in deletedSoFar[table].map { "\(table.rawValue) \($0)" } }
            throw CLIError("pruning stopped (\(done.isEmpty ? "nothing deleted" : "deleted so far: " + done.joined(separator: ", ")); run it again to go on): \(DatabaseConfiguration.reason(error))")
        }
        await store.close()
    }

    /// "1 row", "5 rows".
    static func rows(_ count: Int) -> String { count == 1 ? "1 row" : "\(count) rows" }
}
