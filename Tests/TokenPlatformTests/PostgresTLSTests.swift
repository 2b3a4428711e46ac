import Foundation
import Logging
import PostgresNIO
import Testing
@testable import TokenPlatform

/// Every `sslmode` against the test server, which offers TLS with a certificate for
/// "localhost" issued by a CA of its own (scripts/postgres-dev.sh): the CA is in no system
/// store, as a private or cloud provider's CA is not.
@Suite("PostgreSQL over TLS", .timeLimit(.minutes(3)))
struct PostgresTLSTests {
    /// The test server's CA certificate (PEM), if the server offers TLS: a copy this process
    /// owns, as a deployment keeps its own (the development server's is the `postgres`
    /// user's, and a file another user owns is refused as `sslrootcert`).
    static let caFile: String? = ProcessInfo.processInfo.environment["PUSHPROV_TEST_POSTGRES_CA"].flatMap { $0.isEmpty ? nil : ownCopy(of: $0) }

    /// A copy of `path` (mode 0644) in a folder of this process, or `path` if it cannot be read.
    static func ownCopy(of path: String) -> String {
        guard let pem = FileManager.default.contents(atPath: path) else { return path }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-test-ca-\(UUID().uuidString)", isDirectory: true)
        let copy = folder.appendingPathComponent("ca.crt").path
        guard (try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])) != nil,
            FileManager.default.createFile(atPath: copy, contents: pem, attributes: [.posixPermissions: 0o644])
        else { return path }
        return copy
    }

    static var isConfigured: Bool { PostgresTestDatabase.isConfigured && caFile != nil }

    static let howToRun: Comment = """
        PostgreSQL TLS tests skipped: set PUSHPROV_TEST_POSTGRES_URL and PUSHPROV_TEST_POSTGRES_CA \
        (`eval "$(scripts/postgres-dev.sh start)"` prints both; .ci/run does this)
        """

    /// The test server's URL reached as `host`, with TLS settings of its own.
    static func url(host: String = "127.0.0.1", _ mode: PostgresURL.TLSMode, rootCertificates: String? = nil) throws -> PostgresURL {
        var url = try #require(PostgresTestDatabase.url)
        url.host = host
        url.tls = mode
        url.rootCertificatesPath = rootCertificates
        return url
    }

    /// Connects with `url` and says whether the connection is encrypted (as the server sees it).
    static func connectsOverTLS(_ url: PostgresURL) async throws -> Bool {
        let store = try await PostgresStore.connect(url: url, poolSize: 1, connectionWait: PostgresTestDatabase.connectionWait, logger: PostgresTestDatabase.logger)
        do {
            let encrypted = try await store.withConnection { connection in
                let rows = try await connection.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", logger: PostgresTestDatabase.logger).collect()
                return try rows.first?.decode(Bool.self) ?? false
            }
            await store.close()
            return encrypted
        } catch {
            await store.close()
            throw error
        }
    }

    /// The refusal connecting with `url` meets.
    static func refusal(_ url: PostgresURL) async -> String? {
        do {
            let store = try await PostgresStore.connect(url: url, poolSize: 1, logger: PostgresTestDatabase.logger)
            await store.close()
            return nil
        } catch let error as ConfigurationError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    @Test(.enabled(if: isConfigured, howToRun))
    func preferTakesTheServersTLSWithoutCheckingItsCertificateAndDisableStaysPlain() async throws {
        // As libpq's prefer: the server's certificate, from a CA no system store holds, is
        // not checked (it used to be, and the connection failed).
        #expect(try await Self.connectsOverTLS(Self.url(.prefer)))
        #expect(try await !Self.connectsOverTLS(Self.url(.disable)))
    }

    @Test(.enabled(if: isConfigured, howToRun))
    func requireAndVerifyFullCheckTheChainAndTheHostName() async throws {
        let ca = try #require(Self.caFile)
        for mode in [PostgresURL.TLSMode.require, .verifyFull] {
            // The system's roots do not hold the server's CA.
            let untrusted = await Self.refusal(try Self.url(host: "localhost", mode))
            #expect(untrusted?.hasPrefix("cannot connect to database postgres://pushprov@localhost:") == true, "\(untrusted ?? "connected")")
            #expect(untrusted?.contains("CERTIFICATE_VERIFY_FAILED") == true, "\(untrusted ?? "connected")")
            // Its CA given, under the name its certificate is for.
            #expect(try await Self.connectsOverTLS(Self.url(host: "localhost", mode, rootCertificates: ca)), "\(mode)")
            // Its CA given, but another name than the certificate's.
            let otherName = await Self.refusal(try Self.url(host: "127.0.0.1", mode, rootCertificates: ca))
            #expect(otherName?.hasPrefix("cannot connect to database postgres://pushprov@127.0.0.1:") == true, "\(otherName ?? "connected")")
        }
    }

    @Test(.enabled(if: isConfigured, howToRun))
    func verifyCAChecksTheChainButNotTheHostName() async throws {
        let ca = try #require(Self.caFile)
        #expect(try await Self.connectsOverTLS(Self.url(host: "127.0.0.1", .verifyCA, rootCertificates: ca)))
        // Without a CA of its own, verify-ca would take any publicly trusted certificate for
        // any name: refused before connecting.
        let withoutRoots = await Self.refusal(try Self.url(host: "127.0.0.1", .verifyCA))
        #expect(withoutRoots?.hasPrefix("database URL sslmode=verify-ca needs sslrootcert=") == true, "\(withoutRoots ?? "connected")")
    }

    @Test(.enabled(if: isConfigured, howToRun))
    func aRootCertificateFileThatCannotBeUsedStopsTheConnectionSayingWhy() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let missing = folder.appendingPathComponent("missing.pem").path
        let missingRefusal = await Self.refusal(try Self.url(host: "localhost", .verifyFull, rootCertificates: missing))
        #expect(missingRefusal?.hasPrefix("database URL sslrootcert \(missing) cannot be opened (No such file or directory)") == true, "\(missingRefusal ?? "connected")")
        // A FIFO is refused at once (opening it for reading would wait for a writer), and so
        // are a directory and a file too large to be a bundle of certificates.
        let fifo = folder.appendingPathComponent("fifo.pem").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let fifoRefusal = await Self.refusal(try Self.url(host: "localhost", .verifyFull, rootCertificates: fifo))
        #expect(fifoRefusal == "database URL sslrootcert \(fifo) is a FIFO, not a file of PEM certificates", "\(fifoRefusal ?? "connected")")
        let directoryRefusal = await Self.refusal(try Self.url(host: "localhost", .verifyFull, rootCertificates: folder.path))
        #expect(directoryRefusal == "database URL sslrootcert \(folder.path) is a directory, not a file of PEM certificates", "\(directoryRefusal ?? "connected")")
        let huge = folder.appendingPathComponent("huge.pem").path
        try Data(count: 1 << 20).write(to: URL(fileURLWithPath: huge))
        let hugeRefusal = await Self.refusal(try Self.url(host: "localhost", .verifyFull, rootCertificates: huge))
        #expect(hugeRefusal == "database URL sslrootcert \(huge) is too large (1048576 bytes; at most 1048575 are read as PEM certificates)", "\(hugeRefusal ?? "connected")")
        let notPEM = folder.appendingPathComponent("empty.pem").path
        try Data("no certificate here\n".utf8).write(to: URL(fileURLWithPath: notPEM))
        let notPEMRefusal = await Self.refusal(try Self.url(host: "localhost", .verifyFull, rootCertificates: notPEM))
        #expect(notPEMRefusal?.hasPrefix("database URL sslrootcert \(notPEM) ") == true, "\(notPEMRefusal ?? "connected")")
    }

    /// Whoever can change the CA file can put in a certificate authority of their own, and
    /// read and rewrite everything between the server and its database: a CA file its group
    /// or others may write is refused, as the JWKS file is.
    @Test(.enabled(if: isConfigured, howToRun))
    func aRootCertificateFileOthersMayWriteIsRefused() async throws {
        let ca = try #require(Self.caFile)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let open = folder.appendingPathComponent("ca.pem").path
        #expect(FileManager.default.createFile(atPath: open, contents: FileManager.default.contents(atPath: ca)))
        for mode in [0o666, 0o664, 0o646] {
            #expect(chmod(open, mode_t(mode)) == 0)
            let refusal = await Self.refusal(try Self.url(host: "localhost", .verifyFull, rootCertificates: open))
            #expect(refusal == "database URL sslrootcert \(open) can be written by group or others (mode \(String(mode, radix: 8))); whoever can change it can put in a certificate authority of their own: chmod go-w \(open)", "\(refusal ?? "connected")")
        }
        // Readable by all is fine: a CA certificate is public.
        #expect(chmod(open, 0o644) == 0)
        #expect(try await Self.connectsOverTLS(Self.url(host: "localhost", .verifyFull, rootCertificates: open)))
        // One another user owns (who could change its mode) is refused; only root can make one.
        if geteuid() == 0 {
            #expect(chown(open, 65_534, 65_534) == 0)
            let foreign = await Self.refusal(try Self.url(host: "localhost", .verifyFull, rootCertificates: open))
            #expect(foreign?.hasPrefix("database URL sslrootcert \(open) belongs to user id 65534, neither this process's user (0) nor root") == true, "\(foreign ?? "connected")")
        }
    }
}
