import Foundation

/// A SQLite file path in the temporary directory that no test shares.
public struct TemporarySQLiteFile: Sendable {
    /// The database file's path (its `-wal` and `-shm` files sit beside it).
    public let path: String

    /// A fresh path whose file name starts with `prefix`.
    public init(_ prefix: String) {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString).sqlite").path
    }

    /// Removes the database file and its write-ahead log files.
    public func remove() {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }
}
