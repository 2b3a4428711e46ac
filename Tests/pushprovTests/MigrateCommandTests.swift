import Foundation
import Logging
import PostgresNIO
import Testing

@Suite("pushprov migrate and --database", .serialized)
struct MigrateCommandTests {
    static func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-migrate-\(UUID().uuidString)/\(name)").path
    }

    /// Removes the folder ``temporaryPath(_:)`` made for `path`.
    static func removeTemporary(_ path: String) {
        try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent)
    }

    @Test func migrateAppliesTheNamedMigrationsOnceAndSaysWhich() async throws {
        let path = Self.temporaryPath("tmp.sqlite")
        defer { MigrateCommandTests.removeTemporary(path) }
        let first = try await CLI.run(["migrate", "--database", path])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "database \(path): applied v1, v2, v3, v4, v5, v6, v7, v8, v9, v10\n")
        let second = try await CLI.run(["migrate", "--database", path])
        #expect(second.stdout == "database \(path): up to date, no migration applied\n")
    }

    @Test func serveWithoutMigratingRefusesAnUnmigratedDatabase() async throws {
        let directory = Self.temporaryPath("data")
        defer { MigrateCommandTests.removeTemporary(directory) }
        let result = try await CLI.run(["serve", "--no-migrate", "--port", "0", "--data-dir", directory])
        #expect(result.status != 0)
        #expect(result.stderr.contains("lacks migrations v1, v2, v3, v4, v5, v6, v7, v8, v9, v10; run `pushprov migrate --database …` first"), "\(result.stderr)")
    }

    @Test(arguments: [
        (["serve", "--port", "0", "--data-dir", "/tmp/pushprov-unused", "--database", "postgres://tmp:hunter2-secret@db:99999/pushprov"], "port must be from 1 to 65535"),
        (["migrate", "--database", "postgres://tmp:hunter2-secret@/pushprov"], "database URL has no host"),
        (["serve", "--port", "0", "--data-dir", "/tmp/pushprov-unused", "--database-pool-size", "0"], "database pool size must be a number from 1 to 200 (got 0)"),
        (["migrate", "--database", "/tmp/pushprov-unused/x.sqlite", "--database-wait", "0"], "database wait must be a number of seconds from 1 to 60 (got 0)"),
        (["serve", "--port", "0", "--data-dir", "/tmp/pushprov-unused", "--database-statement-timeout", "0.5"], "database statement timeout must be a number of seconds from 1 to 300 (got 0.5)"),
        (["migrate", "--database", "/tmp/pushprov-unused/x.sqlite", "--database-statement-timeout", "301"], "database statement timeout must be a number of seconds from 1 to 300 (got 301)"),
    ])
    func aBadDatabaseSettingIsOneClearLineWithoutThePassword(arguments: [String], expected: String) async throws {
        let result = try await CLI.run(arguments)
        #expect(result.status != 0)
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1)
        #expect(!result.stderr.contains("hunter2"))
    }

    @Test func aPasswordOnTheCommandLineIsWarnedOfAndOneInTheEnvironmentIsNot() async throws {
        let url = "postgres://tmp:hunter2-secret@127.0.0.1:1/pushprov?sslmode=disable"
        // Run in a folder of their own: serve would make its data directory there.
        let folder = Self.temporaryPath("x")
        try FileManager.default.createDirectory(atPath: (folder as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        defer { Self.removeTemporary(folder) }
        let here = (folder as NSString).deletingLastPathComponent
        for command in [["migrate"], ["prune", "--keep-days", "400"], ["serve", "--port", "0"]] {
            let flagged = try await CLI.run(command + ["--database", url], currentDirectory: here)
            #expect(flagged.stderr.contains("warning: --database holds a password, which every local user can read in the process list"), "\(command): \(flagged.stderr)")
            #expect(!flagged.stderr.contains("hunter2") && !flagged.stdout.contains("hunter2"), "\(command)")
            let inEnvironment = try await CLI.run(command, environment: ["PUSHPROV_DATABASE": url], currentDirectory: here)
            #expect(inEnvironment.status != 0, "\(command): nothing answers on port 1")
            #expect(!inEnvironment.stderr.contains("holds a password"), "\(command): \(inEnvironment.stderr)")
        }
        // No password, no warning.
        let without = try await CLI.run(["migrate", "--database", "postgres://tmp@127.0.0.1:1/pushprov?sslmode=disable"], currentDirectory: here)
        #expect(without.status != 0)
        #expect(!without.stderr.contains("holds a password"), "\(without.stderr)")
    }

    @Test func anUnreachablePostgresIsAClearStartupError() async throws {
        let result = try await CLI.run(["migrate", "--database", "postgres://tmp:hunter2-secret@127.0.0.1:1/pushprov?sslmode=disable"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("cannot connect to database postgres://tmp@127.0.0.1:1/pushprov?sslmode=disable"), "\(result.stderr)")
        #expect(!result.stderr.contains("hunter2"))
    }

    @Test(.enabled(if: TestPostgres.url != nil, "set PUSHPROV_TEST_POSTGRES_URL (scripts/postgres-dev.sh start) to run the PostgreSQL CLI test"))
    func migrateThenServeOnPostgresShowsNoPasswordAndStopsCleanly() async throws {
        try await TestPostgres.withDatabase { url in
            let migrated = try await CLI.run(["migrate", "--database", url.absoluteString])
            #expect(migrated.status == 0, "\(migrated.stderr)")
            #expect(migrated.stdout.hasSuffix(": applied v1, v2, v3, v4, v5, v6, v7, v8, v9, v10\n"))
            // The dev server's password may equal its user name: look for the credential pair.
            let credential = ":\(url.password ?? "")@"
            #expect(!migrated.stdout.contains(credential))

            let server = try ServeCommandTests.Server(arguments: ["--no-migrate", "--database-pool-size", "3"], environment: ["PUSHPROV_DATABASE": url.absoluteString])
            defer { server.removeDataDirectory() }
            let port = try await server.port()
            #expect(server.text.contains("database postgres://\(url.user ?? "")@\(url.host ?? ""):\(url.port ?? 5432)\(url.path)"), "\(server.text)")
            #expect(!server.text.contains(credential))
            let (status, body) = try await ServeCommandTests.get("http://127.0.0.1:\(port)/health")
            #expect(status == 200 && body.contains("\"ok\""), "\(body)")
            #expect(await server.stop() == 0)
        }
    }
}

/// A PostgreSQL database of its own for a CLI test, on the server `PUSHPROV_TEST_POSTGRES_URL`
/// names (its user must be allowed to create databases, as scripts/postgres-dev.sh's is).
enum TestPostgres {
    static let url: URL? = ProcessInfo.processInfo.environment["PUSHPROV_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : URL(string: $0) }

    static func withDatabase(_ body: (URL) async throws -> Void) async throws {
        let server = try #require(url)
        let name = "pushprov_cli_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await execute(on: server, "CREATE DATABASE \(unescaped: name)")
        var components = try #require(URLComponents(url: server, resolvingAgainstBaseURL: false))
        components.path = "/" + name
        do {
            try await body(try #require(components.url))
        } catch {
            try? await execute(on: server, "DROP DATABASE \(unescaped: name) WITH (FORCE)")
            throw error
        }
        try await execute(on: server, "DROP DATABASE \(unescaped: name) WITH (FORCE)")
    }

    static func execute(on url: URL, _ query: PostgresQuery) async throws {
        let logger = Logger(label: "test.postgres") { _ in SwiftLogNoOpLogHandler() }
        let tls: PostgresConnection.Configuration.TLS = url.query?.contains("sslmode=disable") == true ? .disable : .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        let configuration = PostgresConnection.Configuration(
            host: url.host ?? "127.0.0.1", port: url.port ?? 5432, username: url.user ?? "", password: url.password?.removingPercentEncoding,
            database: String(url.path.dropFirst()), tls: tls
        )
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        do {
            try await connection.query(query, logger: logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }
}
