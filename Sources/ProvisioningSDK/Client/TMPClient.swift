import Foundation
import ProvisioningModels

/// The app's (and its Wallet extensions') client of TMP's Push Provisioning API.
///
/// - Every call carries `Authorization: Bearer <cardholder JWT>` from the app's token
///   provider, asked afresh for each call (so it can refresh tokens its own way).
/// - Every call is bounded by its timeout (``Timeouts``) and ends at once when the calling
///   task is cancelled.
/// - Only idempotent reads (`tokens/searches`, `GET cards`) are retried, on transient
///   failures, with capped exponential back-off (``RetryPolicy``).
/// - A response body longer than ``Configuration/maximumResponseBytes`` is refused as a
///   `malformedResponse`; the transport is told the limit
///   (``TransportRequest/maximumResponseSize``), and the default one stops reading there.
/// - Every failure is a ``TMPClientError`` carrying the server's error code and message.
/// - The log (``TMPClientEvent``) never sees the token, headers or bodies.
public struct TMPClient: Sendable {
    /// Supplies the signed-in cardholder's JWT; throws when there is none.
    public typealias TokenProvider = @Sendable () async throws -> String

    /// Base URL, timeouts and retries.
    public let configuration: Configuration
    private let transport: any HTTPTransport
    private let clock: any Clock<Duration>
    private let cardholderToken: TokenProvider
    private let log: @Sendable (TMPClientEvent) -> Void

    /// Creates a client.
    ///
    /// - Parameters:
    ///   - configuration: base URL, timeouts, retries.
    ///   - transport: the network; URLSession unless a test substitutes it.
    ///   - clock: measures timeouts and back-off.
    ///   - cardholderToken: the app's provider of the cardholder JWT.
    ///   - log: receives an event for each step of each attempt — sending, answered or failed,
    ///     retrying — and for a call that ran out of time (no secrets in them).
    public init(
        configuration: Configuration,
        transport: any HTTPTransport = URLSessionTransport(),
        clock: any Clock<Duration> = ContinuousClock(),
        cardholderToken: @escaping TokenProvider,
        log: @escaping @Sendable (TMPClientEvent) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.transport = transport
        self.clock = clock
        self.cardholderToken = cardholderToken
        self.log = log
    }

    // MARK: The calls

    /// `tokens/searches`: the caller's tokens among `references` (the passes'
    /// `deviceAccountIdentifier`s). References unknown to the server, or someone else's, are
    /// simply absent from the answer.
    ///
    /// Duplicates are sent once; no references means no request at all. More than
    /// ``TokenSearchRequest/maximumReferences`` are sent in several requests, one after the
    /// other, all within the one timeout.
    public func searchTokens(_ references: [String], timeout: Duration? = nil) async throws(TMPClientError) -> [TokenSearchResult] {
        var seen = Set<String>()
        let unique = references.filter { seen.insert($0).inserted }
        guard unique.count > TokenSearchRequest.maximumReferences else {
            return unique.isEmpty ? [] : try await call(.searchTokens, body: TokenSearchRequest(tokenUniqueReferences: unique), as: [TokenSearchResult].self, timeout: timeout)
        }
        let limit = timeout ?? configuration.timeouts[.searchTokens]
        return try await bounded(.searchTokens, within: limit) { [self] () async throws(TMPClientError) -> [TokenSearchResult] in
            var results: [TokenSearchResult] = []
            var start = unique.startIndex
            while start < unique.endIndex {
                let end = min(start + TokenSearchRequest.maximumReferences, unique.endIndex)
                let request = TokenSearchRequest(tokenUniqueReferences: Array(unique[start..<end]))
                results += try await call(.searchTokens, body: request, as: [TokenSearchResult].self, timeout: limit)
                start = end
            }
            return results
        }
    }

    /// `signed-cards`: TMP checks Apple's chain and seals the card for it. Never retried.
    public func signCard(_ request: SignedCardRequest, timeout: Duration? = nil) async throws(TMPClientError) -> SignedCardResponse {
        try await call(.signCard, body: request, as: SignedCardResponse.self, timeout: timeout)
    }

    /// `tokens/activations`: asks TMP to activate the token behind a pass. Never retried.
    public func activateToken(tokenUniqueReference: String, timeout: Duration? = nil) async throws(TMPClientError) -> TokenActivationResponse {
        try await call(.activateToken, body: TokenActivationRequest(tokenUniqueReference: tokenUniqueReference), as: TokenActivationResponse.self, timeout: timeout)
    }

    /// `GET cards`: the caller's cards for display.
    public func cards(timeout: Duration? = nil) async throws(TMPClientError) -> [CardSummary] {
        try await call(.listCards, body: Optional<Never>.none, as: CardListResponse.self, timeout: timeout).cards
    }

