#if !canImport(PassKit)
import Foundation
import TokenPlatform

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
/// the child has exited — normally, on Ctrl-C, a TERM, a HUP (the terminal closed) or a QUIT,
/// each passed on to the child (started in a process group of its own, ``ChildProcess``, so the
/// terminal signals only this process), or on a crash — when nothing can write to it any more.
/// A child whose supervisor is gone (killed with KILL, say) notices within half a second and
/// exits, and the folder is removed after it (``watchForOrphaning()``). Job control reaches the
/// child too: Ctrl-Z (TSTP) stops the child and then this process, and a CONT (`fg`, `bg`)
/// resumes both.
enum DemoSupervisor {
    /// Set in the child's environment to the supervisor's process id: the process is the one
    /// that runs the demo.
    static let childVariable = "PUSHPROV_DEMO_CHILD"

    /// Set in the child's environment to the `--database` setting, when given (removed
    /// otherwise, whatever the supervisor's environment holds).
    static let databaseVariable = "PUSHPROV_DEMO_DATABASE"

    /// The signals passed on to the child.
    static let forwarded = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    /// The job-control signals: TSTP stops the child, then this process; CONT resumes the child.
    static let jobControl = [SIGTSTP, SIGCONT]

    /// Runs the demo in a child with `arguments` (after the executable's name) and `database`
    /// in its environment (``databaseVariable``), waits for it, removes its folder, and returns
    /// its exit status (128 + the signal's number when a signal ended it).
    ///
    /// Core files are turned off first, for this process and so for the child: a QUIT (Ctrl-\)
    /// ends the child with a core file by default, and it would hold the run's keys, API keys
    /// and any database password, outside the folder removed here.
    static func run(arguments: [String], database: String?) async throws -> Int32 {
        for notice in ProcessHardening.withholdMemoryFromDumps(production: false) {
            FileHandle.standardError.write(Data("pushprov: \(notice)\n".utf8))
        }
        // The signals are passed on to the child (one that comes before it exists is held until
        // it does); this process ends when the child has, after the clean-up. Set up before the
        // folder exists, so no signal finds the folder made and no one to remove it. A handler
        // that does nothing, not SIG_IGN, keeps the default action from ending this process
        // until the sources take over: a handler does not survive the child's exec, while an
        // ignored signal would stay ignored in the child.
        let forwarder = SignalForwarder()
        let sources = (forwarded + jobControl).map { (number: Int32) -> any DispatchSourceSignal in
            signal(number) { _ in }
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                switch number {
                case SIGTSTP: forwarder.suspend()
                case SIGCONT: forwarder.resumed()
                default: forwarder.forward(number)
                }
            }
            source.resume()
            return source
        }
        defer {
            for source in sources { source.cancel() }
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-demo-run-\(UUID().uuidString)")
        // Only the run's folder is made: a TMPDIR that does not exist (a typo) is not created,
        // with its parents, and left behind.
        guard mkdir(folder.path, 0o700) == 0 else {
            throw CLIError("cannot make the demo's temporary folder in \(FileManager.default.temporaryDirectory.path): \(String(cString: strerror(errno))); set TMPDIR to an existing directory")
        }
        defer { try? FileManager.default.removeItem(at: folder) }

        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = folder.path
        environment[childVariable] = String(getpid())
        environment[databaseVariable] = database

        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
            let child: pid_t
            do {
                child = try ChildProcess.spawn("/proc/self/exe", arguments: arguments, environment: environment)
            } catch {
                continuation.resume(throwing: CLIError("cannot start the demo's process: \(error)"))
                return
            }
            forwarder.started(child)
            ChildProcess.whenEnded(child) { status in
                forwarder.ended()
                continuation.resume(returning: status)
            }
        }
    }

    /// In the child: at once and every half second, checks that the supervisor whose id is in
    /// ``childVariable`` is still its parent; once it is not (it was killed with KILL, and the
    /// child was handed to init), leaves a shell to remove the run's folder (`TMPDIR`, named by
    /// the supervisor) once this process has ended, and exits with status 1.
    static func watchForOrphaning() {
        guard let value = ProcessInfo.processInfo.environment[childVariable], let supervisor = pid_t(value) else { return }
        let folder = FileManager.default.temporaryDirectory
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now(), repeating: 0.5)
        timer.setEventHandler {
            guard getppid() != supervisor else { return }
            // Removed once this process is gone, so no write of the demo's can race it: a
            // shell that waits for this process id to end, then removes the folder.
            if folder.lastPathComponent.hasPrefix("pushprov-demo-run-") {
                _ = try? ChildProcess.spawn(
                    "/bin/sh", arguments: ["-c", "while kill -0 \"$1\" 2>/dev/null; do sleep 0.1; done; rm -rf -- \"$2\"", "sh", String(getpid()), folder.path],
                    environment: ProcessInfo.processInfo.environment, standardOutput: .discard, standardError: .discard
                )
            }
            FileHandle.standardError.write(Data("pushprov demo: the supervising process is gone; stopping\n".utf8))
            exit(1)
        }
        timer.resume()
        orphanTimer.lock.withLock { orphanTimer.timer = timer }
    }

    /// Keeps the orphan check's timer alive for the child's life.
    private final class TimerHolder: @unchecked Sendable {
        let lock = NSLock()
        var timer: (any DispatchSourceTimer)?
    }

    private static let orphanTimer = TimerHolder()

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

        /// Ctrl-Z: stops the child (STOP, which it cannot ignore), then this process, as TSTP's
        /// default action would have (the handler above replaced it). The shell sees this
        /// process stopped and resumes it with CONT (``resumed()``). A TSTP that comes before
        /// the child exists stops only this process, and is not held: the CONT that resumes
        /// this process may come before the child exists, and a child stopped after it would
        /// stay stopped.
        func suspend() {
            lock.withLock {
                if child > 0 { _ = kill(child, SIGSTOP) }
            }
            _ = kill(getpid(), SIGSTOP)
        }

        /// This process was resumed (`fg`, `bg`): so is the child.
        func resumed() {
            lock.withLock {
                if child > 0 { _ = kill(child, SIGCONT) }
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
