#if !canImport(PassKit)
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs `pushprov demo` in a child process and removes the child's temporary folders once it
/// has ended.
///
/// The demo's temporary folders (its data directory with the run's keys, the App Group
/// container with the extensions' secrets) are written to from several threads while it
/// runs, so a process cannot reliably remove them from its own signal handler: a write racing
/// the removal leaves a folder behind. Here the child gets a folder of the supervisor's as its
/// `TMPDIR` (0700, `pushprov-demo-run-<UUID>`), and the supervisor removes that folder after
/// the child has exited — normally, on Ctrl-C (the terminal signals both), on a TERM (passed
/// on to the child), or on a crash — when nothing can write to it any more.
enum DemoSupervisor {
    /// Set in the child's environment: the process is the one that runs the demo.
    static let childVariable = "PUSHPROV_DEMO_CHILD"

    /// Runs the demo with this process's arguments in a child, waits for it, removes its
    /// folder, and returns its exit status (128 + the signal's number when a signal ended it).
    static func run() async throws -> Int32 {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: folder) }

        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        child.arguments = Array(CommandLine.arguments.dropFirst())
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = folder.path
        environment[childVariable] = "1"
        child.environment = environment

        // INT and TERM are passed on to the child (a signal that comes before it exists is
        // held until it does); this process ends when the child has, after the clean-up.
        let forwarder = SignalForwarder()
        let sources = [SIGINT, SIGTERM].map { (number: Int32) -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { forwarder.forward(number) }
            source.resume()
            return source
        }
        defer {
            for source in sources { source.cancel() }
        }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
            child.terminationHandler = { process in
                forwarder.ended()
                let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
                continuation.resume(returning: status)
            }
            do {
                try child.run()
            } catch {
                continuation.resume(throwing: CLIError("cannot start the demo's process: \(error)"))
                return
            }
            forwarder.started(child.processIdentifier)
        }
    }

    /// Passes signals on to the child once it has a process id.
    private final class SignalForwarder: @unchecked Sendable {
        private let lock = NSLock()
        private var child: pid_t = 0
        private var pending: [Int32] = []

        /// Sends `number` to the child, or holds it until the child exists (a signal to
        /// process id 0 would go to the whole process group).
        func forward(_ number: Int32) {
            lock.withLock {
                if child > 0 { _ = kill(child, number) } else if child == 0 { pending.append(number) }
            }
        }

        /// The child is running as `pid`: the held signals go to it.
        func started(_ pid: pid_t) {
            lock.withLock {
                guard child == 0 else { return }
                child = pid
                for number in pending { _ = kill(pid, number) }
                pending = []
            }
        }

        /// The child has ended: later signals go nowhere (its process id may be reused).
        func ended() {
            lock.withLock { child = -1 }
        }
    }
}
#endif
