import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ProvisioningModels

/// Builds the TMP server's router: every route of ``RouteTable`` with its authentication,
/// body limits and error envelope.
public struct TokenPlatformRouter: Sendable {
    /// Shared dependencies of the services.
    public let environment: PlatformEnvironment
    /// Credential checks.
    public let authenticator: Authenticator
    /// Prometheus metrics.
    public let metrics: PlatformMetrics

    /// Creates a router builder.
    public init(environment: PlatformEnvironment, authenticator: Authenticator, metrics: PlatformMetrics = PlatformMetrics()) {
        self.environment = environment
        self.authenticator = authenticator
        self.metrics = metrics
    }

    /// The router.
    public func build() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
        router.add(middleware: APIErrorMiddleware())
        let provisioning = PushProvisioningService(environment: environment)
        let lifecycle = LifecycleService(environment: environment)
        let tsp = TSPService(environment: environment)
        let metrics = metrics

        // Push Provisioning API (cardholder JWT).
        on(.post, "/issuer/push-provisioning/tokens/searches", router) { request, _, caller in
            let body = try await JSONCoding.decode(TokenSearchRequest.self, from: request)
            return try JSONCoding.response(try await provisioning.searchTokens(userId: caller.userId, request: body))
        }
        on(.post, "/issuer/push-provisioning/signed-cards", router, outcomes: metrics.recordProvisioning) { request, _, caller in
            let body = try await JSONCoding.decode(SignedCardRequest.self, from: request)
            let response = try await provisioning.signCard(userId: caller.userId, request: body)
            return (JSONCoding.response(json: response.jsonData()), "sealed")
        }
        on(.post, "/issuer/push-provisioning/tokens/activations", router, outcomes: metrics.recordActivation) { request, _, caller in
            let body = try await JSONCoding.decode(TokenActivationRequest.self, from: request)
            let response = try await provisioning.activateToken(userId: caller.userId, request: body)
            return (try JSONCoding.response(response), response.issuerMobileAppAuthResponse.rawValue)
        }
        on(.get, "/issuer/push-provisioning/cards", router) { _, _, caller in
            try JSONCoding.response(try await provisioning.cards(userId: caller.userId))
        }
        on(.get, "/issuer/push-provisioning/cards/{externalCardId}/art", router) { _, context, caller in
            let art = try await provisioning.cardArt(userId: caller.userId, externalCardId: try context.parameters.require("externalCardId"))
            // The art as it was sent is served as what it is: no browser may sniff another type,
            // and a browser opening a PDF runs none of its scripts, as from a unique origin.
            var headers: HTTPFields = [.contentType: art.contentType, .cacheControl: "private, max-age=3600", .xContentTypeOptions: "nosniff"]
            if CardArtFormat(mediaType: art.contentType) == .pdf { headers[.contentSecurityPolicy] = "sandbox" }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: art.body))
        }

        // Lifecycle API (issuer key).
        on(.put, "/lifecycle/cards/{externalCardId}", router) { request, context, _ in
            let body = try await JSONCoding.decode(CardUpsertRequest.self, from: request)
            let result = try await lifecycle.putCard(externalCardId: try context.parameters.require("externalCardId"), request: body)
            return try JSONCoding.response(result.card, status: result.created ? .created : .ok)
        }
        on(.patch, "/lifecycle/cards/{externalCardId}", router) { request, context, _ in
            let body = try await JSONCoding.decode(CardStatusChangeRequest.self, from: request)
            return try JSONCoding.response(try await lifecycle.setStatus(externalCardId: try context.parameters.require("externalCardId"), status: body.status))
        }
        on(.get, "/lifecycle/cards/{externalCardId}", router) { _, context, _ in
            try JSONCoding.response(try await lifecycle.card(externalCardId: try context.parameters.require("externalCardId")))
        }
        on(.get, "/lifecycle/cards/{externalCardId}/tokens", router) { _, context, _ in
            try JSONCoding.response(try await lifecycle.tokens(externalCardId: try context.parameters.require("externalCardId")))
        }
        for action in LifecycleService.TokenAction.allCases {
            on(.post, "/lifecycle/tokens/{tokenUniqueReference}/\(action.rawValue)", router) { _, context, _ in
                try JSONCoding.response(try await lifecycle.perform(action, tokenUniqueReference: try context.parameters.require("tokenUniqueReference")))
            }
        }
        on(.put, "/lifecycle/card-art/{artId}", router) { request, context, _ in
            let data = try await JSONCoding.body(of: request, limit: CardArtValidator.maximumSize + 1)
            let info = try await lifecycle.putCardArt(artId: try context.parameters.require("artId"), data: data, contentType: request.headers[.contentType])
            return try JSONCoding.response(CardArtUploadResponse(artId: try context.parameters.require("artId"), info: info))
        }

        // TSP API (TSP key).
        on(.post, "/tsp/tokenization-decisions", router) { request, _, _ in
            try JSONCoding.response(try await tsp.decide(try await JSONCoding.decode(TokenizationDecisionRequest.self, from: request)))
        }
        on(.post, "/tsp/token-events", router) { request, _, _ in
            try JSONCoding.response(try await tsp.apply(try await JSONCoding.decode(TokenEventRequest.self, from: request)))
        }
        on(.get, "/tsp/activation-keys", router) { _, _, _ in
            try JSONCoding.response(environment.activationKeySet)
        }

        // Operations.
        // Probed every few seconds by each load balancer: one warning per interval while the
        // database stays unreachable, with the driver's reason (never a statement).
        let pingWarnings = WarningThrottle(interval: .seconds(10))
        on(.get, "/health", router) { _, context, _ in
            do {
                try await environment.store.ping()
                return try JSONCoding.response(["status": "ok", "database": "ok"])
            } catch {
                if let failed = pingWarnings.admit() {
                    context.logger.warning(
                        "health check: the database did not answer; /health answers 503",
                        metadata: ["reason": "\(Redaction.cardNumbers(in: DatabaseUnavailable.reason(error)))", "failed_since_last_warning": "\(failed)"]
                    )
                }
                return try JSONCoding.response(["status": "unavailable", "database": "unreachable"], status: .serviceUnavailable)
            }
        }
        // The process alone, for a liveness probe: an orchestrator restarting instances
        // because the database is down would only add restarts to the outage.
        on(.get, "/health/live", router) { _, _, _ in
            try JSONCoding.response(["status": "ok"])
        }
        let unfinishedCommands: @Sendable () -> Int = { [environment] in environment.unfinishedTokenServiceCommands }
        let waitingCommands: @Sendable () -> Int = { [environment] in environment.tokenServiceCommandsWaiting }
        on(.get, "/metrics", router) { _, _, _ in
            metrics.setUnfinishedTokenServiceCommands(unfinishedCommands())
            metrics.setWaitingTokenServiceCommands(waitingCommands())
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"], body: .init(byteBuffer: ByteBuffer(string: metrics.render())))
        }
        on(.get, "/openapi.yaml", router) { _, _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: OpenAPIDocument.buffer))
        }
        return router
    }

    /// Registers one route of ``RouteTable`` behind its authentication requirement.
    ///
    /// With `failures`, a request that fails (authentication included) is counted there under
    /// the code of the error envelope it is answered with (``APIFailure``): a fixed code, never
    /// the caller's input.
    private func on(
        _ method: HTTPRequest.Method,
        _ path: String,
        _ router: Router<BasicRequestContext>,
        failures: (@Sendable (_ code: String) -> Void)? = nil,
        _ handler: @escaping @Sendable (Request, BasicRequestContext, AuthenticatedCaller) async throws -> Response
    ) {
        let spec = RouteTable.spec(method, path)
        let authenticator = authenticator
        let respond: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, context in
            do {
                let caller = try authenticator.authenticate(request, as: spec.auth, logger: context.logger)
                return try await handler(request, context, AuthenticatedCaller(caller: caller))
            } catch {
                failures?(APIFailure(error, request: request).error.code)
                throw error
            }
        }
        router.on(RouterPath(path), method: method, use: respond)
        // HEAD as GET (RFC 9110 §9.3.2): the same checks and answer, whose body the HTTP front
        // leaves out (``WholeRequestHandler``).
        if method == .get { router.on(RouterPath(path), method: .head, use: respond) }
    }

    /// Registers one route of ``RouteTable`` whose every request ends in exactly one outcome
    /// counted by `record`: the one `handler` returns with its response, or the code of the
    /// error envelope the request is answered with.
    private func on(
        _ method: HTTPRequest.Method,
        _ path: String,
        _ router: Router<BasicRequestContext>,
        outcomes record: @escaping @Sendable (_ outcome: String) -> Void,
        _ handler: @escaping @Sendable (Request, BasicRequestContext, AuthenticatedCaller) async throws -> (Response, outcome: String)
    ) {
        on(method, path, router, failures: record) { request, context, caller in
            let (response, outcome) = try await handler(request, context, caller)
            record(outcome)
            return response
        }
    }
}

/// The authenticated caller as handlers see it.
struct AuthenticatedCaller: Sendable {
    let caller: Caller?

    /// The cardholder's user id (only cardholder routes call this).
    var userId: String {
        if case .cardholder(let userId) = caller { return userId }
        preconditionFailure("userId read on a route that does not authenticate cardholders")
    }
}

/// `PUT card-art/{id}` response.
struct CardArtUploadResponse: Encodable {
    let artId: String
    let format: String
    let byteSize: Int

    init(artId: String, info: CardArtInfo) {
        self.artId = artId
        self.format = info.format.rawValue
        self.byteSize = info.byteCount
    }
}
