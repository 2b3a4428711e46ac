import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension SharedWalletDirectory {
    /// The lock file every process sharing the folder locks around a change that must not
    /// interleave with a sign-out: beside the folder, so wiping the folder leaves it alone
    /// (a lock file removed while locked would let the next process lock a new file).
    public var lockURL: URL {
        url.deletingLastPathComponent().appendingPathComponent("PushProvisioning.lock")
    }

    /// Runs `body` holding the folder's lock: an exclusive `flock` on ``lockURL``, which the
    /// app and its extensions take alike (they are separate processes). Sign-out wipes the
    /// shared files and secrets under it (``SharedWalletStorage``), and the Wallet extension
    /// checks its session is still stored and writes its snapshot under it, so no sign-out
    /// falls between that check and the write.
    ///
    /// Waits while another process holds the lock; keep `body` to quick file and Keychain
    /// work (never the network): iOS ends a suspended process that holds a lock on a file in
    /// a shared container.
    ///
    /// - Parameter patience: The longest to wait for the lock (nil: as long as it takes); the
    ///   Wallet extension, answering within Wallet's budgets, waits a bounded time.
    /// - Throws: ``SharedStorageError`` when the lock file cannot be opened or locked, or
    ///   (`busy`) another process kept it past `patience` (then `body` has not run), or what
    ///   `body` throws.
    public func withLock<T>(waitingAtMost patience: Duration? = nil, _ body: () throws -> T) throws -> T {
        let path = lockURL.path
        try? FileManager.default.createDirectory(at: lockURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw SharedStorageError(.io, "cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        #if canImport(Darwin)
        // Openable whenever the device has been unlocked once since boot, as the files it
        // guards: under an app's default class `complete`, neither side could open it while the
        // device is locked, and both would go on without it.
        try? FileManager.default.setAttributes([.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication], ofItemAtPath: path)
        #endif
        if let patience {
            let deadline = ContinuousClock.now + patience
            while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
                guard errno == EWOULDBLOCK || errno == EINTR else {
                    throw SharedStorageError(.io, "cannot lock \(path): \(String(cString: strerror(errno)))")
                }
                guard ContinuousClock.now < deadline else {
                    throw SharedStorageError(.busy, "another process held the lock \(path) for more than \(patience)")
                }
                usleep(2_000)
            }
        } else {
            while flock(descriptor, LOCK_EX) != 0 {
                guard errno == EINTR else {
                    throw SharedStorageError(.io, "cannot lock \(path): \(String(cString: strerror(errno)))")
                }
            }
        }
        // Closing the descriptor releases the lock too; unlocking first says so plainly.
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}
