import Foundation

/// Where TMP's TSP API answers, and the credential the token service calls it with.
public struct TSPAPIEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The TMP server's base URL, e.g. `http://127.0.0.1:8080`.
    public var baseURL: URL
    /// The TSP API key, sent as `Authorization: Bearer …`; never printed.
    public var apiKey: String
    /// How long one request may take before it fails with ``TSPAPIError/timedOut(path:)``.
    public var requestTimeout: Duration

    /// Creates an endpoint.
    public init(baseURL: URL, apiKey: String, requestTimeout: Duration = .seconds(10)) {
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.requestTimeout = requestTimeout
    }

    /// The base URL; the API key is left out.
    public var description: String { "\(baseURL.absoluteString) (TSP API key redacted)" }
}

/// Why a call to TMP's TSP API failed.
public enum TSPAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No answer within the endpoint's request timeout.
    case timedOut(path: String)
    /// The server could not be reached (connection refused, host unknown, connection lost).
    case unreachable(path: String, reason: String)
    /// TMP answered with an error status and its error envelope's code and message.
    case refused(path: String, status: Int, code: String, message: String)
    /// TMP answered with a success status but not the JSON the path promises.
    case invalidResponse(path: String, status: Int, reason: String)

    /// Whether the same call may succeed later: timeouts, unreachable, 429 and 5xx.
    public var isTransient: Bool {
        switch self {
        case .timedOut, .unreachable: true
        case .refused(_, let status, _, _): status == 429 || status >= 500
        case .invalidResponse: false
        }
    }

    /// Whether TMP refused the caller's credential (401, 403) rather than the call: the same
    /// call may succeed once the right key is configured.
    public var isCredentialRefusal: Bool {
        if case .refused(_, let status, _, _) = self { status == 401 || status == 403 } else { false }
    }

    /// Whether the answer is TMP's own refusal of the call itself: a 4xx with TMP's error
    /// envelope, other than 401 and 403 (the credential), 408 and 429 (try again later).
    /// Anything else — no answer, a 5xx, a redirect, a garbled or oversized answer, an error
    /// page without the envelope (from a proxy, say) — leaves open whether TMP took the call,
    /// so a token service sends it again, as a network re-sends a notification it got no
    /// clear answer to.
    public var isRefusalOfTheCall: Bool {
        guard case .refused(_, let status, let code, _) = self else { return false }
        return (400..<500).contains(status) && ![401, 403, 408, 429].contains(status) && !code.hasPrefix(Self.noEnvelopeCodePrefix)
    }

    /// The prefix of the code given to an error answer without TMP's envelope (`http_404`):
    /// TMP's own codes are words (`card_not_found`).
    public static let noEnvelopeCodePrefix = "http_"

    /// The error envelope's code when TMP refused the call.
    public var code: String? {
        if case .refused(_, _, let code, _) = self { code } else { nil }
    }

    /// What failed, on which path.
    public var description: String {
        switch self {
        case .timedOut(let path): "\(path): no answer within the request timeout"
        case .unreachable(let path, let reason): "\(path): TMP is unreachable (\(reason))"
        case .refused(let path, let status, let code, let message): "\(path): TMP answered \(status) \(code): \(message)"
        case .invalidResponse(let path, let status, let reason): "\(path): unexpected answer with status \(status) (\(reason))"
        }
    }
}
