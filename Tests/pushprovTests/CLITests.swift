import Foundation
import Testing

/// Runs the built `pushprov` binary as a user would and captures what it prints.
struct CLI {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static let binary: URL = {
        let candidates = [
            Bundle.main.bundleURL.appendingPathComponent("pushprov"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("pushprov"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }()

    static let certificates = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("ProvisioningCryptoTests/Resources/certs")

    static func cert(_ name: String) -> String { certificates.appendingPathComponent(name).path }

    /// How long ``run(_:environment:currentDirectory:timeout:)`` lets the binary run: far
    /// longer than any command takes, and far shorter than CI's step limit.
    static let defaultTimeout: Duration = .seconds(60)

    /// A run that did not end within its time limit; the binary was stopped.
    struct Timeout: Error, CustomStringConvertible {
        var arguments: [String]
        var limit: Duration
        var description: String { "pushprov \(arguments.joined(separator: " ")) did not finish within \(limit); it was terminated" }
    }

    /// Runs the binary to its end on a thread of its own, so the wait (the pipes, the exit)
    /// never holds one of Swift concurrency's few threads, which the other suites running
    /// meanwhile need (a blocked pool once made a timing test in another suite miss its budget).
    ///
    /// It runs in `currentDirectory` (default: this one's) and sees this process's environment
    /// without its `PUSHPROV_*` and `LOG_LEVEL` variables (a developer's settings must not
    /// change what a test sees), plus `environment`. A run still going after `timeout` (a
    /// command that should have refused but serves) is terminated, and the call throws
    /// ``Timeout``.
    ///
    /// With `asUser`, the binary runs as that user and group id, without supplementary groups
    /// (through util-linux's `setpriv`; this process must be root: ``canRunAsAnotherUser``).
    static func run(_ arguments: [String], environment: [String: String] = [:], currentDirectory: String? = nil, timeout: Duration = defaultTimeout, asUser user: UInt32? = nil) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Swift.Result { try runBlocking(arguments, environment: environment, currentDirectory: currentDirectory, timeout: timeout, asUser: user) })
            }
            thread.start()
        }
    }

    /// `inherited` without the `PUSHPROV_*` and `LOG_LEVEL` settings, then `environment`.
    static func childEnvironment(inherited: [String: String], adding environment: [String: String]) -> [String: String] {
        inherited.filter { !$0.key.hasPrefix("PUSHPROV_") && $0.key != "LOG_LEVEL" }.merging(environment) { $1 }
    }

    /// A run's watchdog: whether the child has exited, and whether the watchdog stopped it.
    private final class Watchdog: @unchecked Sendable {
        // @unchecked: `exited` and `stopped` are only touched while holding `lock`.
        private let lock = NSLock()
        private var exited = false
        private var stopped = false
        let finished = DispatchSemaphore(value: 0)

        func exit() {
            lock.withLock { exited = true }
            finished.signal()
        }

        /// Sends `signal` to `pid` unless the child has exited (its pid may then be another's).
        func stop(_ pid: Int32, with signal: Int32) {
            lock.withLock {
                guard !exited else { return }
                stopped = true
                kill(pid, signal)
            }
        }

        var stoppedIt: Bool { lock.withLock { stopped } }
    }

    /// The tool ``run(_:environment:currentDirectory:timeout:asUser:)`` changes users with.
    static let setpriv = "/usr/bin/setpriv"

    /// User id 65534 (`nobody` on Debian): a user that owns nothing here.
    static let nobody: UInt32 = 65534

    /// Whether the binary can be run as ``nobody``: this process is root, `setpriv` is there,
    /// and every directory on the way to the binary, and the binary, let others in.
    static var canRunAsAnotherUser: Bool {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: setpriv) else { return false }
        var path = binary.path
        while path != "/" && !path.isEmpty {
            var status = stat()
            guard stat(path, &status) == 0, status.st_mode & S_IXOTH != 0 else { return false }
            path = (path as NSString).deletingLastPathComponent
        }
        return true
    }

    private static func runBlocking(_ arguments: [String], environment: [String: String], currentDirectory: String?, timeout: Duration, asUser user: UInt32?) throws -> Result {
        let executable: String
        let fullArguments: [String]
        if let user {
            executable = setpriv
            fullArguments = ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", binary.path] + arguments
        } else {
            executable = binary.path
            fullArguments = arguments
        }
        let process = try SpawnedProcess(
            executable: executable, arguments: fullArguments,
            environment: childEnvironment(inherited: ProcessInfo.processInfo.environment, adding: environment),
            currentDirectory: currentDirectory, output: .separate
        )
        let watchdog = Watchdog()
        // SIGTERM at the limit (a server stops on it), SIGKILL if that has not ended it in 5 s.
        let pid = process.processIdentifier
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        Thread {
            guard watchdog.finished.wait(timeout: .now() + seconds) == .timedOut else { return }
            watchdog.stop(pid, with: SIGTERM)
            guard watchdog.finished.wait(timeout: .now() + 5) == .timedOut else { return }
            watchdog.stop(pid, with: SIGKILL)
        }.start()
        let stdout = process.standardOutput?.readDataToEndOfFile() ?? Data()
        let stderr = process.standardError?.readDataToEndOfFile() ?? Data()
        process.waitUntilExit()
        watchdog.exit()
        if watchdog.stoppedIt { throw Timeout(arguments: arguments, limit: timeout) }
        return Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    static func temporaryFile(_ contents: Data) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-cli-\(UUID().uuidString)")
        try contents.write(to: url)
        return url.path
    }
}

