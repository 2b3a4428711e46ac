import Foundation
import Testing
import TokenPlatform

/// The embedded run's secrets file: made once, whole, owner-only.
@Suite("Embedded secrets")
struct EmbeddedSecretsTests {
    static func directory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-secrets-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func theFileIsMadeOnceWholeAndOwnerOnlyWithNothingLeftBeside() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("secrets.json").path
        let first = try EmbeddedSecrets.loadOrCreate(at: path)
        #expect(first.created)
        #expect(first.value.issuerAPIKey != first.value.tspAPIKey)
        let mode = try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["secrets.json"])
        let second = try EmbeddedSecrets.loadOrCreate(at: path)
        #expect(!second.created)
        #expect(second.value.issuerAPIKey == first.value.issuerAPIKey && second.value.cardholderDevelopmentKey.id == first.value.cardholderDevelopmentKey.id)
    }

    @Test func startersRacingOnAFreshDirectoryAllReadTheSameCompleteFile() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("secrets.json").path
        let results = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let loaded = try EmbeddedSecrets.loadOrCreate(at: path)
                    return (loaded.value.issuerAPIKey, loaded.created)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(results.map(\.0)).count == 1)
        #expect(results.filter(\.1).count == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["secrets.json"])
    }

    @Test func aBadJWKSIsRefusedBeforeTheEmbeddedRunMakesAnyFile() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let jwks = directory.appendingPathComponent("jwks.json")
        try Data(#"{"keys":[]}"#.utf8).write(to: jwks)
        var settings = ServerSettings()
        settings.dataDirectory = directory.appendingPathComponent("data").path
        #expect(throws: ConfigurationError.self) { try settings.resolve(environment: ["PUSHPROV_JWKS": jwks.path]) }
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("data").path))
    }
}
