import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``HTTPTransport`` over `URLSession` (FoundationNetworking on Linux).
///
/// The default session is ephemeral: no cookies, no cache, no credential storage, so neither
/// a cardholder token nor a response is ever written to disk by the transport. It is made on
/// the first request, not with the transport: a Wallet extension answering `status` from its
/// snapshot never pays for a URLSession (on Linux, several milliseconds of libcurl set-up).
///
/// On the default session a body longer than the request's
/// ``TransportRequest/maximumResponseSize`` is never read whole: a `Content-Length` over it
/// is refused as soon as the response's head arrives, and a body without one is cut off as
/// soon as more than the limit has arrived; either way the data task is cancelled and
/// ``ResponseTooLargeError`` thrown. It follows no redirect: a 3xx comes back as the answer
/// (TMP never redirects, and URLSession would carry the `Authorization` header — the
/// cardholder's token — to wherever the redirect points).
public struct URLSessionTransport: HTTPTransport {
    private let configuredSession: URLSession?

    /// The session requests run on.
    public var session: URLSession {
        configuredSession ?? Self.ephemeralSession
    }

    /// Creates a transport over `session`, or over one shared ephemeral session by default.
    ///
    /// A session of your own keeps its own delegate, so the transport cannot watch its bytes
    /// arrive: it reads each body whole and leaves the limit to the caller (``TMPClient``
    /// still refuses a body over its limit, but only once all of it is in memory). Only
    /// ``ephemeralSession`` — the default — stops reading a body at the limit.
    public init(session: URLSession? = nil) {
        self.configuredSession = session
    }

    /// The shared ephemeral session of the default transport. Its delegate gathers each
    /// body and stops a data task whose body exceeds the request's limit.
    public static let ephemeralSession: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        return URLSession(configuration: configuration, delegate: ResponseLimiter(), delegateQueue: nil)
    }()

    /// Sends `request`; cancelling the calling task cancels the data task, and the request's
    /// timeout applies to it.
    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        urlRequest.timeoutInterval = request.timeout.timeInterval
        for (name, value) in request.headers {
            urlRequest.setValue(value, forHTTPHeaderField: name)
        }
        let session = session
        if let limiter = session.delegate as? ResponseLimiter {
            return try await limiter.send(urlRequest, on: session, maximumResponseSize: request.maximumResponseSize)
        }
        let (data, response) = try await session.data(for: urlRequest)
        return try Self.response(response, body: data)
    }

    /// The transport's response for URLSession's `response` and `body`.
    static func response(_ response: URLResponse?, body: Data) throws -> TransportResponse {
        guard let http = response as? HTTPURLResponse else {
            throw URLError(.badServerResponse)
        }
        var headers: [String: String] = [:]
        for case let (name as String, value as String) in http.allHeaderFields {
            headers[name] = value
        }
        return TransportResponse(statusCode: http.statusCode, headers: headers, body: body)
    }
}

extension Duration {
    /// The duration in seconds, as Foundation's `TimeInterval`.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
