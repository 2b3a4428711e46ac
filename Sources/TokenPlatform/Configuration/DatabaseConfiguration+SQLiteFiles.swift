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

extension DatabaseConfiguration {
    /// Why this process cannot use the SQLite database at `path`, in one line that names the
    /// path and the directory or file at fault, or nil when nothing stands in the way that file
    /// permissions decide. SQLite itself would say only "unable to open database file" (error
    /// 14), and Foundation a permission error without the file the command was given.
    ///
    /// - A directory of the path this process may not search: the database cannot be reached
    ///   (not "does not exist": it may well exist).
    /// - An existing database this process cannot read and write.
    /// - A directory SQLite cannot create the `-wal` or `-shm` file in, when one is missing.
    /// - With `creating`, a missing database whose nearest existing directory this process
    ///   cannot write (the file, or the folders to it, would have to be made there).
    ///
    /// - A symbolic link to a file that does not exist (SQLite would create its target
    ///   readable by others; ``danglingLinkProblem(at:)``).
    ///
    /// A missing database without `creating` is the caller's to report (nil here).
    /// Through a symbolic link, the directory that counts is the target's, where SQLite puts
    /// the `-wal` and `-shm` files.
    package static func sqliteAccessProblem(at path: String, creating: Bool) -> String? {
        var status = stat()
        if stat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFREG else { return nil }  // checkSQLiteFiles says what it is
            if !mayAccess(path, R_OK | W_OK) {
                let advice = status.st_uid == geteuid() ? "chmod 600 \(path)" : "run the command as its owner"
                return "cannot open the database \(path): this process (user id \(geteuid())) may not read and write it (owner user id \(status.st_uid), mode \(String(status.st_mode & 0o777, radix: 8))); \(advice)"
            }
            var file = path
            if let resolved = realpath(path, nil) {
                file = String(cString: resolved)
                free(resolved)
            }
            let directory = directoryOf(file)
            let missing = ["-wal", "-shm"].filter { access(file + $0, F_OK) != 0 }
            if !missing.isEmpty, !mayAccess(directory, W_OK | X_OK) {
                return "cannot open the database \(path): SQLite creates its \(missing.joined(separator: " and ")) file\(missing.count == 1 ? "" : "s") in \(directory), which this process (user id \(geteuid())) may not write"
            }
            return nil
        }
        let failure = errno
        var link = stat()
        if lstat(path, &link) == 0, link.st_mode & S_IFMT == S_IFLNK {
            // A dangling link is refused here (before a first start makes keys and secrets, and
            // rather than taken for a database lacking its migrations); an unreachable one is
            // left to opening it, which says why.
            return failure == ENOENT ? danglingLinkProblem(at: path) : nil
        }
        switch failure {
        case EACCES:
            let blocked = unsearchableDirectory(on: path) ?? directoryOf(path)
            return "cannot reach the database \(path): this process (user id \(geteuid())) may not enter the directory \(blocked)"
        case ENOENT where creating:
            var existing = directoryOf(path)
            while access(existing, F_OK) != 0, existing != "/", existing != "." {
                existing = directoryOf(existing)
            }
            if !mayAccess(existing, W_OK | X_OK) {
                return "cannot create the database \(path): this process (user id \(geteuid())) may not write the directory \(existing)"
            }
            return nil
        default:
            return nil
        }
    }

    /// Whether this process, as its effective user, may access `path` as `mode` says.
    private static func mayAccess(_ path: String, _ mode: Int32) -> Bool {
        faccessat(AT_FDCWD, path, mode, AT_EACCESS) == 0
    }

    /// The directory holding `path` (`.` for a bare name).
    private static func directoryOf(_ path: String) -> String {
        let parent = (path as NSString).deletingLastPathComponent
        return parent.isEmpty ? "." : parent
    }

    /// The first directory on the way to `path` that this process may not search, if any.
    private static func unsearchableDirectory(on path: String) -> String? {
        var prefix = path.hasPrefix("/") ? "/" : ""
        let components = path.split(separator: "/").dropLast()
        for component in components {
            prefix = prefix.isEmpty || prefix.hasSuffix("/") ? prefix + component : prefix + "/" + component
            if !mayAccess(prefix, F_OK), errno == EACCES { return directoryOf(prefix) }
            if !mayAccess(prefix, X_OK) { return prefix }
        }
        return nil
    }
}
