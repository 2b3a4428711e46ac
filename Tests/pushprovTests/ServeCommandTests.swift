import Foundation
import ProvisioningCrypto
import Testing
import TokenPlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
/// The C library's `send` and `connect` (the suite has methods of those names).
private let systemSend = Glibc.send
private let systemConnect = Glibc.connect
#elseif canImport(Darwin)
import Darwin
private let systemSend = Darwin.send
private let systemConnect = Darwin.connect
#endif

/// Starts the real `pushprov serve` binary on a free loopback port and drives it over HTTP.
@Suite("pushprov serve", .serialized)
struct ServeCommandTests {
    final class Server: @unchecked Sendable {
        // @unchecked: `output` is only touched while holding `lock`.
        private(set) var process: SpawnedProcess!
        let lock = NSLock()
        var output = ""
        /// Whether the server's output has ended (it exited and everything it wrote was read).
        var ended = false
        let dataDirectory: String

        init(dataDirectory: String? = nil, arguments: [String] = [], environment: [String: String] = [:]) throws {
            self.dataDirectory = dataDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-serve-\(UUID().uuidString)").path
            process = try SpawnedProcess(
                executable: CLI.binary.path, arguments: ["serve", "--port", "0", "--data-dir", self.dataDirectory] + arguments,
                environment: CLI.childEnvironment(inherited: ProcessInfo.processInfo.environment, adding: environment), output: .combined
            )
            process.standardOutput?.readabilityHandler = { [weak self] handle in
                let data = handle.availableData
                if data.isEmpty { handle.readabilityHandler = nil }
                let chunk = String(decoding: data, as: UTF8.self)
                self?.lock.withLock {
                    self?.output += chunk
                    if data.isEmpty { self?.ended = true }
                }
            }
        }

        var text: String { lock.withLock { output } }

        /// Waits for the start-up line and returns the bound port.
        func port() async throws -> Int {
            for _ in 0..<600 {
                if let range = text.range(of: #"listening on http://127\.0\.0\.1:(\d+)"#, options: .regularExpression) {
                    return Int(text[range].split(separator: ":").last!)!
                }
                if !process.isRunning { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw CancellationError()
        }

        /// Sends SIGTERM and waits for the server to exit.
        ///
        /// The wait runs on a thread of its own: a graceful shutdown can take seconds under
        /// load, and a cooperative thread blocked that long (there are two on two cores)
        /// stalls every other test of the suite.
        func stop() async -> Int32 {
            let process = self.process!
            if process.isRunning { process.terminate() }
            return await withCheckedContinuation { continuation in
                Thread { continuation.resume(returning: process.terminationStatus) }.start()
            }
        }

        /// Sends SIGTERM and blocks until the server exits: for a `defer`, which cannot wait
        /// asynchronously. The test has usually stopped the server already, so this returns at
        /// once; it blocks only when the test failed before stopping it.
        func stopBlocking() {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }

        /// Stops the server and waits until all it wrote has been read.
        func stopAndReadAll() async throws -> Int32 {
            let status = await stop()
            for _ in 0..<600 where !lock.withLock({ ended }) { try await Task.sleep(for: .milliseconds(100)) }
            try #require(lock.withLock { ended }, "the server's output did not end")
            return status
        }

        /// Stops the server and removes its data directory (call in a `defer` after the last
        /// server on that directory).
        func removeDataDirectory() {
            stopBlocking()
            try? FileManager.default.removeItem(atPath: dataDirectory)
        }
    }

    static func get(_ url: String, bearer: String? = nil) async throws -> (Int, String) {
        try await send("GET", url, bearer: bearer)
    }

    /// One request; `json` is sent as an application/json body.
    static func send(_ method: String, _ url: String, bearer: String?, json: String? = nil) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(json.utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, String(decoding: data, as: UTF8.self))
    }