@Suite("pushprov crypto", .serialized)
struct CLITests {
    static let vector1Plaintext = #"{"Parameter1":"Value1","Parameter2":"Value2","Parameter3":"Value3"}"#
    static let vector1Output = "E3EF6BA2FFA05B6985FE129E3CB6845C4EA1E94AE98D31A538A4E24906FB720D764D640894CD9DE7CEC00114396651A1CCAEDCF480C57A959E925C04492B9CF85FC711FAB3CBED10DC2BA99A2BB063CEFF8DE1"
    static let vector1Ephemeral = "0499A6F42E83EA4F150A78780FFB562C9CDB9B7507BC5D28CBFBF8CC3EF0AF68B36E60CB10DB69127830F7F899492017089E3B73C83FCF0EBDF2C06B613C3F88B7"

    @Test func sealReproducesVectorOne() async throws {
        let plaintext = try CLI.temporaryFile(Data(Self.vector1Plaintext.utf8))
        defer { try? FileManager.default.removeItem(atPath: plaintext) }
        let result = try await CLI.run([
            "crypto", "seal", "--leaf", CLI.cert("apple-encipherment-leaf-test-vector.pem"), "--plaintext", plaintext,
            "--ephemeral-key", "7EEE47DEE108A08EDD2BCD2BB762A543CA23EA96C9AF09AD54BEB9FA3CE1A026",
        ])
        #expect(result.status == 0)
        #expect(result.stdout == "encryptedData: \(Self.vector1Output)\nephemeralPublicKey: \(Self.vector1Ephemeral)\n")
    }

    @Test func sealPrintsBase64OnRequest() async throws {
        let plaintext = try CLI.temporaryFile(Data(Self.vector1Plaintext.utf8))
        defer { try? FileManager.default.removeItem(atPath: plaintext) }
        let result = try await CLI.run([
            "crypto", "seal", "--leaf", CLI.cert("apple-encipherment-leaf-test-vector.pem"), "--plaintext", plaintext,
            "--ephemeral-key", "7eee47dee108a08edd2bcd2bb762a543ca23ea96c9af09ad54beb9fa3ce1a026", "--base64",
        ])
        #expect(result.status == 0)
        let base64 = Data(hexString: Self.vector1Output).base64EncodedString()
        #expect(result.stdout.contains("encryptedData (base64): \(base64)\n"))
    }

    @Test func sealWithoutAFixedKeyUsesAFreshOne() async throws {
        let plaintext = try CLI.temporaryFile(Data(Self.vector1Plaintext.utf8))
        defer { try? FileManager.default.removeItem(atPath: plaintext) }
        let args = ["crypto", "seal", "--leaf", CLI.cert("apple-encipherment-leaf-test-vector.pem"), "--plaintext", plaintext]
        let first = try await CLI.run(args)
        let second = try await CLI.run(args)
        #expect(first.status == 0 && second.status == 0)
        #expect(first.stdout != second.stdout)
    }

