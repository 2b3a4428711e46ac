import Foundation

/// A PostgreSQL connection URL, `postgres://user:password@host:5432/database?sslmode=prefer`.
///
/// The password is kept out of every description of the value: ``description`` and
/// ``debugDescription`` print the URL without it, so logs, start-up lines and errors cannot
/// leak it.
public struct PostgresURL: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// How the connection uses TLS (libpq's `sslmode` names).
    public enum TLSMode: String, Sendable, Hashable, CaseIterable {
        /// Plain TCP only.
        case disable
        /// TLS when the server offers it, plain TCP otherwise (libpq's default).
        case prefer
        /// TLS or no connection; the server certificate is verified against the system roots.
        case require
    }

    /// Host name or address.
    public var host: String
    /// TCP port (default 5432).
    public var port: Int
    /// User name.
    public var username: String
    /// Password, if any. Never part of a description.
    public var password: String?
    /// Database name.
    public var database: String
    /// TLS mode (`sslmode`; default `prefer`).
    public var tls: TLSMode

    /// Creates a URL from its parts.
    public init(host: String, port: Int = 5432, username: String, password: String?, database: String, tls: TLSMode = .prefer) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
    }

    /// Whether `text` asks for PostgreSQL (`postgres://` or `postgresql://`).
    public static func isPostgresURL(_ text: String) -> Bool {
        let lowered = text.lowercased()
        return lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://")
    }

    /// Parses `postgres://user:password@host:port/database?sslmode=…`.
    ///
    /// User name and password are percent-decoded. Errors name the part that is wrong and never
    /// repeat the password.
    public init(parsing text: String) throws(ConfigurationError) {
        let example = "postgres://user:password@host:5432/database"
        guard Self.isPostgresURL(text), let components = URLComponents(string: text) else {
            throw ConfigurationError("database URL is not a valid URL; expected \(example) (percent-encode @, : and / in the user name and password)")
        }
        guard var host = components.host, !host.isEmpty else {
            throw ConfigurationError("database URL has no host; expected \(example)")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let port = components.port ?? 5432
        guard (1...65_535).contains(port) else {
            throw ConfigurationError("database URL port must be from 1 to 65535 (got \(port))")
        }
        guard let username = components.percentEncodedUser.flatMap({ $0.removingPercentEncoding }), !username.isEmpty else {
            throw ConfigurationError("database URL has no user name; expected \(example)")
        }
        let password = components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else {
            throw ConfigurationError("database URL needs one database name after the host; expected \(example)")
        }
        var tls = TLSMode.prefer
        for item in components.queryItems ?? [] {
            guard item.name == "sslmode" else {
                throw ConfigurationError("database URL parameter \(item.name) is not supported; only sslmode is")
            }
            guard let value = item.value.flatMap(TLSMode.init(rawValue:)) else {
                throw ConfigurationError("database URL sslmode must be one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", ")) (got \(item.value ?? ""))")
            }
            tls = value
        }
        self.init(host: host, port: port, username: username, password: password, database: database, tls: tls)
    }

    /// The URL without its password, e.g. `postgres://pushprov@db.internal:5432/pushprov`.
    public var description: String {
        let user = username.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? username
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let query = tls == .prefer ? "" : "?sslmode=\(tls.rawValue)"
        return "postgres://\(user)@\(shownHost):\(port)/\(database)\(query)"
    }

    /// Same as ``description``: no password.
    public var debugDescription: String { description }

    /// Mirrors the URL without its password (what `dump` prints).
    public var customMirror: Mirror {
        Mirror(self, children: ["host": host, "port": port, "username": username, "database": database, "tls": tls.rawValue])
    }
}
