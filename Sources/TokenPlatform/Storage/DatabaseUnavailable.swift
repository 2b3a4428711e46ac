import Foundation
import GRDB
import PostgresNIO

/// The database could not serve a request now, though it may shortly: no connection within
/// the configured wait, or the connection lost. The API answers it with
/// `503 database_unavailable`, so load balancers, the app and the token service retry.
///
/// Stores throw it for a wait they bound themselves; errors of the drivers that mean the same
/// are recognized by ``isUnavailable(_:)``.
public struct DatabaseUnavailable: Error, CustomStringConvertible, Sendable {
    /// What happened, for the operator's log (never a statement's arguments).
    public var reason: String
    /// Whether the call's wait for a connection ran out: it sent nothing, so what it was to
    /// write can be tried again while its caller's wait lasts (batched inserts).
    var waitRanOut = false

    /// Creates the error.
    public init(_ reason: String) {
        self.reason = reason
    }

    /// The reason.
    public var description: String { reason }

    /// A call that found no connection within `wait`, and so sent nothing.
    static func waitRanOut(_ wait: Duration) -> DatabaseUnavailable {
        var error = DatabaseUnavailable("no database connection within \(wait.formattedSeconds)")
        error.waitRanOut = true
        return error
    }

    /// A SQLite write whose turn on the writer queue came later than `wait` after it was
    /// asked for, while another process held the database's lock: it began nothing, so
    /// nothing of it was stored.
    static func writerBusy(_ wait: Duration) -> DatabaseUnavailable {
        var error = DatabaseUnavailable("the database's writer did not take the write within \(wait.formattedSeconds) (another process holding its lock, or a disk this slow)")
        error.waitRanOut = true
        return error
    }

    /// A transaction that lost its race with others `attempts` times in a row (a deadlock, a
    /// serialization failure, a unique key taken meanwhile, a row changed between two reads):
    /// the rows it needs are that busy now, so the client is asked to try again.
    static func contention(attempts: Int) -> DatabaseUnavailable {
        DatabaseUnavailable("a transaction lost its race with others \(attempts) times in a row")
    }

    /// Whether `error` means the database is unreachable or cannot take the request for now
    /// (as opposed to a bug, a broken schema or a refused statement):
    /// - ``DatabaseUnavailable`` itself;
    /// - SQLite: busy or locked past the busy timeout, an I/O error, a full disk, a file that
    ///   cannot be opened;
    /// - PostgreSQL: the connection refused, lost or closed, the pool closed, and the server's
    ///   connection errors (SQLSTATE class 08 but 08P01, a client's protocol bug), shutdowns
    ///   (57P01–57P03), an idle session ended (57P05), lack of connections, disk or memory
    ///   (53300, 53100, 53200), a write sent to a read-only standby after a failover (25006),
    ///   and a statement or an idle transaction ended by the statement timeout (57014, the
    ///   server's `statement_timeout` or an operator's `pg_cancel_backend`; 25P03).
    public static func isUnavailable(_ error: any Error) -> Bool {
        switch error {
        case is DatabaseUnavailable:
            return true
        case let error as DatabaseError:
            return sqliteUnavailableCodes.contains(error.resultCode.primaryResultCode)
        case let error as PSQLError:
            if postgresUnavailableCodes.contains(error.code) { return true }
            guard error.code == .server, let state = error.serverInfo?[.sqlState] else { return false }
            // 08P01 (protocol_violation) is a client's encoding bug, not an outage.
            return (state.hasPrefix("08") && state != "08P01") || postgresUnavailableStates.contains(state)
        default:
            return false
        }
    }

    /// One line for the operator's log: the driver's own words on the failure, without a
    /// statement or its arguments.
    public static func reason(_ error: any Error) -> String {
        switch error {
        case let error as DatabaseUnavailable:
            error.reason
        case let error as DatabaseError:
            "SQLite \(error.resultCode): \(error.message ?? "no message")"
        default:
            PostgresStore.reason(error)
        }
    }

    private static let sqliteUnavailableCodes: [ResultCode] = [.SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_IOERR, .SQLITE_FULL, .SQLITE_CANTOPEN, .SQLITE_PROTOCOL]
    private static let postgresUnavailableCodes: Set<PSQLError.Code> = [.connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed]
    private static let postgresUnavailableStates: Set<String> = ["57P01", "57P02", "57P03", "57P05", "53300", "53100", "53200", "25006", "57014", "25P03"]
}
