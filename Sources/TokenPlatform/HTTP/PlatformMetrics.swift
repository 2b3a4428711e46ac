import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import Prometheus
import ProvisioningModels

/// The server's Prometheus metrics, in a registry of its own (no process-global bootstrap).
///
/// Labels carry route patterns and outcomes only — never ids, PANs or tokens.
public final class PlatformMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry = PrometheusCollectorRegistry()

    /// Client connections open now (counted by the HTTP front's connection limit).
    private let openConnections: Gauge
    /// Tokens with a token service command given up at its time limit and still running.
    private let unfinishedCommands: Gauge
    /// Token service commands waiting for an earlier command for the same token.
    private let waitingCommands: Gauge

    /// Creates the metrics, with the outcome series dashboards and alerts watch already
    /// listed at zero (``preCreatedProvisioningOutcomes``, ``preCreatedActivationOutcomes``).
    public init() {
        openConnections = registry.makeGauge(descriptor: Self.connections)
        unfinishedCommands = registry.makeGauge(descriptor: Self.unfinished)
        waitingCommands = registry.makeGauge(descriptor: Self.waiting)
        for outcome in Self.preCreatedProvisioningOutcomes {
            _ = outcomeCounter(Self.provisioning, route: "provisioning", outcome: outcome)
        }
        for outcome in Self.preCreatedActivationOutcomes {
            _ = outcomeCounter(Self.activation, route: "activation", outcome: outcome)
        }
        for reason in ConnectionFailure.allCases {
            _ = connectionFailureCounter(reason)
        }
    }

    /// Why the HTTP front closed a connection without answering a request on it (or after
    /// NIO's own `400` for one it could not parse): these never reach the router, so
    /// `pushprov_http_requests_total` does not count them.
    public enum ConnectionFailure: String, Sendable, CaseIterable {
        /// A request NIO could not parse (answered `400` by NIO), or whose head could not be
        /// read as an HTTP request (closed without an answer); a head over the header limits too.
        case unparsableRequest = "unparsable_request"
        /// A request not whole ``TMPHTTPServer/defaultRequestReadTimeout`` after its head (a
        /// body trickled in).
        case requestReadTimeout = "request_read_timeout"
        /// A request's head not whole ``TMPHTTPServer/defaultRequestHeadTimeout`` after its
        /// first bytes came (a head trickled in: slowloris).
        case requestHeadTimeout = "request_head_timeout"
        /// A client that took none of the responses waiting for it within the read timeout.
        case stalledReader = "stalled_reader"
        /// A request refused `503` (and its connection closed) because the server was answering
        /// as many requests as it holds connections (``RequestsInFlight``).
        case requestsOverLimit = "requests_over_limit"
        /// A client with more than ``PipelineDepthLimit/limit`` pipelined requests unanswered.
        case pipelinedOverLimit = "pipelined_over_limit"
    }

    /// Counts a connection the HTTP front closed for `reason`.
    func recordConnectionFailure(_ reason: ConnectionFailure) {
        connectionFailureCounter(reason).increment()
    }

    private func connectionFailureCounter(_ reason: ConnectionFailure) -> Counter {
        outcomeCounter(Self.connectionFailures, route: "connection", outcome: reason.rawValue, label: "reason")
    }

    /// The failures any request can end in that are the server's, not the caller's.
    private static let serverFailures = [TMPError.databaseUnavailable.code, TMPError.internalError.code]

    /// The `signed-cards` outcomes listed from the start, before any request: `sealed`,
    /// `database_unavailable` and `internal_error`. Other refusal codes appear once they occur.
    static let preCreatedProvisioningOutcomes = ["sealed"] + serverFailures

    /// The in-app activation outcomes listed from the start, before any request: every
    /// ``ActivationOutcome``, `database_unavailable` and `internal_error`. Error codes of the
    /// caller's mistakes appear once they occur.
    static let preCreatedActivationOutcomes = ActivationOutcome.allCases.map(\.rawValue) + serverFailures

    /// The route label of a request no route matched (no such path, or a method the path does
    /// not allow): Hummingbird's name for it.
    static let unmatchedRoute = "NotFound"

    /// The upper bounds of the request latency histogram's buckets: up to the token service's
    /// default time limit (10 s) and the longest connection wait for the database (60 s).
    static let durationBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(20), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]

    private static var requests: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "http", metricName: "requests", unitName: "total", helpText: "HTTP requests by method, route pattern and status.") }
    private static var duration: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "http", metricName: "request_duration", unitName: "seconds", helpText: "HTTP request latency by method and route pattern.") }
    private static var provisioning: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "provisioning", metricName: "outcomes", unitName: "total", helpText: "signed-cards outcomes: sealed, or the error code answered.") }
    private static var realignment: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "lifecycle", metricName: "realignments", unitName: "total", helpText: "Token service commands sent again for tokens at odds with their card's status, by result.") }
    private static var connections: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "http", metricName: "connections_open", unitName: "", helpText: "Client connections open now (at most --max-connections).") }
    private static var unfinished: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "lifecycle", metricName: "token_service_commands_unfinished", unitName: "", helpText: "Tokens with a token service command given up at its time limit that has not returned; their further commands are held back until it does.") }
    private static var waiting: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "lifecycle", metricName: "token_service_commands_waiting", unitName: "", helpText: "Token service commands waiting for an earlier command for the same token to be sent and recorded.") }
    private static var connectionFailures: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "http", metricName: "connection_failures", unitName: "total", helpText: "Connections the HTTP front closed without a request reaching the router: unparsable requests, requests not whole in time, clients reading no answers, requests over the in-flight limit.") }
    private static var activation: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "activation", metricName: "outcomes", unitName: "total", helpText: "In-app activation outcomes: APPROVED, DECLINED, FAILED, or the error code answered.") }

    /// The labels of one series; each series' metric is made once and kept (label values are
    /// route patterns, status codes and outcome codes: a small, bounded set).
    private struct Series: Hashable {
        var method = ""
        var route = ""
        var status = 0
        var outcome = ""
    }

    private let counters = NIOLockedValueBox<[Series: Counter]>([:])
    private let histograms = NIOLockedValueBox<[Series: DurationHistogram]>([:])

    func recordRequest(method: String, route: String, status: Int, duration: Duration) {
        let counterKey = Series(method: method, route: route, status: status, outcome: "request")
        counters.withLockedValue { counters in
            if let counter = counters[counterKey] { return counter }
            let counter = registry.makeCounter(descriptor: Self.requests, labels: [("method", method), ("route", route), ("status", String(status))])
            counters[counterKey] = counter
            return counter
        }.increment()
        let histogramKey = Series(method: method, route: route)
        histograms.withLockedValue { histograms in
            if let histogram = histograms[histogramKey] { return histogram }
            let histogram = registry.makeDurationHistogram(
                descriptor: Self.duration,
                labels: [("method", method), ("route", route)],
                buckets: Self.durationBuckets
            )
            histograms[histogramKey] = histogram
            return histogram
        }.record(duration)
    }

    /// Counts a provisioning (`signed-cards`) outcome: `sealed`, or the error envelope's code
    /// (`unauthorized`, `card_not_found`, `database_unavailable`, `internal_error`, …).
    func recordProvisioning(outcome: String) {
        outcomeCounter(Self.provisioning, route: "provisioning", outcome: outcome).increment()
    }

    /// Counts an in-app activation outcome: `APPROVED`, `DECLINED`, `FAILED`, or the error
    /// envelope's code (`unauthorized`, `token_not_found`, `database_unavailable`, …).
    func recordActivation(outcome: String) {
        outcomeCounter(Self.activation, route: "activation", outcome: outcome).increment()
    }

    /// Counts a token realigned with its card (``TokenRealigner``): the command's result
    /// (`SUSPENDED`, `RESUMED`, `DEACTIVATED`, `UNCHANGED` or `FAILED`).
    func recordRealignment(result: String) {
        outcomeCounter(Self.realignment, route: "realignment", outcome: result).increment()
    }

    private func outcomeCounter(_ descriptor: MetricNameDescriptor, route: String, outcome: String, label: String = "outcome") -> Counter {
        let key = Series(route: route, outcome: outcome)
        return counters.withLockedValue { counters in
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(descriptor: descriptor, labels: [(label, outcome)])
            counters[key] = counter
            return counter
        }
    }

    func connectionOpened() { openConnections.increment() }
    func connectionClosed() { openConnections.decrement() }

    /// The Prometheus text exposition.
    public func render() -> String { registry.emitToString() }

    /// Sets the gauge of tokens whose given-up command has not returned (read when rendered).
    public func setUnfinishedTokenServiceCommands(_ count: Int) { unfinishedCommands.set(Double(count)) }

    /// Sets the gauge of commands waiting for an earlier one for the same token (read when rendered).
    public func setWaitingTokenServiceCommands(_ count: Int) { waitingCommands.set(Double(count)) }
}

/// Measures every request by route pattern (``PlatformMetrics/unmatchedRoute`` for one no route
/// matched) and logs one line per request (method, route, status, duration — never headers or
/// bodies).
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: PlatformMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        // Hummingbird itself sets `NotFound` for a request no route matched (a wrong method
        // included); the fallback only keeps to that name.
        let route = context.endpointPath ?? PlatformMetrics.unmatchedRoute
        metrics.recordRequest(method: request.method.rawValue, route: route, status: response.status.code, duration: elapsed)
        context.logger.info("request", metadata: ["method": "\(request.method.rawValue)", "route": "\(route)", "status": "\(response.status.code)", "ms": "\(elapsed.components.attoseconds / 1_000_000_000_000_000 + elapsed.components.seconds * 1000)"])
        return response
    }
}
