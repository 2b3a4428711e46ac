import ArgumentParser
import TokenPlatform

/// `--database` and `--database-pool-size`, shared by every command that opens TMP's storage.
struct DatabaseOptions: ParsableArguments {
    @Option(help: "SQLite file path, or postgres://user:password@host:5432/database[?sslmode=disable|prefer|require] (PUSHPROV_DATABASE; default <data-dir>/pushprov.sqlite).")
    var database: String?

    @Option(name: .customLong("database-pool-size"), help: "Most PostgreSQL connections this process opens (PUSHPROV_DATABASE_POOL_SIZE; default 10, 1 to 200; SQLite ignores it).")
    var poolSize: Int?

    /// Copies the options into `settings`.
    func apply(to settings: inout ServerSettings) {
        settings.database = database
        settings.databasePoolSize = poolSize
    }
}
