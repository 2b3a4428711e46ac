import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Starts the real `pushprov serve` binary on a free loopback port and drives it over HTTP.
@Suite("pushprov serve", .serialized)
struct ServeCommandTests {
    final class Server: @unchecked Sendable {
        // @unchecked: `output` is only touched while holding `lock`.
        let process = Process()
        let lock = NSLock()
        var output = ""
        let dataDirectory: String

        init(dataDirectory: String? = nil, arguments: [String] = [], environment: [String: String] = [:]) throws {
            self.dataDirectory = dataDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-serve-\(UUID().uuidString)").path
            process.executableURL = CLI.binary
            process.arguments = ["serve", "--port", "0", "--data-dir", self.dataDirectory] + arguments
            var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHPROV_") }
            env.merge(environment) { $1 }
            process.environment = env
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
                let chunk = String(decoding: handle.availableData, as: UTF8.self)
                self?.lock.withLock { self?.output += chunk }
            }
            try process.run()
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

        func stop() -> Int32 {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    static func get(_ url: String, bearer: String? = nil) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: url)!)
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, String(decoding: data, as: UTF8.self))
    }

    @Test func embeddedRunStartsGeneratesSecretsOnceServesAndStopsOnSIGTERM() async throws {
        let server = try Server()
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
        let token = try CLI.run(["dev-token", "--user", "alice", "--data-dir", server.dataDirectory])
        #expect(token.status == 0)
        let jwt = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let (cardsStatus, cards) = try await Self.get("http://127.0.0.1:\(port)/issuer/push-provisioning/cards", bearer: jwt)
        #expect(cardsStatus == 200 && cards == #"{"cards":[]}"#)
        let (unauthorized, _) = try await Self.get("http://127.0.0.1:\(port)/issuer/push-provisioning/cards", bearer: "nope")
        #expect(unauthorized == 401)
        #expect(server.stop() == 0)

        // A second start reuses the keys and does not print the secrets again.
        let restarted = try Server(dataDirectory: server.dataDirectory)
        let secondPort = try await restarted.port()
        #expect(!restarted.text.contains("issuer API key (PUSHPROV_ISSUER_API_KEY): "))
        #expect(restarted.text.contains("from \(server.dataDirectory)/secrets.json"))
        let (stillValid, _) = try await Self.get("http://127.0.0.1:\(secondPort)/issuer/push-provisioning/cards", bearer: jwt)
        #expect(stillValid == 200)
        #expect(restarted.stop() == 0)
    }

    @Test func swiftsOwnPoolCanBeChosenAndServesToo() async throws {
        let server = try Server(arguments: ["--executor", "swift"])
        let port = try await server.port()
        #expect(server.text.contains("· executor swift"))
        let (status, body) = try await Self.get("http://127.0.0.1:\(port)/health")
        #expect(status == 200 && body.contains("\"ok\""))
        #expect(server.stop() == 0)
        let refused = try CLI.run(["serve", "--executor", "threads", "--data-dir", "/tmp/pushprov-unused"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("executor must be event-loops or swift (got threads)"))
    }

    @Test func productionRefusesToStartWithoutExplicitSecrets() throws {
        let result = try CLI.run(["serve", "--production", "--port", "0", "--data-dir", FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-prod-\(UUID().uuidString)").path])
        #expect(result.status != 0)
        #expect(result.stderr.contains("missing: PUSHPROV_ISSUER_API_KEY, PUSHPROV_TSP_API_KEY, PUSHPROV_JWKS, PUSHPROV_KEY_FILE"))
    }

    @Test func productionRefusesExtraTrustAnchors() throws {
        let result = try CLI.run(["serve", "--production", "--trust-anchor", CLI.cert("apple-root-ca-g3.pem"), "--port", "0"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("trusts only Apple Root CA - G3"))
    }

    @Test func aBadPortOrPolicyIsOneClearLine() throws {
        let policy = try CLI.run(["serve", "--activation-policy", "sometimes", "--data-dir", "/tmp/pushprov-unused"])
        #expect(policy.status != 0)
        #expect(policy.stderr.contains("activation policy must be in-app or immediate"))
        #expect(policy.stderr.split(separator: "\n").count == 1)
    }

    @Test func aBadConnectorTimeoutIsOneClearLine() throws {
        let flag = try CLI.run(["serve", "--connector-timeout", "0", "--data-dir", "/tmp/pushprov-unused"])
        #expect(flag.status != 0)
        #expect(flag.stderr.contains("connector timeout must be a number of seconds greater than 0 and at most 300 (got 0)"))
        #expect(flag.stderr.split(separator: "\n").count == 1)
        let env = try CLI.run(["serve", "--data-dir", "/tmp/pushprov-unused"], environment: ["PUSHPROV_CONNECTOR_TIMEOUT": "soon"])
        #expect(env.status != 0)
        #expect(env.stderr.contains("(got soon)"))
    }
}
