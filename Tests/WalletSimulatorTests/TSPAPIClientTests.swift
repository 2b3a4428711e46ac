import Foundation
import ProvisioningModels
import ProvisioningSDK
import Testing
import TokenPlatform

@testable import WalletSimulator

/// The TSP API client's own bounds, with a transport standing in for the network.
@Suite struct TSPAPIClientTests {
    /// A server that keeps sending a byte now and then never trips URLSession's timeout, which
    /// is idle time between bytes: this transport answers only after `delay`, as such a
    /// trickle would, and ignores the request's timeout as URLSession would.
    struct TricklingTransport: HTTPTransport {
        let delay: Duration

        func send(_ request: TransportRequest) async throws -> TransportResponse {
            try await Task.sleep(for: delay)
            return TransportResponse(statusCode: 200, body: Data(#"{"decision":"APPROVED","panUniqueReference":"PUR-1","reason":"activation_data_valid"}"#.utf8))
        }
    }

    static func decisionRequest() throws -> TokenizationDecisionRequest {
        TokenizationDecisionRequest(
            requestId: "req-trickle", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"),
            activationData: nil, deviceType: .phone)
    }

    @Test func anAnswerSlowerThanTheTimeoutTimesOutWholeNotPerByte() async throws {
        let endpoint = TSPAPIEndpoint(baseURL: URL(string: "http://127.0.0.1:9")!, apiKey: "tsp-key", requestTimeout: .milliseconds(300))
        // The transport would answer after 5 minutes: a call bounded only per byte would wait
        // for it and get an answer; bounded whole, it ends at the timeout (and the transport's
        // work is cancelled, so the test does not wait the 5 minutes either).
        let client = TSPAPIClient(endpoint: endpoint, transport: TricklingTransport(delay: .seconds(300)))
        await #expect(throws: TSPAPIError.timedOut(path: "/tsp/tokenization-decisions")) {
            _ = try await client.decide(try Self.decisionRequest())
        }
    }

    @Test func anAnswerWithinTheTimeoutIsRead() async throws {
        let endpoint = TSPAPIEndpoint(baseURL: URL(string: "http://127.0.0.1:9")!, apiKey: "tsp-key", requestTimeout: .seconds(30))
        let client = TSPAPIClient(endpoint: endpoint, transport: TricklingTransport(delay: .milliseconds(10)))
        let response = try await client.decide(try Self.decisionRequest())
        #expect(response.decision == .approved)
        #expect(response.panUniqueReference == "PUR-1")
    }

    /// Only TMP's own refusal of an event drops it; an answer that leaves open whether TMP
    /// took it keeps it queued for another delivery (before, a garbled 2xx, a redirect or a
    /// proxy's 404 page dropped it for good).
    @Test func onlyTMPsOwnRefusalIsARefusalOfTheCall() {
        let path = "/tsp/token-events"
        let refusals: [TSPAPIError] = [
            .refused(path: path, status: 400, code: "invalid_field", message: "…"),
            .refused(path: path, status: 404, code: "card_not_found", message: "…"),
            .refused(path: path, status: 409, code: "illegal_token_transition", message: "…"),
        ]
        let unclear: [TSPAPIError] = [
            .timedOut(path: path),
            .unreachable(path: path, reason: "connection refused"),
            .invalidResponse(path: path, status: 200, reason: "not a TokenEventResponse"),
            .invalidResponse(path: path, status: 200, reason: "answer larger than 1048576 bytes"),
            .refused(path: path, status: 302, code: "http_302", message: "the answer carries no error envelope"),
            .refused(path: path, status: 404, code: "http_404", message: "the answer carries no error envelope"),
            .refused(path: path, status: 408, code: "request_timeout", message: "…"),
            .refused(path: path, status: 429, code: "rate_limited", message: "…"),
            .refused(path: path, status: 401, code: "unauthorized", message: "…"),
            .refused(path: path, status: 503, code: "database_unavailable", message: "…"),
        ]
        for error in refusals { #expect(error.isRefusalOfTheCall, "\(error)") }
        for error in unclear { #expect(!error.isRefusalOfTheCall, "\(error)") }
    }
}
