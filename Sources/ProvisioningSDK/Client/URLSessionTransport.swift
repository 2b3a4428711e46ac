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
public struct URLSessionTransport: HTTPTransport {
    private let configuredSession: URLSession?

    /// The session requests run on.
    public var session: URLSession {
        configuredSession ?? Self.ephemeralSession
    }

    /// Creates a transport over `session`, or over one shared ephemeral session by default.
    public init(session: URLSession? = nil) {
        self.configuredSession = session
    }

    /// The shared ephemeral session of the default transport.
    public static let ephemeralSession: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        return URLSession(configuration: configuration)
    }()

    /// Sends `request`; cancelling the calling task cancels the data task.
    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        urlRequest.timeoutInterval = request.timeout.timeInterval
        for (name, value) in request.headers {
            urlRequest.setValue(value, forHTTPHeaderField: name)
        }
        let (data, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else {
            throw URLError(.badServerResponse)
        }
        var headers: [String: String] = [:]
        for case let (name as String, value as String) in http.allHeaderFields {
            headers[name] = value
        }
        return TransportResponse(statusCode: http.statusCode, headers: headers, body: data)
    }
}

extension Duration {
    /// The duration in seconds, as Foundation's `TimeInterval`.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
