import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn`, for the tests that run the `pushprov` binary.
///
/// Not Foundation's `Process`: on Linux its `run()` intermittently crashes the whole test
/// binary with a read past a buffer while it lists `/proc/self/fd` (swift-corelibs-foundation
/// pull request 5472, fixed after Swift 6.3.1), and this suite starts a hundred children. As
/// `Process` does, the child gets its own process group, an empty signal mask and default
/// handling for every signal; its standard input is `/dev/null`.
final class SpawnedProcess: @unchecked Sendable {
    // @unchecked: `status` is only touched while holding `lock`.
    /// Where the child's standard output and error go.
    enum Output {
        /// Discarded.
        case discarded
        /// A pipe each, read through ``standardOutput`` and ``standardError``.
        case separate
        /// One pipe for both, read through ``standardOutput``.
        case combined
    }

    /// The child's process id.
    let processIdentifier: pid_t
    /// The read end of the child's standard output (nil when discarded).
    let standardOutput: FileHandle?
    /// The read end of the child's standard error (nil unless ``Output/separate``).
    let standardError: FileHandle?
    private let lock = NSLock()
    private var status: Int32?

    /// Starts `executable` with `arguments` (not counting its own name) and exactly `environment`;
    /// in `currentDirectory` when given.
    init(executable: String, arguments: [String], environment: [String: String], currentDirectory: String? = nil, output: Output) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigfillset(&defaults)
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        // Pipes made close-on-exec: only the ends duplicated onto 1 and 2 reach the child.
        var pipes: [(read: Int32, write: Int32)] = []
        defer { for pipe in pipes { close(pipe.write) } }
        func makePipe() throws -> (read: Int32, write: Int32) {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            pipes.append((ends[0], ends[1]))
            return (ends[0], ends[1])
        }
        // Pipes are made and marked close-on-exec under the lock the spawn is made under, so no
        // other child of these tests inherits a pipe's write end (its reader would then wait
        // for that child too).
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        var outRead: Int32?
        var errRead: Int32?
        switch output {
        case .discarded:
            posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0)
        case .separate:
            let out = try makePipe()
            let err = try makePipe()
            posix_spawn_file_actions_adddup2(&actions, out.write, STDOUT_FILENO)
            posix_spawn_file_actions_adddup2(&actions, err.write, STDERR_FILENO)
            (outRead, errRead) = (out.read, err.read)
        case .combined:
            let both = try makePipe()
            posix_spawn_file_actions_adddup2(&actions, both.write, STDOUT_FILENO)
            posix_spawn_file_actions_adddup2(&actions, both.write, STDERR_FILENO)
            outRead = both.read
        }
        if let currentDirectory {
            guard let addChdir = Self.addChdir else { throw POSIXError(.ENOSYS) }
            _ = addChdir(&actions, currentDirectory)
        }

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let failure = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard failure == 0 else {
            for pipe in pipes { close(pipe.read) }
            throw POSIXError(POSIXErrorCode(rawValue: failure) ?? .EIO)
        }
        processIdentifier = pid
        standardOutput = outRead.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        standardError = errRead.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
    }

    /// Held while pipes are made and a child spawned (see `init`).
    private static let spawning = NSLock()

    /// glibc's `posix_spawn_file_actions_addchdir_np` (2.29 and later), which Swift's Glibc
    /// module does not declare.
    private static let addChdir: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32).self)
    }()

    /// Whether the child has not exited yet (reaping it if it has).
    var isRunning: Bool { reap(blocking: false) == nil }

    /// Sends SIGTERM.
    func terminate() {
        if isRunning { kill(processIdentifier, SIGTERM) }
    }

    /// Waits until the child has exited.
    func waitUntilExit() {
        _ = reap(blocking: true)
    }

    /// The exit status, or the number of the signal that ended the child, as `Process` says it;
    /// waits for the child to exit.
    var terminationStatus: Int32 {
        let status = reap(blocking: true) ?? 0
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// The raw wait status once the child has exited; nil while it runs (`blocking` false).
    /// Blocking, it polls (every 5 ms) rather than hold the lock in `waitpid`, so other
    /// threads asking meanwhile are answered.
    private func reap(blocking: Bool) -> Int32? {
        while true {
            let reaped = lock.withLock { () -> Int32? in
                if let status { return status }
                var raw: Int32 = 0
                while true {
                    let result = waitpid(processIdentifier, &raw, WNOHANG)
                    if result == processIdentifier {
                        status = raw
                        return raw
                    }
                    if result == -1, errno == EINTR { continue }
                    return nil
                }
            }
            if let reaped { return reaped }
            guard blocking else { return nil }
            usleep(5_000)
        }
    }
}