    /// `GET cards/{externalCardId}/art`: the card's art exactly as TMP serves it, with its
    /// `Content-Type`. Not validated here: callers run `CardArtValidator` before using it.
    ///
    /// The id must be a TMP card id (1–64 of `A–Z a–z 0–9 . _ -`) other than `.` and `..`
    /// (which URL libraries resolve to another path); anything else is refused before a
    /// request is made. Bodies up to `CardArtValidator.maximumSize` are accepted.
    public func cardArt(externalCardId: String, timeout: Duration? = nil) async throws(TMPClientError) -> CardArtDownload {
        guard CardIdentifier.isValid(externalCardId), externalCardId != ".", externalCardId != ".." else {
            throw TMPClientError(operation: .cardArt, kind: .invalidRequest, code: "invalid_request", message: "externalCardId must be 1 to \(CardIdentifier.maximumLength) characters of A-Z, a-z, 0-9, '.', '_' or '-', and not '.' or '..'")
        }
        let path = TMPOperation.cardArt.path(externalCardId: externalCardId)
        return try await call(.cardArt, path: path, body: nil, timeout: timeout, maximumBytes: max(configuration.maximumResponseBytes, CardArtValidator.maximumSize)) { response throws(TMPClientError) in
            let contentType = response.headers.first { $0.key.lowercased() == "content-type" }?.value
            return CardArtDownload(data: response.body, contentType: contentType)
        }
    }

    // MARK: Machinery

    private func call<Body: Encodable & Sendable, Response: Decodable & Sendable>(
        _ operation: TMPOperation,
        body: Body?,
        as type: Response.Type,
        timeout: Duration?
    ) async throws(TMPClientError) -> Response {
        let encoded: Data?
        do {
            encoded = try body.map { try JSONEncoder().encode($0) }
        } catch {
            throw TMPClientError(operation: operation, kind: .invalidRequest, code: "invalid_request", message: "the request could not be encoded as JSON")
        }
        return try await call(operation, path: operation.path, body: encoded, timeout: timeout, maximumBytes: configuration.maximumResponseBytes) { response throws(TMPClientError) in
            try Self.decode(type, from: response, operation: operation)
        }
    }

    private func call<Response: Sendable>(
        _ operation: TMPOperation,
        path: String,
        body: Data?,
        timeout: Duration?,
        maximumBytes: Int,
        read: @escaping @Sendable (TransportResponse) throws(TMPClientError) -> Response
    ) async throws(TMPClientError) -> Response {
        let limit = timeout ?? configuration.timeouts[operation]
        return try await bounded(operation, within: limit) { [self] () async throws(TMPClientError) -> Response in
            try read(try await attempts(operation, path: path, body: body, timeout: limit, maximumBytes: maximumBytes))
        }
    }

    /// `work` for `operation`, ended at `limit` (``TMPClientError/Kind/timedOut``).
    private func bounded<Response: Sendable>(_ operation: TMPOperation, within limit: Duration, _ work: @escaping @Sendable () async throws(TMPClientError) -> Response) async throws(TMPClientError) -> Response {
        let outcome = await Deadline.run(within: limit, clock: clock, operation: work)
        switch outcome {
        case .finished(.success(let response)):
            return response
        case .finished(.failure(let error as TMPClientError)):
            throw error
        case .finished(.failure):
            throw Self.failure(operation, .cancelled)
        case .timedOut:
            let error = Self.failure(operation, .timedOut, detail: "no answer within \(limit)")
            log(TMPClientEvent(operation: operation, attempt: 0, kind: .failed(code: error.code)))
            throw error
        case .cancelled:
            throw Self.failure(operation, .cancelled)
        }
    }

    /// The first successful (2xx) response, after retries; every failure as a ``TMPClientError``.
    private func attempts(_ operation: TMPOperation, path: String, body: Data?, timeout: Duration, maximumBytes: Int) async throws(TMPClientError) -> TransportResponse {
        let token: String
        do {
            token = try await cardholderToken()
        } catch is CancellationError {
            throw Self.failure(operation, .cancelled)
        } catch {
            throw Self.failure(operation, .credentialUnavailable)
        }
        let request = TransportRequest(
            method: operation.method,
            url: configuration.baseURL.appendingPathComponent(path),
            headers: ["Authorization": "Bearer \(token)", "Accept": operation == .cardArt ? "image/png, application/pdf" : "application/json"].merging(body == nil ? [:] : ["Content-Type": "application/json"]) { $1 },
            body: body,
            timeout: timeout,
            maximumResponseSize: maximumBytes
        )
        let maximumAttempts = operation.isIdempotentRead ? configuration.retry.maximumAttempts : 1
        var attempt = 1
        while true {
            do {
                return try await once(operation, request: request, attempt: attempt, maximumBytes: maximumBytes)
            } catch {
                log(TMPClientEvent(operation: operation, attempt: attempt, kind: .failed(code: error.code)))
                guard error.isTransient, attempt < maximumAttempts else { throw error }
                let delay = configuration.retry.backoff(afterAttempt: attempt)
                log(TMPClientEvent(operation: operation, attempt: attempt, kind: .retrying(after: delay)))
                do {
                    try await clock.sleep(for: delay)
                } catch {
                    throw Self.failure(operation, .cancelled)
                }
                attempt += 1
            }
        }
    }

