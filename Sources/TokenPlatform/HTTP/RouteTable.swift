import HTTPTypes

/// Who may call a route.
public enum AuthRequirement: String, Sendable, Hashable {
    /// A cardholder JWT.
    case cardholder
    /// The issuer back office's API key.
    case issuer
    /// The token service provider's API key.
    case tsp
    /// The metrics key when one is configured (`PUSHPROV_METRICS_API_KEY`); anyone otherwise.
    case metrics
    /// Anyone (health, the OpenAPI document).
    case none
}

/// One route of the TMP server.
public struct RouteSpec: Sendable, Hashable, CustomStringConvertible {
    /// The method.
    public var method: HTTPRequest.Method
    /// The path with `{parameter}` placeholders, as in the OpenAPI document.
    public var path: String
    /// Who may call it.
    public var auth: AuthRequirement

    /// `METHOD path`.
    public var description: String { "\(method.rawValue) \(path)" }

    /// Whether a concrete request path matches this route's pattern. Empty segments (a
    /// trailing or doubled `/`) are skipped, as the router skips them.
    func matches(path concrete: String) -> Bool {
        let pattern = path.split(separator: "/")
        let actual = concrete.split(separator: "/")
        guard pattern.count == actual.count else { return false }
        return zip(pattern, actual).allSatisfy { expected, given in
            (expected.hasPrefix("{") && expected.hasSuffix("}") && !given.isEmpty) || expected == given
        }
    }
}

/// Every route of the TMP server, in one list: the router is built from it, 405 answers
/// consult it, and a test checks the OpenAPI document against it.
public enum RouteTable {
    /// All routes.
    public static let all: [RouteSpec] = [
        RouteSpec(method: .post, path: "/issuer/push-provisioning/tokens/searches", auth: .cardholder),
        RouteSpec(method: .post, path: "/issuer/push-provisioning/signed-cards", auth: .cardholder),
        RouteSpec(method: .post, path: "/issuer/push-provisioning/tokens/activations", auth: .cardholder),
        RouteSpec(method: .get, path: "/issuer/push-provisioning/cards", auth: .cardholder),
        RouteSpec(method: .get, path: "/issuer/push-provisioning/cards/{externalCardId}/art", auth: .cardholder),
        RouteSpec(method: .put, path: "/lifecycle/cards/{externalCardId}", auth: .issuer),
        RouteSpec(method: .patch, path: "/lifecycle/cards/{externalCardId}", auth: .issuer),
        RouteSpec(method: .get, path: "/lifecycle/cards/{externalCardId}", auth: .issuer),
        RouteSpec(method: .get, path: "/lifecycle/cards/{externalCardId}/tokens", auth: .issuer),
        RouteSpec(method: .post, path: "/lifecycle/tokens/{tokenUniqueReference}/suspend", auth: .issuer),
        RouteSpec(method: .post, path: "/lifecycle/tokens/{tokenUniqueReference}/resume", auth: .issuer),
        RouteSpec(method: .post, path: "/lifecycle/tokens/{tokenUniqueReference}/deactivate", auth: .issuer),
        RouteSpec(method: .put, path: "/lifecycle/card-art/{artId}", auth: .issuer),
        RouteSpec(method: .post, path: "/tsp/tokenization-decisions", auth: .tsp),
        RouteSpec(method: .post, path: "/tsp/token-events", auth: .tsp),
        RouteSpec(method: .get, path: "/tsp/activation-keys", auth: .tsp),
        RouteSpec(method: .get, path: "/health", auth: .none),
        RouteSpec(method: .get, path: "/health/live", auth: .none),
        RouteSpec(method: .get, path: "/metrics", auth: .metrics),
        RouteSpec(method: .get, path: "/openapi.yaml", auth: .none),
    ]

    /// The methods allowed on a concrete path (empty when no route matches it): HEAD too
    /// where GET is, which every GET route also answers.
    static func allowedMethods(for path: String) -> [HTTPRequest.Method] {
        all.filter { $0.matches(path: path) }.flatMap { $0.method == .get ? [.get, .head] : [$0.method] }
    }

    /// The spec of `method` on `pattern`.
    static func spec(_ method: HTTPRequest.Method, _ pattern: String) -> RouteSpec {
        guard let spec = all.first(where: { $0.method == method && $0.path == pattern }) else {
            preconditionFailure("route \(method) \(pattern) is not in RouteTable.all")
        }
        return spec
    }
}
