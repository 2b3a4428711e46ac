import Foundation

/// The temporary folders a demo run holds (its data directory with the run's keys, the App
/// Group container with the extensions' secrets), so a run interrupted by a signal can remove
/// them before it exits: ``removeAll()``, from `pushprov demo`'s signal handler.
public enum DemoTemporaryFiles {
    private final class Registry: @unchecked Sendable {
        let lock = NSLock()
        var folders: Set<URL> = []
    }

    private static let registry = Registry()

    /// Notes `folder` as one to remove if the run is interrupted.
    static func register(_ folder: URL) {
        registry.lock.withLock { _ = registry.folders.insert(folder) }
    }

    /// Forgets `folder` (removed by the run itself).
    static func unregister(_ folder: URL) {
        registry.lock.withLock { _ = registry.folders.remove(folder) }
    }

    /// The folders registered now.
    public static var registered: Set<URL> {
        registry.lock.withLock { registry.folders }
    }

    /// Removes every registered folder (the run is being stopped).
    public static func removeAll() {
        let folders = registry.lock.withLock {
            defer { registry.folders = [] }
            return registry.folders
        }
        for folder in folders { try? FileManager.default.removeItem(at: folder) }
    }
}
