import Foundation
@testable import pushprov

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
/// pull request 5472, fixed after Swift 6.3.1), and this suite starts a hundred children. The
/// child is started as `pushprov demo` starts its own (``ChildProcess``): its own process group,
/// an empty signal mask, every signal's default action, `/dev/null` as standard input.
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
        // Pipes are made and marked close-on-exec under the lock the spawn is made under, so no
        // other child of these tests inherits a pipe's write end (its reader would then wait
        // for that child too).
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        var pipes: [(read: Int32, write: Int32)] = []
        defer { for pipe in pipes { close(pipe.write) } }
        func makePipe() throws -> (read: Int32, write: Int32) {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            pipes.append((ends[0], ends[1]))
            return (ends[0], ends[1])
        }
        let streams: (out: ChildProcess.Stream, err: ChildProcess.Stream)
        var reads: (out: Int32?, err: Int32?) = (nil, nil)
        switch output {
        case .discarded:
            streams = (.discard, .discard)
        case .separate:
            let (out, err) = (try makePipe(), try makePipe())
            streams = (.descriptor(out.write), .descriptor(err.write))
            reads = (out.read, err.read)
        case .combined:
            let both = try makePipe()
            streams = (.descriptor(both.write), .descriptor(both.write))
            reads.out = both.read
        }
        do {
            processIdentifier = try ChildProcess.spawn(
                executable, arguments: arguments, environment: environment,
                standardOutput: streams.out, standardError: streams.err, currentDirectory: currentDirectory
            )
        } catch {
            for pipe in pipes { close(pipe.read) }
            throw error
        }
        standardOutput = reads.out.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        standardError = reads.err.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
    }

    /// Held while pipes are made and a child spawned (see `init`).
    private static let spawning = NSLock()

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
