import Foundation
import ProvisioningModels
import ProvisioningSDK

/// A transport whose every answer the test decides: responses, server errors, malformed
/// bodies, URL errors, hangs. It records every request it was given.
public final class ScriptedTransport: HTTPTransport, Sendable {
    /// Decides the answer to one request (its 0-based index among all requests).
    public typealias Script = @Sendable (TransportRequest, Int) async throws -> TransportResponse

    private let script: Script
    private let recorded = Locked<[TransportRequest]>([])

    /// A transport that answers with `script`.
    public init(_ script: @escaping Script) {
        self.script = script
    }

    /// Every request sent, in order.
    public var requests: [TransportRequest] { recorded.current }

    /// The requests for `operation`.
    public func requests(for operation: TMPOperation) -> [TransportRequest] {
        requests.filter { Self.operation(of: $0) == operation }
    }

    /// Records `request` and answers it with the script.
    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let index = recorded.withValue { requests in
            requests.append(request)
            return requests.count - 1
        }
        return try await script(request, index)
    }

    // MARK: Canned answers

    /// `status` with `value` as the JSON body.
    public static func json(_ value: some Encodable, status: Int = 200) -> TransportResponse {
        TransportResponse(statusCode: status, headers: ["Content-Type": "application/json"], body: try! JSONEncoder().encode(value))
    }

    /// `status` with TMP's error envelope.
    public static func error(_ status: Int, code: String, message: String) -> TransportResponse {
        json(ErrorEnvelope(code: code, message: message), status: status)
    }

    /// Never answers; ends (throwing `CancellationError`) only when the calling task is cancelled.
    public static func hang() async throws -> TransportResponse {
        try await Task.sleep(for: .seconds(86_400))
        throw CancellationError()
    }

    /// The operation a request is for.
    public static func operation(of request: TransportRequest) -> TMPOperation? {
        if artCardId(of: request) != nil { return .cardArt }
        return TMPOperation.allCases.first { request.url.path.hasSuffix("/" + $0.path) }
    }

    /// The card id of a `GET cards/{externalCardId}/art` request.
    public static func artCardId(of request: TransportRequest) -> String? {
        let parts = request.url.path.split(separator: "/")
        guard parts.count >= 4, parts[parts.count - 1] == "art", parts[parts.count - 3] == "cards", parts[parts.count - 4] == "push-provisioning" else { return nil }
        return String(parts[parts.count - 2])
    }

    /// The JSON body of `request` decoded as `type`.
    public static func body<T: Decodable>(of request: TransportRequest, as type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: request.body ?? Data())
    }
}
