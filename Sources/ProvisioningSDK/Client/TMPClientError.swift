/// Why a ``TMPClient`` call failed: the kind (to decide what to do), a stable machine code
/// (the server's own code when the server answered), and a message a person can act on.
///
/// Neither the code nor the message ever holds the cardholder token, a request body or a
/// PAN: server messages are the server's error envelope, which never carries them either.
public struct TMPClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, in the terms the app reacts to.
    public enum Kind: Sendable, Hashable {
        /// The server refused the call with this HTTP status (4xx other than 401, or 5xx).
        case server(status: Int)
        /// The cardholder token was missing, expired or refused (401): sign the user in again.
        case unauthorized
        /// No answer within the call's timeout.
        case timedOut
        /// The calling task was cancelled.
        case cancelled
        /// The server could not be reached (connection refused, offline, DNS, TLS, …).
        case unreachable
        /// The server answered, but not with the JSON this call expects.
        case malformedResponse
        /// The app's token provider could not supply a cardholder token.
        case credentialUnavailable
        /// The request itself is wrong before it is sent (e.g. an empty identifier).
        case invalidRequest
    }

    /// The call that failed.
    public var operation: TMPOperation
    /// What went wrong.
    public var kind: Kind
    /// A stable machine code, e.g. the server's `card_not_found`, or `timed_out`.
    public var code: String
    /// What went wrong and what to do, for people.
    public var message: String

    /// Creates an error.
    public init(operation: TMPOperation, kind: Kind, code: String, message: String) {
        self.operation = operation
        self.kind = kind
        self.code = code
        self.message = message
    }

    /// Whether trying the same call again later may succeed (the client itself retries only
    /// idempotent reads; see ``TMPOperation/isIdempotentRead``).
    public var isTransient: Bool {
        switch kind {
        case .timedOut, .unreachable: true
        case .server(let status): status == 429 || status == 502 || status == 503 || status == 504 || status == 500
        case .unauthorized, .cancelled, .malformedResponse, .credentialUnavailable, .invalidRequest: false
        }
    }

    /// `operation: code: message`.
    public var description: String {
        "\(operation.rawValue): \(code): \(message)"
    }
}
