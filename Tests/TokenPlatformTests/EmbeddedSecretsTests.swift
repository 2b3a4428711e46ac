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

    /// A secrets file others can read is refused as what it is (it was called a key file).
    @Test func aSecretsFileOthersCanReadIsRefusedByItsName() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("secrets.json").path
        _ = try EmbeddedSecrets.loadOrCreate(at: path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        let error = #expect(throws: ConfigurationError.self) { try EmbeddedSecrets.load(at: path) }
        #expect(error?.message == "secrets file \(path) has mode 644; it must be readable by its owner only (chmod 600 \(path))")
    }

    @Test(arguments: [0o777, 0o1777, 0o773])
    func aDataDirectoryEveryUserCanWriteIsRefusedBeforeAnythingIsMadeInIt(mode: Int) throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: directory.path)
        var settings = ServerSettings()
        settings.dataDirectory = directory.path
        let error = #expect(throws: ConfigurationError.self) { try settings.resolve(environment: [:]) }
        #expect(error?.message == "data directory \(directory.path) can be written by every user (mode \(String(mode, radix: 8))): anyone could put their own keys.json or secrets.json there for this server to read; choose another --data-dir, or chmod o-w \(directory.path)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test func aDataDirectoryItsGroupCanWriteIsSaid() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerSettings()
        settings.dataDirectory = directory.path
        func warnings() throws -> [String] {
            try settings.resolve(environment: [:]).notices.filter { $0.hasPrefix("warning: data directory") }
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        #expect(try warnings().isEmpty)
        try FileManager.default.setAttributes([.posixPermissions: 0o770], ofItemAtPath: directory.path)
        #expect(try warnings() == ["warning: data directory \(directory.path) can be written by its group (mode 770): the group's members can replace the keys and the database in it; chmod g-w \(directory.path)"])
    }

    // Only a process run by root can give the directory away.
    @Test(.enabled(if: geteuid() == 0, "giving a directory to another user needs root"))
    func aDataDirectoryAnotherUserOwnsIsSaid() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerSettings()
        settings.dataDirectory = directory.path
        try FileManager.default.setAttributes([.posixPermissions: 0o700, .ownerAccountID: 54_321], ofItemAtPath: directory.path)
        let warnings = try settings.resolve(environment: [:]).notices.filter { $0.hasPrefix("warning: data directory") }
        #expect(warnings == ["warning: data directory \(directory.path) belongs to user id 54321, not to this process's user (0), who can replace the keys and the database in it"])
    }

    @Test func aDataDirectoryThatIsAFileIsOneClearError() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("plain")
        try Data().write(to: file)
        var settings = ServerSettings()
        settings.dataDirectory = file.path
        let error = #expect(throws: ConfigurationError.self) { try settings.resolve(environment: [:]) }
        #expect(error?.message == "data directory \(file.path) is not a directory")
        // Nor can one be made inside a file.
        settings.dataDirectory = file.appendingPathComponent("below").path
        let below = #expect(throws: ConfigurationError.self) { try settings.resolve(environment: [:]) }
        #expect(below?.message.hasPrefix("data directory \(file.path)/below cannot be made: ") == true, "\(below?.message ?? "")")
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

    @Test(arguments: [
        ["PUSHPROV_ISSUER_API_KEY": "has a space"],
        ["PUSHPROV_TSP_API_KEY": "ünïcode"],
        ["PUSHPROV_ISSUER_API_KEY": "same-key-for-both", "PUSHPROV_TSP_API_KEY": "same-key-for-both"],
    ])
    func aBadAPIKeyFromTheEnvironmentIsRefusedBeforeTheEmbeddedRunMakesAnyFile(environment: [String: String]) throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerSettings()
        settings.dataDirectory = directory.appendingPathComponent("data").path
        // Refused before the keys and secrets files exist: the start that makes them is the
        // one that prints the generated keys, and it must not be lost to a refusal.
        #expect(throws: ConfigurationError.self) { try settings.resolve(environment: environment) }
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("data").path))
    }

    @Test func startUpNamesWhereEachAPIKeyComesFromAndPrintsOnlyTheGeneratedOnes() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerSettings()
        settings.dataDirectory = directory.appendingPathComponent("both-set").path
        let both = ["PUSHPROV_ISSUER_API_KEY": "issuer-key-from-env", "PUSHPROV_TSP_API_KEY": "tsp-key-from-env"]
        // Both keys from the environment: nothing is announced as printed, no key is printed.
        let first = try settings.resolve(environment: both).notices
        #expect(first.contains { $0.hasPrefix("generated embedded-run secrets in") && $0.hasSuffix("the API keys come from the environment") })
        #expect(!first.contains { $0.contains("printed this once") || $0.contains("API key (PUSHPROV_") })
        #expect(try settings.resolve(environment: both).notices.isEmpty)

        // Only the issuer key set: the TSP key is printed once, then named with its file.
        settings.dataDirectory = directory.appendingPathComponent("issuer-set").path
        let issuerOnly = ["PUSHPROV_ISSUER_API_KEY": "issuer-key-from-env"]
        let created = try settings.resolve(environment: issuerOnly)
        #expect(created.notices.contains { $0.hasSuffix("the API keys taken from it are printed this once:") })
        #expect(created.notices.contains("  TSP API key (PUSHPROV_TSP_API_KEY): \(created.tspAPIKey)"))
        #expect(!created.notices.contains { $0.contains("issuer API key") || $0.contains("issuer-key-from-env") })
        let restarted = try settings.resolve(environment: issuerOnly).notices
        #expect(restarted == ["TSP API key: from \(settings.dataDirectory!)/secrets.json"])

        // Neither set: both printed once, then named together.
        settings.dataDirectory = directory.appendingPathComponent("none-set").path
        let generated = try settings.resolve(environment: [:])
        #expect(generated.notices.contains("  issuer API key (PUSHPROV_ISSUER_API_KEY): \(generated.issuerAPIKey)"))
        #expect(generated.notices.contains("  TSP API key (PUSHPROV_TSP_API_KEY): \(generated.tspAPIKey)"))
        #expect(try settings.resolve(environment: [:]).notices == ["issuer API key and TSP API key: from \(settings.dataDirectory!)/secrets.json"])
    }
}
