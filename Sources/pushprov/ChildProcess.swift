#if !canImport(PassKit)
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Starts child processes with `posix_spawn`, as `pushprov demo` needs them.
///
/// Not Foundation's `Process`: on Linux, Swift 6.3.1's `Process.run()` now and then crashes
/// the calling process reading past a buffer while it lists `/proc/self/fd` (fixed upstream in
/// swift-corelibs-foundation after that release). Like `Process`, the child gets a process group
/// of its own, an empty signal mask and every signal's default action.
enum ChildProcess {
    /// A child that could not be started.
    struct SpawnError: Error, CustomStringConvertible {
        /// `posix_spawn`'s error number.
        var code: Int32
        var description: String { String(cString: strerror(code)) }
    }

    /// Where a child's standard output or error goes.
    enum Stream {
        /// Where this process's goes.
        case inherit
        /// To `/dev/null`.
        case discard
        /// To this open descriptor (duplicated onto the stream's number in the child).
        case descriptor(Int32)
    }

    /// Starts `executable` with `arguments` (after its own name) and exactly `environment`, in
    /// `currentDirectory` when given; its standard input from `/dev/null`. Returns its process id.
    static func spawn(
        _ executable: String, arguments: [String], environment: [String: String],
        standardOutput: Stream = .inherit, standardError: Stream = .inherit, currentDirectory: String? = nil
    ) throws(SpawnError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        for (stream, number) in [(standardOutput, STDOUT_FILENO), (standardError, STDERR_FILENO)] {
            switch stream {
            case .inherit: break
            case .discard: posix_spawn_file_actions_addopen(&actions, number, "/dev/null", O_WRONLY, 0)
            case .descriptor(let descriptor): posix_spawn_file_actions_adddup2(&actions, descriptor, number)
            }
        }
        if let currentDirectory {
            guard let addChdir else { throw SpawnError(code: ENOSYS) }
            _ = addChdir(&actions, currentDirectory)
        }
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

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let failure = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard failure == 0 else { throw SpawnError(code: failure) }
        return pid
    }

    /// glibc's `posix_spawn_file_actions_addchdir_np` (2.29 and later), which Swift's Glibc
    /// module does not declare.
    private static let addChdir: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32).self)
    }()

    /// Waits, on a thread of its own, for child `pid` to end, then calls `ended` with its exit
    /// status, or 128 + the number of the signal that ended it.
    static func whenEnded(_ pid: pid_t, _ ended: @escaping @Sendable (Int32) -> Void) {
        Thread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 {
                guard errno == EINTR else { return ended(127) }
            }
            let signal = status & 0x7f
            ended(signal == 0 ? (status >> 8) & 0xff : 128 + signal)
        }.start()
    }
}
#endif