    @Test func embeddedRunStartsGeneratesSecretsOnceServesAndStopsOnSIGTERM() async throws {
        let server = try Server()
        defer { server.removeDataDirectory() }
        let port = try await server.port()
        #expect(server.text.contains("mode embedded"))
        // By default Swift concurrency runs on the event loops; serving and SIGTERM work there.
        #expect(server.text.contains("· executor event-loops"))
        #expect(server.text.contains("issuer API key (PUSHPROV_ISSUER_API_KEY): "))
        let (status, body) = try await Self.get("http://127.0.0.1:\(port)/health")
        #expect(status == 200 && body.contains("\"ok\""))
        for file in ["keys.json", "secrets.json"] {
            let mode = try FileManager.default.attributesOfItem(atPath: server.dataDirectory + "/" + file)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file)")
        }
        let token = try await CLI.run(["dev-token", "--user", "alice", "--data-dir", server.dataDirectory])
        #expect(token.status == 0)
        let jwt = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let (cardsStatus, cards) = try await Self.get("http://127.0.0.1:\(port)/issuer/push-provisioning/cards", bearer: jwt)
        #expect(cardsStatus == 200 && cards == #"{"cards":[]}"#)
        let (unauthorized, _) = try await Self.get("http://127.0.0.1:\(port)/issuer/push-provisioning/cards", bearer: "nope")
        #expect(unauthorized == 401)
        #expect(await server.stop() == 0)

        // A second start reuses the keys and does not print the secrets again.
        let restarted = try Server(dataDirectory: server.dataDirectory)
        defer { restarted.stopBlocking() }
        let secondPort = try await restarted.port()
        #expect(!restarted.text.contains("issuer API key (PUSHPROV_ISSUER_API_KEY): "))
        #expect(restarted.text.contains("from \(server.dataDirectory)/secrets.json"))
        let (stillValid, _) = try await Self.get("http://127.0.0.1:\(secondPort)/issuer/push-provisioning/cards", bearer: jwt)
        #expect(stillValid == 200)
        #expect(await restarted.stop() == 0)
    }

