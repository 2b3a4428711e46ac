import Foundation

/// One HTTP request as ``TMPClient`` hands it to its transport.
///
/// Its description shows the method, the URL, the header names (an `Authorization` value
/// redacted) and the body's size: never the cardholder token or the body.
public struct TransportRequest: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// `GET` or `POST`.
    public var method: String
    /// The absolute URL.
    public var url: URL
    /// Header fields; `Authorization` holds the cardholder token, so transports must not log them.
    public var headers: [String: String]
    /// The JSON body, if any.
    public var body: Data?
    /// How long the transport may take before it gives up (``TMPClient`` enforces it as well).
    public var timeout: Duration
    /// The longest response body the caller accepts, in bytes; nil for no limit.
    ///
    /// A transport that can should stop as soon as it knows a body is longer — from its
    /// `Content-Length`, or once more bytes than this have arrived — and throw
    /// ``ResponseTooLargeError`` rather than read the rest. ``TMPClient`` sets it from its
    /// configuration and checks the body it gets back either way.
    public var maximumResponseSize: Int?

    /// Creates a request.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil, timeout: Duration, maximumResponseSize: Int? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.maximumResponseSize = maximumResponseSize
    }

    /// `POST https://… [Authorization: <redacted>, Content-Type: application/json] 123 bytes`.
    public var description: String {
        let fields = redactedHeaders.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        return "\(method) \(url.absoluteString) [\(fields.joined(separator: ", "))] \(body?.count ?? 0) bytes"
    }

    /// The same, as children for `dump` and debuggers: the body by its size only.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: ["method": method, "url": url, "headers": redactedHeaders, "bodyBytes": body?.count ?? 0, "timeout": timeout, "maximumResponseSize": maximumResponseSize as Any],
            displayStyle: .struct
        )
    }

    /// The header fields with the `Authorization` value replaced.
    private var redactedHeaders: [String: String] {
        headers.reduce(into: [:]) { fields, field in
            fields[field.key] = field.key.caseInsensitiveCompare("Authorization") == .orderedSame ? "<redacted>" : field.value
        }
    }
}

/// What a transport throws when a response body is longer than the request's
/// ``TransportRequest/maximumResponseSize``: it stopped reading the body instead of holding
/// all of it. ``TMPClient`` reports it as a `malformedResponse`, as it does a long body it
/// was handed whole.
public struct ResponseTooLargeError: Error, Sendable, Hashable {
    /// The response's HTTP status code.
    public var statusCode: Int
    /// The body's length as the response declared it (`Content-Length`), when it was refused
    /// for that; nil when it was cut off after more than the limit had arrived.
    public var declaredLength: Int?
    /// The limit the body exceeded, in bytes.
    public var maximumResponseSize: Int

    /// Creates the error.
    public init(statusCode: Int, declaredLength: Int?, maximumResponseSize: Int) {
        self.statusCode = statusCode
        self.declaredLength = declaredLength
        self.maximumResponseSize = maximumResponseSize
    }
}

/// One HTTP response as a transport returns it.
public struct TransportResponse: Sendable, Hashable {
    /// The HTTP status code.
    public var statusCode: Int
    /// Header fields.
    public var headers: [String: String]
    /// The body.
    public var body: Data

    /// Creates a response.
    public init(statusCode: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.statusCode = statusCode
        self.headers = headers
        self.body = body
    }
}

/// The seam between ``TMPClient`` and the network.
///
/// ``URLSessionTransport`` is the one production implementation; tests substitute transports
/// that fail on demand. Failures to reach the server are reported as `URLError`s (as
/// URLSession reports them), any HTTP status is a response, a body over the request's
/// ``TransportRequest/maximumResponseSize`` may be refused with ``ResponseTooLargeError``,
/// and task cancellation must end the call promptly.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the server's response, whatever its status.
    func send(_ request: TransportRequest) async throws -> TransportResponse
}
