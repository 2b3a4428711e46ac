import Foundation
import Testing
import TokenPlatform

@Suite("OpenAPI document")
struct OpenAPIDocumentTests {
    /// `path -> [methods]` read from the document's `paths:` section (two-space path keys,
    /// four-space method keys).
    static func documentedRoutes() -> [String: Set<String>] {
        var routes: [String: Set<String>] = [:]
        var inPaths = false
        var current: String?
        for line in OpenAPIDocument.yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("paths:") { inPaths = true; continue }
            if inPaths, let first = line.first, first != " ", first != "#" { inPaths = false }
            guard inPaths else { continue }
            if line.hasPrefix("  /") {
                current = String(line.dropFirst(2).prefix { $0 != ":" })
                routes[current!, default: []] = []
            } else if let current, line.hasPrefix("    "), !line.hasPrefix("     ") {
                let key = line.dropFirst(4).prefix { $0 != ":" }
                if ["get", "put", "post", "patch", "delete"].contains(String(key)) { routes[current, default: []].insert(key.uppercased()) }
            }
        }
        return routes
    }

    @Test func everyRouteIsDocumented() {
        let documented = Self.documentedRoutes()
        for route in RouteTable.all {
            #expect(documented[route.path]?.contains(route.method.rawValue) == true, "\(route) is missing from openapi.yaml")
        }
    }

    @Test func nothingIsDocumentedThatDoesNotExist() {
        let documented = Self.documentedRoutes()
        let real = Set(RouteTable.all.map { "\($0.method.rawValue) \($0.path)" })
        for (path, methods) in documented {
            for method in methods { #expect(real.contains("\(method) \(path)"), "openapi.yaml documents \(method) \(path), which the server does not have") }
        }
        #expect(documented.values.map(\.count).reduce(0, +) == RouteTable.all.count)
    }

    /// `"METHOD path" -> scheme` from each operation's `security` (six spaces): the one scheme
    /// listed under it (after `optional ` when an empty requirement comes first), or `none` for
    /// `security: []`.
    static func documentedSecurity() -> [String: String] {
        var schemes: [String: String] = [:]
        var path: String?
        var operation: String?
        var listing = false
        for line in OpenAPIDocument.yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  /") {
                path = String(line.dropFirst(2).prefix { $0 != ":" })
            } else if let path, line.hasPrefix("    "), !line.hasPrefix("     ") {
                operation = "\(line.dropFirst(4).prefix { $0 != ":" }.uppercased()) \(path)"
            } else if let operation, line == "      security: []" {
                schemes[operation, default: ""] += "none"
            } else if operation != nil, line == "      security:" {
                listing = true
                continue
            } else if let operation, listing, line == "        - {}" {
                // An empty requirement: the credential is optional.
                schemes[operation, default: ""] += "optional "
                continue
            } else if let operation, listing, line.hasPrefix("        - ") {
                schemes[operation, default: ""] += line.dropFirst(10).prefix { $0 != ":" }
            }
            listing = false
        }
        return schemes
    }

    @Test func everyOperationDocumentsTheCredentialItsRouteRequires() {
        let documented = Self.documentedSecurity()
        let scheme: [AuthRequirement: String] = [.cardholder: "cardholderJWT", .issuer: "issuerAPIKey", .tsp: "tspAPIKey", .metrics: "optional metricsAPIKey", .none: "none"]
        for route in RouteTable.all {
            #expect(documented["\(route.method.rawValue) \(route.path)"] == scheme[route.auth], "\(route)")
        }
        #expect(documented.count == RouteTable.all.count)
    }
}
