import ArgumentParser
import Foundation
import TokenPlatform

/// `pushprov migrate`: brings the database schema up to date and says what it applied.
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply the database's pending schema migrations (SQLite or PostgreSQL) and list them.",
        discussion: """
            `serve` migrates on start unless given --no-migrate; run this first when several \
            instances share one PostgreSQL database and start with --no-migrate. Safe to run \
            concurrently and repeatedly: each named migration is applied once.
            """
    )

    @OptionGroup var databaseOptions: DatabaseOptions
    @Option(name: .customLong("data-dir"), help: "Data directory holding the default SQLite file (PUSHPROV_DATA_DIR; default ./.pushprov).") var dataDirectory: String?

    func run() async throws {
        let (database, store, applied) = try await databaseOptions.openStore(dataDirectory: dataDirectory, migrate: true)
        await store.close()
        if applied.isEmpty {
            print("database \(database): up to date, no migration applied")
        } else {
            print("database \(database): applied \(applied.joined(separator: ", "))")
        }
    }
}
