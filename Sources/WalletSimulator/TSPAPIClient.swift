import Foundation
import ProvisioningCrypto
import ProvisioningModels
import ProvisioningSDK
import TokenPlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A small JSON client for TMP's TSP API over real HTTP.
///
/// Every call carries the TSP API key, ends at the endpoint's timeout (the whole call, not
/// the idle time between bytes), stops reading an answer
/// once it is known to exceed ``maximumResponseSize`` bytes, follows no redirect (the key
/// would go with it), goes over plain `http` only to this machine (elsewhere the key would
/// travel in clear), and fails with a ``TSPAPIError`` that carries TMP's error envelope when
/// there is one. It runs on the SDK's ``URLSessionTransport`` (ephemeral session, limit and
/// redirect refusal in its delegate).
struct TSPAPIClient: Sendable {
    /// The largest answer read; TMP's answers are a few hundred bytes.
    static let maximumResponseSize = 1 << 20

    let endpoint: TSPAPIEndpoint
    let transport: any HTTPTransport

    init(endpoint: TSPAPIEndpoint, transport: any HTTPTransport = URLSessionTransport()) {
        self.endpoint = endpoint
        self.transport = transport
    }

    /// `POST /tsp/tokenization-decisions`.
    func decide(_ request: TokenizationDecisionRequest) async throws(TSPAPIError) -> TokenizationDecisionResponse {
        try await send("POST", "/tsp/tokenization-decisions", body: Self.encode(request))
    }

    /// `POST /tsp/token-events`.
    func report(_ event: TokenEventRequest) async throws(TSPAPIError) -> TokenEventResponse {
        try await send("POST", "/tsp/token-events", body: Self.encode(event))
    }

    /// `GET /tsp/activation-keys`.
    func activationKeys() async throws(TSPAPIError) -> JSONWebKeySet {
        try await send("GET", "/tsp/activation-keys", body: nil)
    }

    private static func encode(_ value: some Encodable) -> Data {
        // The wire types hold strings and enums only: encoding them cannot fail.
        try! JSONEncoder().encode(value)
    }

    private func send<Response: Decodable>(_ method: String, _ path: String, body: Data?) async throws(TSPAPIError) -> Response {
        let url = endpoint.baseURL.appendingPathComponent(path)
        guard url.scheme?.lowercased() == "https" || (url.scheme?.lowercased() == "http" && ServerSettings.isLoopback(url.host ?? "")) else {
            throw .unreachable(path: path, reason: "\(endpoint.baseURL.absoluteString) is not https, and only this machine may be reached over plain http: the TSP API key would travel in clear")
        }
        var headers = ["Authorization": "Bearer \(endpoint.apiKey)", "Accept": "application/json"]
        if body != nil { headers["Content-Type"] = "application/json" }
        let request = TransportRequest(method: method, url: url, headers: headers, body: body, timeout: endpoint.requestTimeout, maximumResponseSize: Self.maximumResponseSize)
        // URLSession's timeout is idle time between bytes: an answer trickling in would hold
        // the call for ever. The endpoint's timeout bounds the whole call instead.
        let transport = self.transport
        let response: TransportResponse
        do {
            switch await Deadline.run(within: endpoint.requestTimeout, clock: ContinuousClock(), operation: { try await transport.send(request) }) {
            case .finished(let result): response = try result.get()
            case .timedOut: throw TSPAPIError.timedOut(path: path)
            case .cancelled: throw CancellationError()
            }
        } catch let error as TSPAPIError {
            throw error
        } catch let error as ResponseTooLargeError {
            throw .invalidResponse(path: path, status: error.statusCode, reason: "answer larger than \(Self.maximumResponseSize) bytes")
        } catch let error as URLError where error.code == .timedOut {
            throw .timedOut(path: path)
        } catch let error as URLError {
            throw .unreachable(path: path, reason: "URLError \(error.code.rawValue)")
        } catch {
            throw .unreachable(path: path, reason: String(describing: type(of: error)))
        }
        let (status, data) = (response.statusCode, response.body)
        guard data.count <= Self.maximumResponseSize else {
            throw .invalidResponse(path: path, status: status, reason: "answer larger than \(Self.maximumResponseSize) bytes")
        }
        guard (200..<300).contains(status) else {
            guard let envelope = try? JSONDecoder().decode(ErrorEnvelope.self, from: data) else {
                throw .refused(path: path, status: status, code: "\(TSPAPIError.noEnvelopeCodePrefix)\(status)", message: "the answer carries no error envelope")
            }
            throw .refused(path: path, status: status, code: envelope.error.code, message: envelope.error.message)
        }
        do {
            return try JSONDecoder().decode(Response.self, from: data)
        } catch {
            throw .invalidResponse(path: path, status: status, reason: "not a \(Response.self)")
        }
    }
}

extension Duration {
    /// The duration in seconds, for Foundation APIs.
    var timeInterval: TimeInterval {
        let parts = components
        return TimeInterval(parts.seconds) + TimeInterval(parts.attoseconds) / 1e18
    }
}