    @Test func devTokensCarryTheIssuerAudienceAndTypeTheServerChecks() async throws {
        let expected = ["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "pushprov-tmp", "PUSHPROV_JWT_TYPE": "at+jwt"]
        let server = try Server(environment: expected)
        defer { server.removeDataDirectory() }
        let port = try await server.port()
        let matching = try await CLI.run(["dev-token", "--user", "alice", "--data-dir", server.dataDirectory], environment: expected)
        #expect(matching.status == 0)
        let (accepted, _) = try await Self.get("http://127.0.0.1:\(port)/issuer/push-provisioning/cards", bearer: matching.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(accepted == 200)
        let plain = try await CLI.run(["dev-token", "--user", "alice", "--data-dir", server.dataDirectory])
        try #require(plain.status == 0, "\(plain.stderr)")
        let (refused, _) = try await Self.get("http://127.0.0.1:\(port)/issuer/push-provisioning/cards", bearer: plain.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(refused == 401, "a token without the audience is not for this server")
        // The flags name them as `serve`'s flags do.
        let untyped = try await CLI.run(["dev-token", "--user", "alice", "--data-dir", server.dataDirectory, "--jwt-issuer", "https://id.example", "--jwt-audience", "pushprov-tmp"])
        try #require(untyped.status == 0, "\(untyped.stderr)")
        let (wrongType, _) = try await Self.get("http://127.0.0.1:\(port)/issuer/push-provisioning/cards", bearer: untyped.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(wrongType == 401, "a JWT typed JWT is not the at+jwt the server asks for")
        let flagged = try await CLI.run(["dev-token", "--user", "alice", "--data-dir", server.dataDirectory, "--jwt-issuer", "https://id.example", "--jwt-audience", "pushprov-tmp", "--jwt-type", "application/AT+JWT"])
        let (viaFlags, _) = try await Self.get("http://127.0.0.1:\(port)/issuer/push-provisioning/cards", bearer: flagged.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(viaFlags == 200)
        // A type the server could not be configured with is refused, as `serve` refuses it.
        for bad in ["a b", String(repeating: "t", count: 129)] {
            let refused = try await CLI.run(["dev-token", "--user", "alice", "--data-dir", server.dataDirectory, "--jwt-type", bad])
            #expect(refused.status != 0 && refused.stdout.isEmpty)
            #expect(refused.stderr.contains("JWT type must be a media type of 1 to 128 printable ASCII characters without spaces"), "\(refused.stderr)")
        }
        #expect(await server.stop() == 0)
    }

    @Test func swiftsOwnPoolCanBeChosenAndServesToo() async throws {
        let server = try Server(arguments: ["--executor", "swift"])
        defer { server.removeDataDirectory() }
        let port = try await server.port()
        #expect(server.text.contains("· executor swift"))
        let (status, body) = try await Self.get("http://127.0.0.1:\(port)/health")
        #expect(status == 200 && body.contains("\"ok\""))
        #expect(await server.stop() == 0)
        let refused = try await CLI.run(["serve", "--executor", "threads", "--port", "0", "--data-dir", "/tmp/pushprov-unused"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("executor must be event-loops or swift (got threads)"))
    }

    /// The hot path on the event loops: concurrent seals (group commit, JSON fast path, Apple's
    /// real chain), each answered once with its own key, then a clean SIGTERM.
    @Test func concurrentSealsOnTheEventLoopsAllSucceedAndTheServerStopsCleanly() async throws {
        let server = try Server()
        defer { server.removeDataDirectory() }
        let port = try await server.port()
        #expect(server.text.contains("· executor event-loops"))
        let base = "http://127.0.0.1:\(port)"
        let secrets = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: server.dataDirectory + "/secrets.json"))) as! [String: Any]
        let issuerKey = try #require(secrets["issuerApiKey"] as? String)
        let card = #"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold"}"#
        #expect(try await Self.send("PUT", "\(base)/lifecycle/cards/card-1", bearer: issuerKey, json: card).0 == 201)
        let jwt = try await CLI.run(["dev-token", "--user", "alice", "--data-dir", server.dataDirectory]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        func base64(_ name: String) throws -> String {
            let pem = try String(contentsOfFile: CLI.cert(name), encoding: .utf8)
            let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            // As the SDK's JSONEncoder writes it: "/" escaped.
            return body.replacingOccurrences(of: "/", with: "\\/")
        }
        let certificates = [try base64("apple-encipherment-leaf-prod-2020.pem"), try base64("apple-wwdr-ca-g2.pem")]
        let body = #"{"externalCardId":"card-1","walletType":"APPLE_PAY","deviceType":"PHONE","certificates":["\#(certificates[0])","\#(certificates[1])"],"nonce":"bm9uY2UtMDEyMzQ1Njc4OQ==","nonceSignature":"c2lnbmF0dXJl"}"#
        let replies = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for _ in 0..<64 { group.addTask { try await Self.send("POST", "\(base)/issuer/push-provisioning/signed-cards", bearer: jwt, json: body) } }
            var replies: [(Int, String)] = []
            for try await reply in group { replies.append(reply) }
            return replies
        }
        #expect(replies.count == 64)
        #expect(replies.allSatisfy { $0.0 == 200 }, "\(replies.first { $0.0 != 200 }.map { "\($0)" } ?? "")")
        let keys = Set(replies.compactMap { reply in
            (try? JSONSerialization.jsonObject(with: Data(reply.1.utf8)) as? [String: String])?["ephemeralPublicKey"]
        })
        #expect(keys.count == 64)
        #expect(await server.stop() == 0)
    }

    @Test func aRotatedJWKSFileIsPutInForceWithoutARestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-jwks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("jwks.json").path
        /// Written beside the file and renamed over it, as a deployment replaces it.
        func publish(_ keys: [SigningKey]) throws {
            let set = JSONWebKeySet(keys: keys.map(\.publicJWK))
            try JSONEncoder().encode(set).write(to: URL(fileURLWithPath: path + ".new"))
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path + ".new")
            #expect(rename(path + ".new", path) == 0)
        }
        let old = SigningKey.generate(), new = SigningKey.generate()
        try publish([old])
        let server = try Server(
            arguments: ["--jwks-reload-interval", "1", "--jwt-issuer", "https://id.example", "--jwt-audience", "pushprov"],
            environment: ["PUSHPROV_JWKS": path]
        )
        defer { server.removeDataDirectory() }
        let port = try await server.port()
        let cards = "http://127.0.0.1:\(port)/issuer/push-provisioning/cards"
        func token(_ key: SigningKey) throws -> String {
            try DevelopmentTokenIssuer(key: key, issuer: "https://id.example", audience: "pushprov").token(userId: "alice", lifetime: 600, now: Date())
        }
        #expect(try await Self.get(cards, bearer: try token(old)).0 == 200)
        #expect(try await Self.get(cards, bearer: try token(new)).0 == 401)
        try publish([new])
        var status = 0
        for _ in 0..<600 {
            status = try await Self.get(cards, bearer: try token(new)).0
            if status == 200 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(status == 200, "the new key was not put in force: \(server.text)")
        #expect(try await Self.get(cards, bearer: try token(old)).0 == 401)
        // The log comes through a pipe, and may arrive after the answer that followed it.
        for _ in 0..<600 where !server.text.contains("cardholder keys reloaded") { try await Task.sleep(for: .milliseconds(100)) }
        #expect(server.text.contains("cardholder keys reloaded"), "\(server.text)")
        #expect(await server.stop() == 0)
    }

    @Test func productionRefusesToStartWithoutExplicitSecrets() async throws {
        let result = try await CLI.run(["serve", "--production", "--port", "0", "--data-dir", FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-prod-\(UUID().uuidString)").path])
        #expect(result.status != 0)
        #expect(result.stderr.contains("missing: PUSHPROV_ISSUER_API_KEY, PUSHPROV_TSP_API_KEY, PUSHPROV_JWKS, PUSHPROV_KEY_FILE"))
    }

    @Test func productionRefusesExtraTrustAnchors() async throws {
        let result = try await CLI.run(["serve", "--production", "--trust-anchor", CLI.cert("apple-root-ca-g3.pem"), "--port", "0"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("trusts only Apple Root CA - G3"))
    }

    @Test func aBadPortOrPolicyIsOneClearLine() async throws {
        let policy = try await CLI.run(["serve", "--activation-policy", "sometimes", "--port", "0", "--data-dir", "/tmp/pushprov-unused"])
        #expect(policy.status != 0)
        #expect(policy.stderr.contains("activation policy must be in-app or immediate"))
        #expect(policy.stderr.split(separator: "\n").count == 1)
        let flag = try await CLI.run(["serve", "--port", "70000", "--data-dir", "/tmp/pushprov-unused"])
        #expect(flag.status != 0)
        #expect(flag.stderr.contains("port must be a number from 0 to 65535 (got 70000)"), "\(flag.stderr)")
        #expect(flag.stderr.split(separator: "\n").count == 1)
        // No --port here: it would stand in for the variable under test (CLI.run's time limit
        // stops a server this would start).
        let variable = try await CLI.run(["serve", "--data-dir", "/tmp/pushprov-unused"], environment: ["PUSHPROV_PORT": "http"])
        #expect(variable.status != 0)
        #expect(variable.stderr.contains("port must be a number from 0 to 65535 (got http)"), "\(variable.stderr)")
        #expect(variable.stderr.split(separator: "\n").count == 1)
        // A host with a space (or none) is refused before anything is made, not when binding.
        for (arguments, environment, shown) in [(["--host", ""], [String: String](), #""""#), ([], ["PUSHPROV_HOST": "127.0.0.1 "], #""127.0.0.1 ""#)] {
            let directory = "/tmp/pushprov-unused-\(UUID().uuidString)"
            let host = try await CLI.run(["serve", "--port", "0", "--data-dir", directory] + arguments, environment: environment)
            #expect(host.status != 0)
            #expect(host.stderr.contains("host must be an IP address or a host name without spaces (got \(shown))"), "\(host.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory))
        }
    }

    /// A port another server holds is said in one line naming the address.
    @Test func aPortInUseIsOneClearLine() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-port-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let holder = try Server(dataDirectory: directory + "/a")
        defer { holder.stopBlocking() }
        let port = try await holder.port()
        let second = try await CLI.run(["serve", "--port", "\(port)", "--data-dir", directory + "/b"], timeout: .seconds(30))
        #expect(second.status != 0)
        #expect(second.stderr.contains("cannot listen on 127.0.0.1:\(port): the address is in use (another server on that port?); choose another with --port"), "\(second.stderr)")
    }

    @Test func tokenRealignmentRunsBesideTheServerUnlessTurnedOff() async throws {
        let server = try Server(environment: ["PUSHPROV_CONNECTOR_TIMEOUT": "20"])
        defer { server.removeDataDirectory() }
        _ = try await server.port()
        for _ in 0..<600 where !server.text.contains("token realignment runs") { try await Task.sleep(for: .milliseconds(100)) }
        #expect(server.text.contains("token realignment runs"))
        #expect(server.text.contains(#"interval="30 s""#) && server.text.contains(#"grace="120 s""#), "\(server.text)")
        #expect(await server.stop() == 0)
        let off = try Server(arguments: ["--realign-interval", "0"])
        defer { off.removeDataDirectory() }
        _ = try await off.port()
        // Served a request, then stopped: the services have all run (and logged their start)
        // and the whole log has been read by the time the process has exited.
        let (status, _) = try await Self.get("http://127.0.0.1:\(try await off.port())/health")
        #expect(status == 200)
        #expect(try await off.stopAndReadAll() == 0)
        #expect(!off.text.contains("token realignment"), "\(off.text)")
    }

    @Test(arguments: [
        ("--connector-timeout", "0", "PUSHPROV_CONNECTOR_TIMEOUT", "connector timeout must be a number of seconds from 0.1 to 300 (got 0)"),
        ("--realign-interval", "7200", "PUSHPROV_REALIGN_INTERVAL", "realign interval must be 0 (off) or a number of seconds from 1 to 3600 (got 7200)"),
        ("--jwks-reload-interval", "0.5", "PUSHPROV_JWKS_RELOAD_INTERVAL", "JWKS reload interval must be 0 (read only at start) or a number of seconds from 1 to 3600 (got 0.5)"),
        ("--shutdown-grace", "0.5", "PUSHPROV_SHUTDOWN_GRACE", "shutdown grace must be 0 (no limit) or a number of seconds from 1 to 3600 (got 0.5)"),
    ])
    func aBadTimeSettingIsOneClearLine(flag: String, value: String, variable: String, message: String) async throws {
        let fromFlag = try await CLI.run(["serve", flag, value, "--port", "0", "--data-dir", "/tmp/pushprov-unused"])
        #expect(fromFlag.status != 0)
        #expect(fromFlag.stderr.contains(message))
        #expect(fromFlag.stderr.split(separator: "\n").count == 1)
        let fromEnvironment = try await CLI.run(["serve", "--port", "0", "--data-dir", "/tmp/pushprov-unused"], environment: [variable: "soon"])
        #expect(fromEnvironment.status != 0)
        #expect(fromEnvironment.stderr.contains("(got soon)"))
    }

    /// A connection that holds a graceful shutdown (here a request whose body never comes,
    /// which the 60 s read timeout would end) is cut once the grace has passed: the server
    /// stops within it, cleanly (exit 0, the SQLite file checkpointed, its log removed).
    @Test func aShutdownPastItsGraceCancelsWhatIsLeft() async throws {
        let server = try Server(arguments: ["--shutdown-grace", "1"])
        defer { server.removeDataDirectory() }
        let port = try await server.port()
        let connection = try Self.connect(port: port)
        defer { close(connection) }
        let head = "PUT /lifecycle/cards/card-1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"userId\":"
        let bytes = Array(head.utf8)
        try #require(bytes.withUnsafeBytes { systemSend(connection, $0.baseAddress, $0.count, 0) } == bytes.count)
        // Time for the server to read the head and wait for the body.
        try await Task.sleep(for: .milliseconds(500))
        let asked = ContinuousClock.now
        server.process.terminate()
        while server.process.isRunning, ContinuousClock.now - asked < .seconds(40) { try await Task.sleep(for: .milliseconds(50)) }
        let took = ContinuousClock.now - asked
        #expect(!server.process.isRunning, "still running 40 s after SIGTERM")
        #expect(took < .seconds(20), "stopped \(took) after SIGTERM; the grace is 1 s")
        #expect(try await server.stopAndReadAll() == 0)
        #expect(FileManager.default.fileExists(atPath: server.dataDirectory + "/pushprov.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: server.dataDirectory + "/pushprov.sqlite-wal"), "the database was closed")
    }

    #if os(Linux)
    /// The server writes no core file should it crash: its memory holds the vault's keys and
    /// the card numbers it seals.
    @Test func theServerWritesNoCoreFile() async throws {
        // The hard limit the server starts with, from this process: were it 0 already, the
        // check below could not fail.
        let inherited = try String(contentsOfFile: "/proc/self/limits", encoding: .utf8)
        let inheritedCore = try #require(inherited.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        try #require(inheritedCore.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2).last != "0", "this process may not make core files: \(inheritedCore)")
        let server = try Server()
        defer { server.removeDataDirectory() }
        _ = try await server.port()
        let limits = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/limits", encoding: .utf8)
        let core = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        #expect(core.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) == ["0", "0"], "\(core)")
    }
    #endif

    /// A blocking TCP connection to 127.0.0.1:`port`.
    static func connect(port: Int) throws -> Int32 {
        #if canImport(Glibc)
        let connection = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let connection = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        try #require(connection >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { systemConnect(connection, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if connected != 0 { close(connection) }
        try #require(connected == 0, "cannot connect to port \(port)")
        return connection
    }
}
