import CProcessControl

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Keeps the server's memory — the vault's keys, the card numbers being sealed — out of core
/// files and away from other processes of the same user. Swift gives no way to wipe every copy
/// of a value from memory, so what the process holds must not be written out when it crashes.
public enum ProcessHardening {
    /// Sets the size limit of core files to zero, soft and hard, so a crash writes no core file
    /// (and no code in the process can raise the limit again). With `production` on Linux, also
    /// marks the process not dumpable (`PR_SET_DUMPABLE` 0): no core file whatever the limit
    /// or `core_pattern` (a crash handler piping cores elsewhere included), and other processes of
    /// the same user cannot attach to it or read its memory through `/proc`; only root can.
    /// (Left out of the embedded run, where developers attach debuggers.)
    ///
    /// - Returns: A notice for each step the system refused (nothing is refused to an ordinary
    ///   process: lowering a limit is always allowed).
    public static func withholdMemoryFromDumps(production: Bool) -> [String] {
        var notices: [String] = []
        if let refused = turnCoreFilesOff() { notices.append(refused) }
        #if os(Linux)
        if production, let refused = markNotDumpable() { notices.append(refused) }
        #endif
        return notices
    }

    /// Sets the size limit of core files to zero, soft and hard (inherited by child processes);
    /// nil, or why the system refused.
    static func turnCoreFilesOff() -> String? {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        guard setrlimit(coreResource, &none) == 0 else {
            return "could not turn core files off (setrlimit RLIMIT_CORE: errno \(errno)); a crash may write the server's memory to disk"
        }
        return nil
    }

    /// Marks the process not dumpable (Linux; reset by `execve`, so not inherited by a program
    /// it runs); nil, or why the system refused.
    static func markNotDumpable() -> String? {
        guard pushprov_process_set_not_dumpable() == 0 else {
            return "could not mark the process not dumpable (prctl PR_SET_DUMPABLE: errno \(errno))"
        }
        return nil
    }

    /// The size limit of core files, soft and hard, in bytes (`RLIM_INFINITY` as `UInt64.max`).
    public static func coreFileLimit() -> (soft: UInt64, hard: UInt64)? {
        var limit = rlimit()
        guard getrlimit(coreResource, &limit) == 0 else { return nil }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// Whether the process may be dumped or attached to by processes of its user (Linux); nil
    /// elsewhere.
    public static func isDumpable() -> Bool? {
        switch pushprov_process_dumpable() {
        case 0: false
        case 1, 2: true
        default: nil
        }
    }

    #if canImport(Glibc)
    private static let coreResource = __rlimit_resource_t(RLIMIT_CORE.rawValue)
    #else
    private static let coreResource = RLIMIT_CORE
    #endif
}
