import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ProvisioningModels

/// The one place errors become HTTP: every failure leaves as the JSON error envelope with
/// the status its kind calls for; anything unexpected is a plain 500 whose details are logged
/// by type only, never returned.
struct APIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Lets through one warning per interval while the database stays unavailable.
    var outageWarnings = WarningThrottle(interval: .seconds(10))

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as TMPError {
            return Self.response(for: error)
        } catch is NIOTooManyBytesError {
            return Self.response(for: TMPError(.payloadTooLarge, "payload_too_large", "the request body is larger than this endpoint accepts"))
        } catch let error as HTTPError where error.status == .notFound {
            let allowed = RouteTable.allowedMethods(for: request.uri.path)
            // The path is not echoed: a card number written into it in some spelling no
            // redaction foresees (`4111+1111…`, `4111/1111…`, full-width digits) would go back
            // in the body, for clients and proxies that log error bodies. The caller knows it.
            if !allowed.isEmpty {
                var response = Self.response(for: TMPError(.methodNotAllowed, "method_not_allowed", "\(request.method.rawValue) is not allowed on this path; use \(allowed.map(\.rawValue).joined(separator: ", "))"))
                response.headers[.allow] = allowed.map(\.rawValue).joined(separator: ", ")
                return response
            }
            return Self.response(for: TMPError(.notFound, "not_found", "no route for \(request.method.rawValue) on this path"))
        } catch let error as HTTPError {
            return Self.response(for: TMPError(.badRequest, "bad_request", error.body ?? "the request could not be processed"), status: error.status)
        } catch let error where DatabaseUnavailable.isUnavailable(error) {
            if let refused = outageWarnings.admit() {
                context.logger.warning(
                    "database unavailable: requests are answered 503 until it is back",
                    metadata: ["reason": "\(Redaction.cardNumbers(in: DatabaseUnavailable.reason(error)))", "refused since last warning": "\(refused)"]
                )
            }
            return Self.response(for: TMPError(.unavailable, "database_unavailable", "the database is unavailable; try again shortly"))
        } catch {
            context.logger.error("unhandled error", metadata: ["type": "\(type(of: error))"])
            return Self.response(for: TMPError(.internal, "internal_error", "the server failed to process the request"))
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
        let body = (try? JSONEncoder().encode(ErrorEnvelope(code: error.code, message: Redaction.cardNumbers(in: error.message)))) ?? Data()
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if error.kind == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        return Response(status: status ?? Self.status(for: error.kind), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
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
