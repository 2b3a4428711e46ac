import Foundation
import ProvisioningCrypto
import ProvisioningModels

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A small JSON client for TMP's TSP API over real HTTP.
///
/// Every call carries the TSP API key, has the endpoint's timeout, reads at most
/// ``maximumResponseSize`` bytes, and fails with a ``TSPAPIError`` that carries TMP's error
/// envelope when there is one.
struct TSPAPIClient: Sendable {
    /// The largest answer read; TMP's answers are a few hundred bytes.
    static let maximumResponseSize = 1 << 20

    let endpoint: TSPAPIEndpoint
    let session: URLSession

    init(endpoint: TSPAPIEndpoint, session: URLSession = .shared) {
        self.endpoint = endpoint
        self.session = session
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
        var request = URLRequest(url: endpoint.baseURL.appendingPathComponent(path))
        request.httpMethod = method
        request.timeoutInterval = endpoint.requestTimeout.timeInterval
        request.setValue("Bearer \(endpoint.apiKey)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let data: Data
        let status: Int
        do {
            let (received, response) = try await session.data(for: request)
            guard let http = response as? HTTPURLResponse else {
                throw TSPAPIError.invalidResponse(path: path, status: 0, reason: "not an HTTP response")
            }
            data = received
            status = http.statusCode
        } catch let error as TSPAPIError {
            throw error
        } catch let error as URLError where error.code == .timedOut {
            throw .timedOut(path: path)
        } catch let error as URLError {
            throw .unreachable(path: path, reason: "URLError \(error.code.rawValue)")
        } catch {
            throw .unreachable(path: path, reason: String(describing: type(of: error)))
        }
        guard data.count <= Self.maximumResponseSize else {
            throw .invalidResponse(path: path, status: status, reason: "answer larger than \(Self.maximumResponseSize) bytes")
        }
        guard (200..<300).contains(status) else {
            guard let envelope = try? JSONDecoder().decode(ErrorEnvelope.self, from: data) else {
                throw .refused(path: path, status: status, code: "http_\(status)", message: "the answer carries no error envelope")
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
