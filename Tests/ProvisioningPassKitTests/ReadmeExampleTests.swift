import Foundation
import Testing

/// Keeps the README's iOS code true: every region of ReadmeExample.swift stands in the README.
@Suite("README: Add it to your iOS app")
struct ReadmeExampleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The regions of the example file, each without its common indentation.
    static func regions() throws -> [String: String] {
        let source = try String(contentsOf: root.appendingPathComponent("Tests/ProvisioningPassKitTests/ReadmeExample.swift"), encoding: .utf8)
        var regions: [String: String] = [:]
        var current: (name: String, lines: [Substring])?
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("// README-BEGIN ") {
                current = (String(trimmed.dropFirst("// README-BEGIN ".count)), [])
            } else if trimmed == "// README-END", let region = current {
                let indent = region.lines.filter { !$0.allSatisfy(\.isWhitespace) }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
                regions[region.name] = region.lines.map { String($0.dropFirst(min(indent, $0.count))) }.joined(separator: "\n")
                current = nil
            } else {
                current?.lines.append(line)
            }
        }
        return regions
    }

    @Test func everyExampleRegionStandsInTheReadme() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let regions = try Self.regions()
        #expect(Set(regions.keys) == ["setup", "status", "add", "link", "extension-configuration", "extension-handler", "extension-sign-in"])
        for (name, code) in regions {
            #expect(readme.contains(code), "README lacks the \(name) example as compiled in ReadmeExample.swift")
        }
    }
}
