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
}