    private func once(_ operation: TMPOperation, request: TransportRequest, attempt: Int, maximumBytes: Int) async throws(TMPClientError) -> TransportResponse {
        if Task.isCancelled { throw Self.failure(operation, .cancelled) }
        log(TMPClientEvent(operation: operation, attempt: attempt, kind: .sending))
        let response: TransportResponse
        do {
            response = try await transport.send(request)
        } catch let tooLarge as ResponseTooLargeError {
            // The transport stopped reading a body over the limit.
            log(TMPClientEvent(operation: operation, attempt: attempt, kind: .answered(status: tooLarge.statusCode)))
            throw Self.oversized(operation, bodyBytes: tooLarge.declaredLength, maximumBytes: maximumBytes)
        } catch {
            throw Self.transportFailure(operation, error)
        }
        log(TMPClientEvent(operation: operation, attempt: attempt, kind: .answered(status: response.statusCode)))
        guard response.body.count <= maximumBytes else {
            throw Self.oversized(operation, bodyBytes: response.body.count, maximumBytes: maximumBytes)
        }
        guard (200..<300).contains(response.statusCode) else {
            throw Self.serverFailure(operation, response)
        }
        return response
    }

    private static func decode<Response: Decodable>(_ type: Response.Type, from response: TransportResponse, operation: TMPOperation) throws(TMPClientError) -> Response {
        do {
            return try JSONDecoder().decode(Response.self, from: response.body)
        } catch let error as DecodingError {
            throw failure(operation, .malformedResponse, detail: describe(error))
        } catch {
            throw failure(operation, .malformedResponse, detail: "the response is not valid JSON")
        }
    }

    // MARK: Error mapping (the only place failures get their codes)

    static func failure(_ operation: TMPOperation, _ kind: TMPClientError.Kind, detail: String? = nil) -> TMPClientError {
        let (code, message): (String, String) =
            switch kind {
            case .timedOut: ("timed_out", "\(operation.rawValue) did not answer in time; try again")
            case .cancelled: ("cancelled", "\(operation.rawValue) was cancelled")
            case .unreachable: ("unreachable", "the server could not be reached; check the connection and try again")
            case .malformedResponse: ("malformed_response", "\(operation.rawValue) answered with an unexpected body")
            case .credentialUnavailable: ("credential_unavailable", "no cardholder token is available; sign the user in")
            case .invalidRequest: ("invalid_request", "the request is invalid")
            case .unauthorized: ("unauthorized", "the cardholder token was refused; sign the user in again")
            case .server(let status): ("http_\(status)", "the server answered \(status)")
            }
        return TMPClientError(operation: operation, kind: kind, code: code, message: detail.map { "\(message) (\($0))" } ?? message)
    }

    /// A body over the limit: `bodyBytes` long, or cut off once more than the limit arrived (nil).
    static func oversized(_ operation: TMPOperation, bodyBytes: Int?, maximumBytes: Int) -> TMPClientError {
        let size = bodyBytes.map { "\($0) bytes" } ?? "more than \(maximumBytes) bytes"
        return failure(operation, .malformedResponse, detail: "the response body has \(size); at most \(maximumBytes) are accepted")
    }

    static func transportFailure(_ operation: TMPOperation, _ error: any Error) -> TMPClientError {
        if error is CancellationError { return failure(operation, .cancelled) }
        guard let urlError = error as? URLError else {
            return failure(operation, .unreachable)
        }
        switch urlError.code {
        case .cancelled: return failure(operation, .cancelled)
        case .timedOut: return failure(operation, .timedOut)
        default: return failure(operation, .unreachable, detail: "URL error \(urlError.code.rawValue)")
        }
    }

    static func serverFailure(_ operation: TMPOperation, _ response: TransportResponse) -> TMPClientError {
        let kind: TMPClientError.Kind = response.statusCode == 401 ? .unauthorized : .server(status: response.statusCode)
        guard let envelope = try? JSONDecoder().decode(ErrorEnvelope.self, from: response.body) else {
            return failure(operation, kind)
        }
        return TMPClientError(operation: operation, kind: kind, code: envelope.error.code, message: envelope.error.message)
    }

    /// Names where decoding failed without quoting any value from the body.
    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return path.isEmpty ? "the top level" : path
        }
        switch error {
        case .dataCorrupted(let context): return context.codingPath.isEmpty ? "the body is not valid JSON" : "\(path(context)) is invalid"
        case .keyNotFound(let key, let context): return "\(path(context)) lacks \(key.stringValue)"
        case .typeMismatch(_, let context): return "\(path(context)) has the wrong type"
        case .valueNotFound(_, let context): return "\(path(context)) is null"
        @unknown default: return "the body does not match"
        }
    }
}
