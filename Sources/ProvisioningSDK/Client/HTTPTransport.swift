import Foundation

/// One HTTP request as ``TMPClient`` hands it to its transport.
public struct TransportRequest: Sendable, Hashable {
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

    /// Creates a request.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil, timeout: Duration) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
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
/// URLSession reports them), any HTTP status is a response, and task cancellation must end
/// the call promptly.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the server's response, whatever its status.
    func send(_ request: TransportRequest) async throws -> TransportResponse
}
