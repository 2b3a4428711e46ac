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
    /// This form waits by blocking the calling thread: call it from a thread of your own, never
    /// from Swift concurrency's cooperative pool (which has as many threads as the device has
    /// cores). From `async` code use ``withLockWithoutBlocking(waitingAtMost:isolation:_:)``.
    ///
    /// Keep `body` to quick file and Keychain work (never the network): iOS ends a suspended
    /// process that holds a lock on a file in a shared container.
    ///
    /// - Parameter patience: The longest to wait for the lock (nil: as long as it takes).
    /// - Throws: ``SharedStorageError`` when the lock file cannot be opened or locked, or
    ///   (`busy`) another process kept it past `patience` (then `body` has not run), or what
    ///   `body` throws.
    public func withLock<T>(waitingAtMost patience: Duration? = nil, _ body: () throws -> T) throws -> T {
        let descriptor = try openLockFile()
        defer { close(descriptor) }
        if let patience {
            let deadline = ContinuousClock.now + patience
            while try !lock(descriptor) {
                guard ContinuousClock.now < deadline else { throw busy(patience) }
                usleep(2_000)
            }
        } else {
            while flock(descriptor, LOCK_EX) != 0 {
                guard errno == EINTR else { throw lockFailure() }
            }
        }
        // Closing the descriptor releases the lock too; unlocking first says so plainly.
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    /// Runs `body` holding the folder's lock if no other process holds it now; nil (and `body`
    /// not run) if one does. Never waits.
    ///
    /// - Throws: ``SharedStorageError`` when the lock file cannot be opened or locked, or what
    ///   `body` throws.
    public func withLockIfFree<T>(_ body: () throws -> T) throws -> T? {
        let descriptor = try openLockFile()
        defer { close(descriptor) }
        guard try lock(descriptor) else { return nil }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    /// ``withLock(waitingAtMost:_:)`` for `async` code: waits for the lock without holding a
    /// thread (it tries, and sleeps between tries: 1 ms at first, growing to 16 ms), so a
    /// process that keeps the lock stalls only this task. `body` runs on the caller's actor.
    ///
    /// - Parameter patience: The longest to wait for the lock (nil: as long as it takes).
    /// - Throws: ``SharedStorageError`` as ``withLock(waitingAtMost:_:)`` does;
    ///   `CancellationError` when the task is cancelled while it waits (`body` not run).
    public func withLockWithoutBlocking<T>(waitingAtMost patience: Duration?, isolation: isolated (any Actor)? = #isolation, _ body: () throws -> T) async throws -> T {
        try await Self.retryingWhileBusy(waitingAtMost: patience) { try withLockIfFree(body) }
    }

    /// Calls `attempt` until it answers (non-nil), sleeping between tries (1 ms at first,
    /// doubling to 16 ms); nil means the lock was busy. Throws ``SharedStorageError`` `busy`
    /// once `patience` has passed, `CancellationError` when the task is cancelled, and what
    /// `attempt` throws.
    static func retryingWhileBusy<T>(waitingAtMost patience: Duration?, isolation: isolated (any Actor)? = #isolation, _ attempt: () throws -> T?) async throws -> T {
        let deadline = patience.map { ContinuousClock.now + $0 }
        var pause = Duration.milliseconds(1)
        while true {
            if let answer = try attempt() { return answer }
            if let deadline, let patience, ContinuousClock.now >= deadline {
                throw SharedStorageError(.busy, "another process held the shared folder's lock for more than \(patience)")
            }
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(16))
        }
    }

    private func openLockFile() throws -> Int32 {
        let path = lockURL.path
        try? FileManager.default.createDirectory(at: lockURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw SharedStorageError(.io, "cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        #if canImport(Darwin)
        // Openable whenever the device has been unlocked once since boot, as the files it
        // guards: under an app's default class `complete`, neither side could open it while the
        // device is locked, and both would go on without it.
        try? FileManager.default.setAttributes([.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication], ofItemAtPath: path)
        #endif
        return descriptor
    }

    /// Takes the lock if it is free: true when taken, false when another holds it.
    private func lock(_ descriptor: Int32) throws -> Bool {
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            if errno == EWOULDBLOCK { return false }
            throw lockFailure()
        }
        return true
    }

    private func lockFailure() -> SharedStorageError {
        SharedStorageError(.io, "cannot lock \(lockURL.path): \(String(cString: strerror(errno)))")
    }

    private func busy(_ patience: Duration) -> SharedStorageError {
        SharedStorageError(.busy, "another process held the lock \(lockURL.path) for more than \(patience)")
    }
}
