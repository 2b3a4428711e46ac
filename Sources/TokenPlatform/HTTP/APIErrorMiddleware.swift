import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ProvisioningModels

/// The one place errors become HTTP: every failure leaves as the JSON error envelope
/// ``APIFailure`` maps it to, with the status its kind calls for; anything unexpected is a
/// plain 500 whose details are logged by type only, never returned.
struct APIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Lets through one warning per interval while the database stays unavailable.
    var outageWarnings = WarningThrottle(interval: .seconds(10))

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            // The router skips empty segments, so `/lifecycle/cards//tokens` would be the card
            // `tokens`: a path with one names no resource here.
            if request.uri.path.contains("//") {
                throw TMPError(.notFound, "not_found", "no route for \(request.method.rawValue) on this path: it has an empty segment")
            }
            return try await next(request, context)
        } catch {
            let failure = APIFailure(error, request: request)
            switch failure.cause {
            case .answered:
                break
            case .databaseUnavailable:
                if let refused = outageWarnings.admit() {
                    context.logger.warning(
                        "database unavailable: requests are answered 503 until it is back",
                        metadata: ["reason": "\(Redaction.cardNumbers(in: DatabaseUnavailable.reason(error)))", "refused_since_last_warning": "\(refused)"]
                    )
                }
            case .unexpected:
                context.logger.error("unhandled error", metadata: ["type": "\(type(of: error))"])
            }
            var response = Self.response(for: failure.error, status: failure.status)
            if let allow = failure.allow { response.headers[.allow] = allow }
            return response
        }
    }

    static func status(for kind: TMPError.Kind) -> HTTPResponse.Status {
        switch kind {
        case .badRequest: .badRequest
        case .unauthorized: .unauthorized
        case .notFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .conflict: .conflict
        case .payloadTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .unavailable: .serviceUnavailable
        case .internal: .internalServerError
        }
    }

    static func response(for error: TMPError, status: HTTPResponse.Status? = nil) -> Response {
        // Messages may echo a caller's id: a card number sent there is not sent back.
        let body = (try? JSONCoding.responseEncoder.encode(ErrorEnvelope(code: error.code, message: Redaction.cardNumbers(in: error.message)))) ?? Data()
        var headers = JSONCoding.jsonHeaders
        if error.kind == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        return Response(status: status ?? Self.status(for: error.kind), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// How the API answers a failure: the one mapping from errors to the error envelope, used by
/// ``APIErrorMiddleware`` to answer and by the outcome metrics to count each failure under the
/// code the client sees.
struct APIFailure {
    /// Why the request failed, as far as the operator's log is concerned.
    enum Cause {
        /// A failure the answer explains (the caller's mistake, a state, a dependency the
        /// answer names): nothing more to log here.
        case answered
        /// The database cannot serve now (``DatabaseUnavailable/isUnavailable(_:)``): worth a
        /// throttled warning.
        case databaseUnavailable
        /// Anything else: a bug, logged by type as an error.
        case unexpected
    }

    /// The error the envelope carries; its code is the one the client sees.
    var error: TMPError
    /// The status, when it is not the one `error.kind` calls for.
    var status: HTTPResponse.Status?
    /// The `Allow` header's value, for a method the path does not allow.
    var allow: String?
    /// Why the request failed.
    var cause: Cause

    /// The answer to `error`, thrown while serving `request`.
    init(_ error: any Error, request: Request) {
        status = nil
        allow = nil
        cause = .answered
        switch error {
        case let error as TMPError:
            self.error = error
        case is NIOTooManyBytesError:
            self.error = TMPError(.payloadTooLarge, "payload_too_large", "the request body is larger than this endpoint accepts")
        case let error as HTTPError where error.status == .notFound:
            let allowed = RouteTable.allowedMethods(for: request.uri.path)
            // The path is not echoed: a card number written into it in some spelling no
            // redaction foresees (`4111+1111…`, `4111/1111…`, full-width digits) would go back
            // in the body, for clients and proxies that log error bodies. The caller knows it.
            if allowed.isEmpty {
                self.error = TMPError(.notFound, "not_found", "no route for \(request.method.rawValue) on this path")
            } else {
                let methods = allowed.map(\.rawValue).joined(separator: ", ")
                self.error = TMPError(.methodNotAllowed, "method_not_allowed", "\(request.method.rawValue) is not allowed on this path; use \(methods)")
                allow = methods
            }
        case let error as HTTPError:
            self.error = TMPError(.badRequest, "bad_request", error.body ?? "the request could not be processed")
            status = error.status
        case let error where DatabaseUnavailable.isUnavailable(error):
            self.error = .databaseUnavailable
            cause = .databaseUnavailable
        default:
            self.error = .internalError
            cause = .unexpected
        }
    }
}

/// Lets one warning through per interval for a condition that may hit every request (an
/// outage), and counts the occurrences it held back.
final class WarningThrottle: Sendable {
    let interval: Duration
    private let state = NIOLockedValueBox<(last: ContinuousClock.Instant?, held: Int)>((nil, 0))

    init(interval: Duration) {
        self.interval = interval
    }

    /// Records one occurrence; returns the number held back since the last warning when a
    /// warning is due now, else nil.
    func admit(now: ContinuousClock.Instant = .now) -> Int? {
        state.withLockedValue { state in
            if let last = state.last, now - last < interval {
                state.held += 1
                return nil
            }
            let held = state.held
            state = (now, 0)
            return held
        }
    }
}
