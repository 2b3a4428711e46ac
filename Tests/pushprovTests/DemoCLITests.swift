import Foundation
import Testing

@Suite("pushprov demo", .serialized)
struct DemoCLITests {
    @Test func theDemoPassesAndReportsEveryStepAsJSON() async throws {
        let result = try await CLI.run(["demo", "--json"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(report["passed"] as? Bool == true)
        let steps = try #require(report["steps"] as? [[String: Any]])
        #expect(steps.count >= 10)
        #expect(steps.allSatisfy { $0["passed"] as? Bool == true && $0["milliseconds"] is Double })
        #expect(!result.stdout.contains("4111111111111111"), "no card number in the trace")
    }

    @Test func theReadableTraceNumbersEachStepAndEndsWithTheTally() async throws {
        let result = try await CLI.run(["demo"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("ok    1. "))
        #expect(result.stdout.contains(" steps as expected\n"))
        #expect(!result.stdout.contains("FAIL"))
    }

    /// The demo's temporary data directory holds the run's keys (keys.json, secrets.json): it
    /// goes whatever the database, and when the start fails.
    @Test(arguments: [
        ("postgres://demo@/pushprov", "a setting refused while the configuration is resolved"),
        ("/proc/pushprov-demo/demo.sqlite", "a database that cannot be opened"),
        ("SHARED", "a database of the caller's that works"),
    ])
    func noTemporaryDirectoryIsLeftBehind(database: String, what: String) async throws {
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-tmp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let shared = database == "SHARED"
        let setting = shared ? temporary.appendingPathComponent("shared.sqlite").path : database
        let result = try await CLI.run(["demo", "--json", "--database", setting], environment: ["TMPDIR": temporary.path])
        #expect(result.status == (shared ? 0 : 1), "\(what): \(result.stdout)\(result.stderr)")
        let left = try FileManager.default.contentsOfDirectory(atPath: temporary.path).filter { $0.hasPrefix("pushprov-demo-") }
        #expect(left.isEmpty, "\(what): \(left)")
    }

    /// The demo reads its database from `--database` only: a `PUSHPROV_DATABASE` a shell
    /// exports for `serve` is not written to (sample cards under keys thrown away at the end
    /// would be left in it), nor is the variable the supervisor hands its child, when it
    /// comes from the caller's environment.
    @Test func theDemoIgnoresDatabaseSettingsInItsEnvironment() async throws {
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-tmp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let shared = temporary.appendingPathComponent("serve.sqlite").path
        let handed = temporary.appendingPathComponent("handed.sqlite").path
        let result = try await CLI.run(["demo", "--json"], environment: ["PUSHPROV_DATABASE": shared, "PUSHPROV_DEMO_DATABASE": handed])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: shared))
        #expect(!FileManager.default.fileExists(atPath: handed))
    }

    /// A PostgreSQL URL with a password given as `--database` draws the warning the other
    /// commands print, and stays off the command line of the process that runs the demo (it
    /// goes in that process's environment, readable by its own user only). That process also
    /// runs without core files (a check that bites only where this test's own limit allows
    /// them: `ulimit -c unlimited`). Before, the password was on both processes' command lines.
    @Test(.enabled(if: TestPostgres.url != nil, "set PUSHPROV_TEST_POSTGRES_URL (scripts/postgres-dev.sh start) to run the PostgreSQL CLI test"))
    func aDatabasePasswordIsWarnedOfAndKeptOffTheDemosOwnCommandLine() async throws {
        try await TestPostgres.withDatabase { url in
            let credential = ":\(url.password ?? "")@"
            try #require(credential.count > 2, "the test server's URL has a password")
            let seen = Seen()
            let watching = Task.detached {
                while !Task.isCancelled {
                    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
                        guard let pid = Int32(entry), let line = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { continue }
                        let arguments = line.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
                        // The child is started as /proc/self/exe.
                        guard [CLI.binary.path, "/proc/self/exe"].contains(arguments.first ?? ""), arguments.dropFirst().first == "demo" else { continue }
                        let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8))?.split(separator: "\n").first { $0.hasPrefix("Max core file size") }
                        // Judged on one reading of one process: until its exec, a child spawned
                        // with vfork shows its parent's command line under its own id.
                        seen.lock.withLock {
                            if arguments.first == "/proc/self/exe" {
                                seen.children.insert(pid)
                                if arguments.contains(where: { $0.contains(credential) }) { seen.withCredential.insert(pid) }
                                if let limits { seen.childCoreLimits.append(String(limits)) }
                            }
                        }
                    }
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            let result = try await CLI.run(["demo", "--json", "--database", url.absoluteString])
            watching.cancel()
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            #expect(result.stderr.contains("pushprov: warning: --database holds a password"), "\(result.stderr)")
            #expect(!result.stdout.contains(credential) && !result.stderr.contains(credential))
            let (withCredential, children, childCoreLimits) = seen.lock.withLock { (seen.withCredential, seen.children, seen.childCoreLimits) }
            #expect(!children.isEmpty, "the demo's own process was seen")
            #expect(withCredential.isEmpty, "the demo's own process had the password on its command line: \(withCredential)")
            #expect(!childCoreLimits.isEmpty && childCoreLimits.allSatisfy { $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) == ["0", "0"] }, "\(childCoreLimits)")
        }
    }

