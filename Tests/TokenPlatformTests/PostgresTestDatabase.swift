import Foundation
import Logging
import PostgresNIO
import Testing
import TokenPlatform

/// The PostgreSQL server tests may use: `PUSHPROV_TEST_POSTGRES_URL`, or none (those tests are
/// then skipped). Each test works in a fresh schema of that database, dropped afterwards.
enum PostgresTestDatabase {
    /// What a skipped test says.
    static let howToRun: Comment = """
        PostgreSQL tests skipped: set PUSHPROV_TEST_POSTGRES_URL=postgres://user:password@127.0.0.1:port/database to run them \
        (`eval "$(scripts/postgres-dev.sh start)"` starts a throwaway server on loopback and prints the export; .ci/run does this)
        """

    /// `PUSHPROV_TEST_POSTGRES_URL` as set, if set and not empty.
    static let setting: String? = ProcessInfo.processInfo.environment["PUSHPROV_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }

    /// The configured server, if any. A setting that does not parse gives none, and
    /// `TMPStoreContractTests.postgresIsUnderContractWhenConfigured` fails on it, so a mistyped
    /// URL cannot quietly skip every PostgreSQL test.
    static let url: PostgresURL? = setting.flatMap { try? PostgresURL(parsing: $0) }

    /// Whether PostgreSQL tests run.
    static var isConfigured: Bool { url != nil }

    static let logger = Logger(label: "test.postgres") { _ in SwiftLogNoOpLogHandler() }

    /// How long tests' stores wait for a pooled connection: longer than a server's 5 s, since
    /// with the whole suite running on two cores opening a connection (TLS, SCRAM) can take
    /// seconds. Tests of the wait itself set their own.
    static let connectionWait: Duration = .seconds(30)

    /// Runs `body` with a new, empty schema (which stores open with `schema:`), then drops it.
    static func withSchema<T: Sendable>(_ body: (PostgresURL, String) async throws -> T) async throws -> T {
        let url = try #require(url, "PUSHPROV_TEST_POSTGRES_URL is not set")
        let schema = "pushprov_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await execute(url, "CREATE SCHEMA \(unescaped: schema)")
        do {
            let value = try await body(url, schema)
            try await execute(url, "DROP SCHEMA \(unescaped: schema) CASCADE")
            return value
        } catch {
            try? await execute(url, "DROP SCHEMA \(unescaped: schema) CASCADE")
            throw error
        }
    }

    /// Runs `body` with `count` migrated stores (separate pools, as separate instances would
    /// have) on one fresh schema, then closes them and drops the schema.
    static func withStores(_ count: Int, poolSize: Int = 4, _ body: ([PostgresStore]) async throws -> Void) async throws {
        try await withSchema { url, schema in
            var stores: [PostgresStore] = []
            do {
                for _ in 0..<count {
                    stores.append(try await PostgresStore.connect(url: url, poolSize: poolSize, connectionWait: connectionWait, schema: schema, logger: logger))
                }
                try await stores[0].migrate()
                try await body(stores)
            } catch {
                for store in stores { await store.close() }
                throw error
            }
            for store in stores { await store.close() }
        }
    }

    /// Runs one statement on a connection of its own.
    static func execute(_ url: PostgresURL, _ query: PostgresQuery) async throws {
        try await withConnection(url) { connection in _ = try await connection.query(query, logger: logger) }
    }

    /// Runs `body` on a connection of its own to `url`'s database.
    static func withConnection<T: Sendable>(_ url: PostgresURL, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        let tls: PostgresConnection.Configuration.TLS = url.tls == .disable ? .disable : .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        var configuration = PostgresConnection.Configuration(host: url.host, port: url.port, username: url.username, password: url.password, database: url.database, tls: tls)
        // Opening a connection (SCRAM, TLS) can take seconds with the whole suite on two cores.
        configuration.options.connectTimeout = .seconds(60)
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        do {
            let value = try await body(connection)
            try await connection.close()
            return value
        } catch {
            try? await connection.close()
            throw error
        }
    }
}
