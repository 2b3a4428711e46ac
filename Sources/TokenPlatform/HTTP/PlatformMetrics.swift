import Foundation
import Hummingbird
import Prometheus

/// The server's Prometheus metrics, in a registry of its own (no process-global bootstrap).
///
/// Labels carry route patterns and outcomes only — never ids, PANs or tokens.
public final class PlatformMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry = PrometheusCollectorRegistry()

    /// Creates an empty set of metrics.
    public init() {}

    private static var requests: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "http", metricName: "requests", unitName: "total", helpText: "HTTP requests by method, route pattern and status.") }
    private static var duration: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "http", metricName: "request_duration", unitName: "seconds", helpText: "HTTP request latency by method and route pattern.") }
    private static var provisioning: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "provisioning", metricName: "outcomes", unitName: "total", helpText: "signed-cards outcomes: sealed, or the refusal code.") }
    private static var activation: MetricNameDescriptor { MetricNameDescriptor(namespace: "pushprov", subsystem: "activation", metricName: "outcomes", unitName: "total", helpText: "In-app activation outcomes.") }

    func recordRequest(method: String, route: String, status: Int, duration: Duration) {
        registry.makeCounter(descriptor: Self.requests, labels: [("method", method), ("route", route), ("status", String(status))]).increment()
        registry.makeDurationHistogram(
            descriptor: Self.duration,
            labels: [("method", method), ("route", route)],
            buckets: [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(20), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5)]
        ).record(duration)
    }

    /// Counts a provisioning (`signed-cards`) outcome: `sealed`, or the refusal code.
    func recordProvisioning(outcome: String) {
        registry.makeCounter(descriptor: Self.provisioning, labels: [("outcome", outcome)]).increment()
    }

    /// Counts an in-app activation outcome: `APPROVED`, `DECLINED`, `FAILED`, or an error code.
    func recordActivation(outcome: String) {
        registry.makeCounter(descriptor: Self.activation, labels: [("outcome", outcome)]).increment()
    }

    /// The Prometheus text exposition.
    public func render() -> String { registry.emitToString() }
}

/// Measures every request by route pattern and logs one line per request (method, route,
/// status, duration — never headers or bodies).
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: PlatformMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        let route = context.endpointPath ?? "unmatched"
        metrics.recordRequest(method: request.method.rawValue, route: route, status: response.status.code, duration: elapsed)
        context.logger.info("request", metadata: ["method": "\(request.method.rawValue)", "route": "\(route)", "status": "\(response.status.code)", "ms": "\(elapsed.components.attoseconds / 1_000_000_000_000_000 + elapsed.components.seconds * 1000)"])
        return response
    }
}