    /// What the watch of the process list saw.
    final class Seen: @unchecked Sendable {
        // @unchecked: the sets are only touched while holding `lock`.
        let lock = NSLock()
        /// The demo's own processes seen with the password on their command line.
        var withCredential: Set<Int32> = []
        var children: Set<Int32> = []
        var childCoreLimits: [String] = []
    }

    /// A TMPDIR that does not exist, or is a file, is refused in one line; nothing is created.
    @Test func aTemporaryFolderThatIsNoDirectoryIsRefusedInOneLine() async throws {
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-tmp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let missing = temporary.appendingPathComponent("missing/sub").path
        let file = temporary.appendingPathComponent("file").path
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        for (tmpdir, reason) in [(missing, "No such file or directory"), (file, "Not a directory")] {
            let result = try await CLI.run(["demo"], environment: ["TMPDIR": tmpdir])
            #expect(result.status == 1)
            #expect(result.stderr == "Error: cannot make the demo's temporary folder in \(tmpdir): \(reason); set TMPDIR to an existing directory\n", "\(result.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path) == ["file"])
    }

    /// A demo process whose supervisor is gone (its parent is not the process named in
    /// PUSHPROV_DEMO_CHILD: here init's id, which is never its parent) stops within half a
    /// second, removing the run's folder: a supervisor killed with KILL leaves no demo running.
    @Test func aDemoWhoseSupervisorIsGoneStopsAndRemovesItsFolder() async throws {
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-tmp-\(UUID().uuidString)")
        let run = temporary.appendingPathComponent("pushprov-demo-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let result = try await CLI.run(["demo"], environment: ["TMPDIR": run.path, "PUSHPROV_DEMO_CHILD": "1"])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("pushprov demo: the supervising process is gone; stopping"), "\(result.stderr)")
        // Removed just after the process ended, by the shell it left for that.
        for _ in 0..<100 where FileManager.default.fileExists(atPath: run.path) { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!FileManager.default.fileExists(atPath: run.path))
    }

    /// Ctrl-Z stops the demo, not only its supervisor: TSTP to the supervisor (what the
    /// terminal sends its process group) stops the child that runs the demo and then the
    /// supervisor; CONT to the supervisor (`fg`) resumes both, and the demo finishes.
    @Test func aDemoSuspendedWithCtrlZStopsItsChildAndResumesWithIt() async throws {
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-tmp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let process = try Self.startDemo(temporaryFolder: temporary)
        let supervisor = process.processIdentifier
        defer {
            if process.isRunning {
                kill(supervisor, SIGCONT)
                process.terminate()
            }
        }
        var child: pid_t?
        for _ in 0..<600 where child == nil && process.isRunning {
            child = Self.children(of: supervisor).first
            if child == nil { try await Task.sleep(for: .milliseconds(5)) }
        }
        let demo = try #require(child, "the supervisor started the demo's process")

        kill(supervisor, SIGTSTP)
        for _ in 0..<200 where Self.state(of: supervisor) != "T" || Self.state(of: demo) != "T" {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(Self.state(of: demo) == "T", "the demo's process is stopped")
        #expect(Self.state(of: supervisor) == "T", "the supervisor is stopped")
        // Still stopped a while later: nothing resumed either on its own.
        try await Task.sleep(for: .milliseconds(300))
        #expect(Self.state(of: demo) == "T")

        kill(supervisor, SIGCONT)
        for _ in 0..<200 where Self.state(of: demo) == "T" { try await Task.sleep(for: .milliseconds(10)) }
        #expect(Self.state(of: demo) != "T", "the demo's process runs again")
        for _ in 0..<1200 where process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!process.isRunning)
        #expect(process.terminationStatus == 0, "the resumed demo finished")
    }

    /// Starts `pushprov demo` (its output discarded) with `temporaryFolder` as its `TMPDIR`.
    static func startDemo(temporaryFolder: URL) throws -> SpawnedProcess {
        try SpawnedProcess(
            executable: CLI.binary.path, arguments: ["demo"],
            environment: CLI.childEnvironment(inherited: ProcessInfo.processInfo.environment, adding: ["TMPDIR": temporaryFolder.path]), output: .discarded
        )
    }

    /// The process ids whose parent is `parent` (from /proc).
    static func children(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(pid_t.init).filter { pid in statFields(of: pid)?.parent == parent }
    }

    /// A process's state letter from /proc (`T` when stopped), nil once it is gone.
    static func state(of pid: pid_t) -> String? { statFields(of: pid)?.state }

    /// The state and parent of `pid` from /proc/<pid>/stat (its name, in parentheses, may
    /// hold spaces, so the fields are read after its last parenthesis).
    static func statFields(of pid: pid_t) -> (state: String, parent: pid_t)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 1, let parent = pid_t(fields[1]) else { return nil }
        return (String(fields[0]), parent)
    }

    @Test(arguments: [SIGINT, SIGTERM, SIGHUP, SIGQUIT])
    func aDemoInterruptedRemovesItsTemporaryFoldersAndExitsWithTheSignalsStatus(signal number: Int32) async throws {
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-tmp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let process = try Self.startDemo(temporaryFolder: temporary)
        defer { if process.isRunning { process.terminate() } }
        // Interrupted once both folders exist (the data directory with the keys, and the App
        // Group container, in the run's folder), while the demo runs and writes into them.
        var seen: [String] = []
        for _ in 0..<600 where seen.count < 2 && process.isRunning {
            let runs = (try? FileManager.default.contentsOfDirectory(atPath: temporary.path).filter { $0.hasPrefix("pushprov-demo-run-") }) ?? []
            seen = runs.flatMap { run in
                ((try? FileManager.default.contentsOfDirectory(atPath: temporary.appendingPathComponent(run).path)) ?? []).filter { $0.hasPrefix("pushprov-demo-") }
            }
            if seen.count < 2 { try await Task.sleep(for: .milliseconds(5)) }
        }
        try #require(seen.count == 2, "the demo made its two folders: \(seen)")
        let run = try #require(try FileManager.default.contentsOfDirectory(atPath: temporary.path).first { $0.hasPrefix("pushprov-demo-run-") })
        let permissions = try FileManager.default.attributesOfItem(atPath: temporary.appendingPathComponent(run).path)[.posixPermissions] as? Int
        #expect(permissions == 0o700, "the run's folder is its owner's only")
        kill(process.processIdentifier, number)
        for _ in 0..<600 where process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!process.isRunning)
        #expect(process.terminationStatus == 128 + number)
        let left = try FileManager.default.contentsOfDirectory(atPath: temporary.path).filter { $0.hasPrefix("pushprov-demo-") }
        #expect(left.isEmpty, "\(left)")
    }
}
