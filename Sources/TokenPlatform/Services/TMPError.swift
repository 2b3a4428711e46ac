/// A failure the API reports to its caller: a stable code, a message that says what to fix,
/// and the kind, which the HTTP layer maps to a status in exactly one place.
public struct TMPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The class of failure (decides the HTTP status).
    public enum Kind: Sendable, Hashable {
        /// The caller's input is wrong (400).
        case badRequest
        /// No or bad credentials (401).
        case unauthorized
        /// Not found, or not the caller's (404).
        case notFound
        /// Wrong method for an existing path (405).
        case methodNotAllowed
        /// The resource's state forbids it (409).
        case conflict
        /// The body is too large (413).
        case payloadTooLarge
        /// Wrong content type (415).
        case unsupportedMediaType
        /// A dependency (token service, database) is unavailable (503).
        case unavailable
        /// A bug; details are logged, never returned (500).
        case `internal`
    }

    /// The class.
    public var kind: Kind
    /// Stable machine code, e.g. `card_not_found`.
    public var code: String
    /// What went wrong, for people; never contains a PAN, key or token.
    public var message: String

    /// Creates an error.
    public init(_ kind: Kind, _ code: String, _ message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }

    static func badRequest(_ code: String, _ message: String) -> TMPError { TMPError(.badRequest, code, message) }
    static func notFound(_ code: String, _ message: String) -> TMPError { TMPError(.notFound, code, message) }
    static func conflict(_ code: String, _ message: String) -> TMPError { TMPError(.conflict, code, message) }
    static let unauthorized = TMPError(.unauthorized, "unauthorized", "missing or invalid credentials")
    /// The answer to a database that cannot serve now (503).
    static let databaseUnavailable = TMPError(.unavailable, "database_unavailable", "the database is unavailable; try again shortly")
    /// The answer to anything unexpected, without detail (500).
    static let internalError = TMPError(.internal, "internal_error", "the server failed to process the request")
}
