import ArgumentParser
import Foundation
import ProvisioningDemo

/// `pushprov demo`: the whole push-provisioning conversation, end to end, on this machine.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run every flow end to end: TMP, the SDK on a simulated iPhone + Watch, Apple's and the network's simulators.",
        discussion: """
            Starts TMP on a free loopback port (a temporary SQLite database unless --database), \
            loads sample cards for two cardholders, and runs with the SDK's real code: status, \
            in-app add to the iPhone (yellow), deep-link activation, add to the Watch (green), \
            add from inside Wallet through the extensions, block and unblock, and another \
            cardholder's refused access. Prints each step's outcome and time; exit status 0 \
            only when every step came out as expected.
            """
    )

    @Option(help: "TMP's database (as for serve); default: a temporary SQLite file. PUSHPROV_DATABASE is not read: the demo writes sample cards under throwaway keys.") var database: String?
    @Flag(help: "Print the trace as JSON instead of text.") var json = false

    @MainActor
    func run() async throws {
        #if canImport(PassKit)
        throw CLIError("the demo plays Apple Wallet through the PassKit shim, which exists only where PassKit does not (Linux)")
        #else
        // The run goes on in a child process whose temporary folders — its keys among them —
        // are all in one folder of this process's; this process removes that folder once the
        // child has ended, however it ended (Ctrl-C, a TERM, a crash).
        //
        // The child gets `--database` in its environment (``DemoSupervisor/databaseVariable``),
        // not on its command line, which every local user can read (a PostgreSQL URL's
        // password with it). `PUSHPROV_DATABASE` is not read: a shell that exports it for
        // `serve` must not have the demo write sample cards, under keys thrown away at its
        // end, into that database.
        guard ProcessInfo.processInfo.environment[DemoSupervisor.childVariable] != nil else {
            if let warning = DatabaseOptions.passwordWarning(for: database) {
                FileHandle.standardError.write(Data("pushprov: \(warning)\n".utf8))
            }
            let status = try await DemoSupervisor.run(arguments: ["demo"] + (json ? ["--json"] : []), database: database)
            if status != 0 { throw ExitCode(status) }
            return
        }
        let database = ProcessInfo.processInfo.environment[DemoSupervisor.databaseVariable]
        // The child: the signals the supervisor passes on end it at once (the supervisor
        // cleans up); it stops by itself if the supervisor is gone.
        for number in DemoSupervisor.forwarded { signal(number, SIG_DFL) }
        DemoSupervisor.watchForOrphaning()
        let json = json
        let trace = json ? DemoTrace() : DemoTrace(echo: Self.printStep)
        if !json { print("pushprov demo: TMP + SDK + simulated Apple Wallet and token service, all on 127.0.0.1\n") }
        let passed = await DemoScenario(database: database).run(trace: trace)
        if json {
            print(String(decoding: try trace.json(), as: UTF8.self))
        } else {
            let steps: [DemoStep] = trace.steps
            let good = steps.filter { $0.passed }.count
            print("\n\(good)/\(steps.count) steps as expected\(passed ? "" : " — FAILED")")
        }
        if !passed { throw ExitCode(1) }
        #endif
    }

    /// Prints one finished step of the readable trace at once.
    @Sendable static func printStep(_ step: DemoStep, _ number: Int) {
        print(DemoTrace.line(step, number: number))
        fflush(nil)
    }
}
