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
        /// TLS when the server offers it, plain TCP otherwise (libpq's default); the server's
        /// certificate is not checked, as libpq does not check it: this keeps a passive
        /// listener out, not a server in the middle.
        case prefer
        /// TLS or no connection; the server's certificate is verified, chain and host name,
        /// against the system's roots or `sslrootcert` (stricter than libpq's `require`, which
        /// checks nothing without a root certificate file: the same as ``verifyFull``).
        case require
        /// TLS or no connection; the server's certificate chain is verified against
        /// `sslrootcert` (required with this mode), its host name is not (libpq's `verify-ca`).
        case verifyCA = "verify-ca"
        /// TLS or no connection; the server's certificate chain and host name are verified
        /// (libpq's `verify-full`).
        case verifyFull = "verify-full"

        /// Whether the server's certificate is verified, so that nobody on the path can stand
        /// in for the server.
        public var verifiesServer: Bool { self != .disable && self != .prefer }
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
    /// A PEM file of the certificates to trust for the server's (`sslrootcert`), in place of
    /// the system's roots: a private CA, or a cloud provider's bundle. Only with a mode that
    /// verifies (``TLSMode/verifiesServer``); read when the store connects.
    public var rootCertificatesPath: String?

    /// Creates a URL from its parts.
    public init(host: String, port: Int = 5432, username: String, password: String?, database: String, tls: TLSMode = .prefer, rootCertificatesPath: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
        self.rootCertificatesPath = rootCertificatesPath
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
        var rootCertificatesPath: String?
        var seen: Set<String> = []
        for item in components.queryItems ?? [] {
            guard seen.insert(item.name).inserted else {
                throw ConfigurationError("database URL parameter \(item.name) is given more than once")
            }
            switch item.name {
            case "sslmode":
                guard let value = item.value.flatMap(TLSMode.init(rawValue:)) else {
                    throw ConfigurationError("database URL sslmode must be one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", ")) (got \(item.value ?? ""))")
                }
                tls = value
            case "sslrootcert":
                guard let path = item.value, !path.isEmpty else {
                    throw ConfigurationError("database URL sslrootcert needs the path of a PEM file of the certificates to trust")
                }
                rootCertificatesPath = path
            default:
                throw ConfigurationError("database URL parameter \(item.name) is not supported; only sslmode and sslrootcert are")
            }
        }
        // Checking the chain but not the name against the system's public roots takes any
        // publicly trusted certificate for any name (libpq refuses it too).
        if tls == .verifyCA, rootCertificatesPath == nil {
            throw ConfigurationError(Self.verifyCANeedsRoots)
        }
        // A root certificate nobody checks against would look like protection and give none.
        if rootCertificatesPath != nil, !tls.verifiesServer {
            throw ConfigurationError("database URL sslrootcert needs sslmode=require, verify-ca or verify-full (with sslmode=\(tls.rawValue) the server's certificate is not checked)")
        }
        self.init(host: host, port: port, username: username, password: password, database: database, tls: tls, rootCertificatesPath: rootCertificatesPath)
    }

    /// Why `verify-ca` without `sslrootcert` is refused.
    static let verifyCANeedsRoots = "database URL sslmode=verify-ca needs sslrootcert=<PEM file of your CA>: checking the chain but not the host name against the system's public roots would accept any publicly trusted certificate, for any name; use verify-full to check the name against the system's roots"

    /// The URL without its password, e.g. `postgres://pushprov@db.internal:5432/pushprov`.
    public var description: String {
        let user = username.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? username
        let shownHost = host.contains(":") ? "[\(host)]" : host
        var parameters = tls == .prefer ? [] : ["sslmode=\(tls.rawValue)"]
        if let rootCertificatesPath {
            parameters.append("sslrootcert=\(rootCertificatesPath.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&+="))) ?? rootCertificatesPath)")
        }
        let query = parameters.isEmpty ? "" : "?" + parameters.joined(separator: "&")
        return "postgres://\(user)@\(shownHost):\(port)/\(database)\(query)"
    }

    /// Same as ``description``: no password.
    public var debugDescription: String { description }

    /// Mirrors the URL without its password (what `dump` prints).
    public var customMirror: Mirror {
        Mirror(self, children: ["host": host, "port": port, "username": username, "database": database, "tls": tls.rawValue, "rootCertificatesPath": rootCertificatesPath as Any])
    }
}