    @Test func verifyChainAcceptsApplesProductionChain() async throws {
        let result = try await CLI.run(["crypto", "verify-chain", CLI.cert("apple-encipherment-leaf-prod-2020.pem"), CLI.cert("apple-wwdr-ca-g2.pem")])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("accepted: "))
        #expect(result.stdout.contains("anchored at: C=US,O=Apple Inc.,OU=Apple Certification Authority,CN=Apple Root CA - G3 (Apple's root)\n"), "\(result.stdout)")
    }

    @Test func verifyChainRefusesWithReasonAndNonZeroExit() async throws {
        let result = try await CLI.run(["crypto", "verify-chain", CLI.cert("apple-wwdr-ca-g2.pem"), CLI.cert("apple-encipherment-leaf-prod-2020.pem")])
        #expect(result.status != 0)
        #expect(result.stdout.hasPrefix("refused: wrong_order: "))
    }

    /// A file read that holds no certificate is judged on standard output like any refused
    /// chain, whether it is no PEM at all, PEM of something else, or a broken CERTIFICATE block.
    @Test(arguments: [
        ("garbage", "refused: malformed_certificate: "),
        ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "refused: malformed_certificate: "),
        ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "refused: malformed_certificate: "),
        ("-----BEGIN", "refused: malformed_certificate: "),
    ])
    func verifyChainJudgesAFileHoldingNoCertificateOnStandardOutput(content: String, expected: String) async throws {
        let file = try CLI.temporaryFile(Data(content.utf8))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let result = try await CLI.run(["crypto", "verify-chain", file, CLI.cert("apple-wwdr-ca-g2.pem")])
        #expect(result.status == 1)
        #expect(result.stdout.hasPrefix(expected), "\(result.stdout)|\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 1)
        #expect(result.stderr.isEmpty, "\(result.stderr)")
    }

    @Test func verifyChainChecksValidityOnRequest() async throws {
        let result = try await CLI.run(["crypto", "verify-chain", "--check-validity", CLI.cert("apple-encipherment-leaf-prod-2020.pem"), CLI.cert("apple-wwdr-ca-g2.pem")])
        #expect(result.status != 0)
        #expect(result.stdout.hasPrefix("refused: certificate_expired: "))
    }

    @Test func throughputMeasuresTheCryptoOnlyRateForAnAcceptedChain() async throws {
        let result = try await CLI.run(["crypto", "throughput", "--seconds", "0.3", "--workers", "1", CLI.cert("apple-encipherment-leaf-prod-2020.pem"), CLI.cert("apple-wwdr-ca-g2.pem")])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("crypto-only signed-cards: "))
        #expect(result.stdout.contains(" ops/s ("))
        let refused = try await CLI.run(["crypto", "throughput", "--seconds", "0.3", CLI.cert("apple-encipherment-leaf-test-vector.pem")])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("not an accepted Apple chain: "), "\(refused.stderr)")
        // Why, as verify-chain says it: a reason code after the sentence.
        #expect(refused.stderr.range(of: #"chain: [a-z_]+: "#, options: .regularExpression) != nil, "\(refused.stderr)")
        // Too short a run to finish one operation says so instead of printing 0 ops/s.
        let nothing = try await CLI.run(["crypto", "throughput", "--seconds", "0.0000001", CLI.cert("apple-encipherment-leaf-prod-2020.pem"), CLI.cert("apple-wwdr-ca-g2.pem")])
        #expect(nothing.status != 0 && nothing.stderr.contains("no operation finished within --seconds"), "\(nothing.stdout)\(nothing.stderr)")
    }

    /// A command that should have ended but runs on (here a server) is stopped at the limit,
    /// and the test that ran it fails saying so, instead of hanging the suite.
    @Test func aRunPastItsTimeLimitIsStoppedAndThrows() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-timeout-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let arguments = ["serve", "--port", "0", "--data-dir", directory]
        let started = ContinuousClock.now
        let error = await #expect(throws: CLI.Timeout.self) { try await CLI.run(arguments, timeout: .seconds(2)) }
        #expect(error?.description == "pushprov serve --port 0 --data-dir \(directory) did not finish within 2.0 seconds; it was terminated")
        #expect(ContinuousClock.now - started < .seconds(30))
    }

    @Test func theCallersSettingsDoNotReachTheBinaryButTheTestsDo() {
        let inherited = ["PATH": "/usr/bin", "PUSHPROV_DATA_DIR": "/srv/pushprov", "PUSHPROV_JWT_ISSUER": "https://id.example", "LOG_LEVEL": "trace", "TMPDIR": "/tmp/x"]
        let child = CLI.childEnvironment(inherited: inherited, adding: ["PUSHPROV_PORT": "http", "LOG_LEVEL": "debug"])
        #expect(child == ["PATH": "/usr/bin", "TMPDIR": "/tmp/x", "PUSHPROV_PORT": "http", "LOG_LEVEL": "debug"])
    }

    @Test(arguments: [
        (["crypto", "verify-chain", "/nonexistent/leaf.pem"], "no such file"),
        (["crypto", "seal", "--leaf", "/nonexistent.pem", "--plaintext", "/nonexistent"], "no such file"),
        (["crypto", "seal", "--leaf", "LEAF", "--plaintext", "PLAIN", "--ephemeral-key", "xyz"], "--ephemeral-key must be 64 hex digits"),
        (["crypto", "seal", "--leaf", "ROOT", "--plaintext", "PLAIN"], "not EC P-256"),
        (["crypto", "seal", "--leaf", "PLAIN", "--plaintext", "PLAIN"], "neither PEM nor a DER"),
        // Sealed for a key Apple never decrypts with: a CA's certificate, or a chain's file.
        (["crypto", "seal", "--leaf", "WWDR", "--plaintext", "PLAIN"], "is a certificate authority's certificate"),
        (["crypto", "seal", "--leaf", "CHAIN", "--plaintext", "PLAIN"], "holds 2 certificates; give the leaf alone"),
        // Read without blocking and within a bound: a device, a FIFO, a directory or a large
        // file is refused before anything is read from it.
        (["crypto", "seal", "--leaf", "LEAF", "--plaintext", "/dev/zero"], "/dev/zero: not a regular file (a device)"),
        (["crypto", "seal", "--leaf", "LEAF", "--plaintext", "FIFO"], "not a regular file (a FIFO)"),
        (["crypto", "verify-chain", "/tmp"], "/tmp: not a regular file (a directory)"),
        (["crypto", "seal", "--leaf", "LEAF", "--plaintext", "LARGE"], "2097152 bytes or more; a certificate, key or payload file must be under 1048576 bytes"),
    ])
    func badInputGivesOneClearLineAndNonZeroExit(arguments: [String], expected: String) async throws {
        let plaintext = try CLI.temporaryFile(Data("{}".utf8))
        let large = try CLI.temporaryFile(Data(count: 2 << 20))
        let fifo = plaintext + ".fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let chain = try CLI.temporaryFile(
            try Data(contentsOf: URL(fileURLWithPath: CLI.cert("apple-encipherment-leaf-prod-2020.pem"))) + Data(contentsOf: URL(fileURLWithPath: CLI.cert("apple-wwdr-ca-g2.pem")))
        )
        defer { for path in [plaintext, large, fifo, chain] { try? FileManager.default.removeItem(atPath: path) } }
        let substituted = arguments.map {
            switch $0 {
            case "LEAF": CLI.cert("apple-encipherment-leaf-test-vector.pem")
            case "ROOT": CLI.cert("apple-root-ca-g3.pem")
            case "WWDR": CLI.cert("apple-wwdr-ca-g2.pem")
            case "CHAIN": chain
            case "PLAIN": plaintext
            case "LARGE": large
            case "FIFO": fifo
            default: $0
            }
        }
        let result = try await CLI.run(substituted)
        #expect(result.status != 0)
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        #expect(!result.stderr.contains("Fatal error"))
    }
}

extension Data {
    init(hexString: String) {
        var bytes: [UInt8] = []
        var index = hexString.startIndex
        while index < hexString.endIndex {
            let next = hexString.index(index, offsetBy: 2)
            bytes.append(UInt8(hexString[index..<next], radix: 16)!)
            index = next
        }
        self.init(bytes)
    }
}
