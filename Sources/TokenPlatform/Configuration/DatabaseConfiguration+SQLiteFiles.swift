import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

extension DatabaseConfiguration {
    /// Refuses a SQLite database whose files (the database, and its `-wal` and `-shm` when
    /// present) group or others can read or write, or that belong to a user other than this
    /// process's or root; warns when their directory can be written by others without the
    /// sticky bit.
    ///
    /// Whoever can read the files reads what TMP stores (card numbers are encrypted, but not
    /// tokens, lookup hashes or the audit), and whoever can write them or owns them can change
    /// it: the same rule as for the key file, with the same exception for root. SQLite gives
    /// a new `-wal` and `-shm` the database file's mode, so a database file made 0600 keeps
    /// them private; an existing one is checked here, however the path was given. A directory
    /// others can write lets them remove or replace the files, which a mode cannot prevent:
    /// that is worth saying, not refusing (a shared `/srv` owned by a team, say).
    ///
    /// - Parameter user: the user the files must belong to (besides root); this process's.
    package static func checkSQLiteFiles(at path: String, user: uid_t = geteuid(), logger: Logger) throws(ConfigurationError) {
        for file in [path, path + "-wal", path + "-shm"] {
            var status = stat()
            // A file that is not there is SQLite's to create (or, for the database, to report).
            guard stat(file, &status) == 0 else { continue }
            // A directory or a device is no database: its mode is not the problem, and
            // `chmod 600` on it would break something else.
            guard status.st_mode & S_IFMT == S_IFREG else {
                let kind = status.st_mode & S_IFMT == S_IFDIR ? "a directory" : "not a regular file"
                throw ConfigurationError("database file \(file) is \(kind); give the path of a SQLite database file (it is created if missing)")
            }
            guard status.st_uid == user || status.st_uid == 0 else {
                throw ConfigurationError("database file \(file) belongs to user id \(status.st_uid), neither this process's user (\(user)) nor root; whoever owns it can read and change the stored cards: chown it, or run as its owner")
            }
            let mode = status.st_mode & 0o777
            guard mode & 0o077 == 0 else {
                throw ConfigurationError("database file \(file) has mode \(String(mode, radix: 8)); it must be readable and writable by its owner only (chmod 600 \(file))")
            }
        }
        let parent = (path as NSString).deletingLastPathComponent
        let directory = parent.isEmpty ? "." : parent
        var status = stat()
        if stat(directory, &status) == 0, status.st_mode & S_IWOTH != 0, status.st_mode & S_ISVTX == 0 {
            logger.warning(
                "database directory can be written by every user, without the sticky bit: anyone can remove or replace the database and its -wal and -shm; chmod o-w (or +t) it, or move the database",
                metadata: ["directory": "\(directory)", "mode": "\(String(status.st_mode & 0o7777, radix: 8))"]
            )
        }
    }
}
