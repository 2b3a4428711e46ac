import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ProvisioningCrypto
import SDKTestSupport
import TMPTestSupport
import Testing
@testable import TokenPlatform

/// The identity provider's JWKS file reloaded while the server runs: a rotation needs no
/// restart, a withdrawn key stops signing anyone in, and a broken file changes nothing.
@Suite("Cardholder key reload")
struct CardholderKeyReloadTests {
    /// A JWKS file (mode 0600) in a fresh directory, and a way to rewrite it.
    final class JWKSFile: Sendable {
        let directory: URL
        let path: String

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-jwks-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            path = directory.appendingPathComponent("jwks.json").path
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        /// Replaces the file, as a deployment does: written beside it, then renamed over it.
        func write(_ keys: [SigningKey]) throws {
            let entries = try keys.map { String(decoding: try JSONEncoder().encode(JSONWebKey(publicKey: $0.privateKey.publicKey, keyID: $0.id)), as: UTF8.self) }
            try write(text: #"{"keys":[\#(entries.joined(separator: ","))]}"#)
        }

        func write(text: String, mode: Int = 0o600) throws {
            let staging = path + ".new"
            try Data(text.utf8).write(to: URL(fileURLWithPath: staging))
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: staging)
            guard rename(staging, path) == 0 else { throw TestFailure("rename failed: \(errno)") }
        }
    }

    static let now = Date()

    static func token(_ key: SigningKey, user: String = "alice") throws -> String {
        try DevelopmentTokenIssuer(key: key).token(userId: user, lifetime: 600, now: now)
    }

    static func authenticator(_ keys: [SigningKey]) -> Authenticator {
        let verifier = CardholderTokenVerifier(keys: Dictionary(uniqueKeysWithValues: keys.map { ($0.id, $0.privateKey.publicKey) }))
        return Authenticator(cardholderTokens: verifier, issuerKey: APIKey("issuer"), tspKey: APIKey("tsp"), now: { now })
    }

    /// The status of `GET /issuer/push-provisioning/cards` with `token`, through the router.
    static func status(_ token: String, authenticator: Authenticator) async throws -> HTTPResponse.Status {
        let platform = try await TestPlatform()
        let router = TokenPlatformRouter(environment: platform.environment, authenticator: authenticator).build()
        return try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/issuer/push-provisioning/cards", method: .get, headers: [.authorization: "Bearer \(token)"]) { $0.status }
        }
    }

    @Test func aRotationIsPutInForceAndAWithdrawnKeyStopsSigningInEvenATokenAcceptedBefore() async throws {
        let file = try JWKSFile()
        let old = SigningKey.generate(), new = SigningKey.generate()
        try file.write([old])
        let authenticator = Self.authenticator([old])
        let lines = Locked<[String]>([])
        let reloader = CardholderKeyReloader(path: file.path, developmentKey: nil, authenticator: authenticator, logger: TestTMP.logger("reload", into: lines))
        let oldToken = try Self.token(old), newToken = try Self.token(new)
        // Accepted once, so remembered by the authenticator's cache of verified tokens.
        #expect(try await Self.status(oldToken, authenticator: authenticator) == .ok)
        #expect(try await Self.status(newToken, authenticator: authenticator) == .unauthorized)
        // The first look finds the keys already in force: nothing to do, nothing logged.
        #expect(reloader.checkOnce() == .unchanged)
        #expect(lines.current.isEmpty)

        // The identity provider publishes its new key beside the old one.
        try file.write([old, new])
        #expect(reloader.checkOnce() == .reloaded(added: [new.id], removed: []))
        #expect(try await Self.status(newToken, authenticator: authenticator) == .ok)
        #expect(try await Self.status(oldToken, authenticator: authenticator) == .ok)
        #expect(reloader.checkOnce() == .unchanged)

        // It withdraws the old one: a token it signed is refused, though accepted a moment ago.
        try file.write([new])
        #expect(reloader.checkOnce() == .reloaded(added: [], removed: [old.id]))
        #expect(try await Self.status(oldToken, authenticator: authenticator) == .unauthorized)
        #expect(try await Self.status(newToken, authenticator: authenticator) == .ok)
        #expect(authenticator.cardholderTokens.keys.keys.sorted() == [new.id])
        let notices = lines.current.filter { $0.contains("cardholder keys reloaded") }
        #expect(notices.count == 2)
        #expect(notices.last?.contains("\"removed\": \(old.id)") == true, "\(notices)")
    }

    @Test(arguments: [
        ("{\"keys\":[", 0o600, "is not a JSON Web Key Set"),
        ("{\"keys\":[]}", 0o600, "holds no EC P-256 signing key"),
        ("$KEY", 0o666, "can be written by group or others"),
    ])
    func aFileThatCannotBeUsedKeepsTheKeysInForceAndIsLoggedOnce(text: String, mode: Int, reason: String) async throws {
        let file = try JWKSFile()
        let key = SigningKey.generate()
        try file.write([key])
        let valid = try String(contentsOfFile: file.path, encoding: .utf8)
        let authenticator = Self.authenticator([key])
        let lines = Locked<[String]>([])
        let reloader = CardholderKeyReloader(path: file.path, developmentKey: nil, authenticator: authenticator, logger: TestTMP.logger("reload", into: lines))
        #expect(reloader.checkOnce() == .unchanged)

        try file.write(text: text.replacingOccurrences(of: "$KEY", with: valid), mode: mode)
        guard case .refused(let message) = reloader.checkOnce() else {
            Issue.record("a file that cannot be used was not refused")
            return
        }
        #expect(message.contains(reason), "\(message)")
        #expect(try await Self.status(try Self.token(key), authenticator: authenticator) == .ok)
        // Looked at again unchanged: not logged again.
        #expect(reloader.checkOnce() == .unchanged)
        let errors = lines.current.filter { $0.hasPrefix("error cardholder keys not reloaded") }
        #expect(errors.count == 1, "\(lines.current)")
        #expect(errors.first?.contains(key.id) == true, "the keys in force are named: \(errors)")

        // Fixed: read again.
        let next = SigningKey.generate()
        try file.write([next])
        #expect(reloader.checkOnce() == .reloaded(added: [next.id], removed: [key.id]))
    }

    @Test func aFileRemovedKeepsTheKeysInForceUntilItIsBack() async throws {
        let file = try JWKSFile()
        let key = SigningKey.generate()
        try file.write([key])
        let authenticator = Self.authenticator([key])
        let lines = Locked<[String]>([])
        let reloader = CardholderKeyReloader(path: file.path, developmentKey: nil, authenticator: authenticator, logger: TestTMP.logger("reload", into: lines))
        #expect(reloader.checkOnce() == .unchanged)
        try FileManager.default.removeItem(atPath: file.path)
        guard case .refused(let message) = reloader.checkOnce() else {
            Issue.record("a missing file was not refused")
            return
        }
        #expect(message.contains("cannot be read"))
        #expect(reloader.checkOnce() == .unchanged)
        #expect(try await Self.status(try Self.token(key), authenticator: authenticator) == .ok)
        try file.write([key])
        #expect(reloader.checkOnce() == .unchanged)
        #expect(lines.current.count == 1, "\(lines.current)")
    }

    @Test func theEmbeddedRunKeepsItsDevelopmentKeyBesideTheFilesKeys() async throws {
        let file = try JWKSFile()
        let development = SigningKey.generate(), provider = SigningKey.generate(), rotated = SigningKey.generate()
        try file.write([provider])
        let authenticator = Self.authenticator([development, provider])
        let reloader = CardholderKeyReloader(path: file.path, developmentKey: development.publicJWK, authenticator: authenticator, logger: TestTMP.logger("reload", into: Locked([])))
        #expect(reloader.checkOnce() == .unchanged)
        try file.write([rotated])
        #expect(reloader.checkOnce() == .reloaded(added: [rotated.id], removed: [provider.id]))
        #expect(try await Self.status(try Self.token(development), authenticator: authenticator) == .ok)
        #expect(try await Self.status(try Self.token(rotated), authenticator: authenticator) == .ok)
        #expect(try await Self.status(try Self.token(provider), authenticator: authenticator) == .unauthorized)
    }

    @Test func aKeyReplacedUnderTheSameIdIsAChange() throws {
        let file = try JWKSFile()
        let first = SigningKey.generate()
        let second = SigningKey(id: first.id, privateKey: P256.Signing.PrivateKey())
        try file.write([first])
        let authenticator = Self.authenticator([first])
        let reloader = CardholderKeyReloader(path: file.path, developmentKey: nil, authenticator: authenticator, logger: TestTMP.logger("reload", into: Locked([])))
        try file.write([second])
        #expect(reloader.checkOnce() == .reloaded(added: [first.id], removed: [first.id]))
        #expect(authenticator.cardholderTokens.verify(try Self.token(first)) == .failure(.badSignature))
        #expect(authenticator.cardholderTokens.verify(try Self.token(second)).map(\.subject) == .success("alice"))
    }

    @Test func aVerificationBegunUnderKeysReplacedMeanwhileIsNotRemembered() throws {
        let key = SigningKey.generate()
        let cache = VerifiedTokenCache(verifier: CardholderTokenVerifier(keys: [key.id: key.privateKey.publicKey]), capacity: 8)
        let token = try Self.token(key)
        // The key is withdrawn while the token's signature is being checked under it.
        let first = cache.claims(for: token, afterVerifying: { cache.replaceKeys([:]) })
        #expect(first.map(\.subject) == .success("alice"), "it began under the keys of its time")
        #expect(cache.claims(for: token) == .failure(.unknownKey), "the next request is checked under the keys in force")
    }

    @Test func aRefusalIsRememberedOnlyUntilTheKeysChange() throws {
        let key = SigningKey.generate()
        let cache = VerifiedTokenCache(verifier: CardholderTokenVerifier(keys: [:]), capacity: 8, refusalCapacity: 2)
        let token = try Self.token(key)
        #expect(cache.claims(for: token) == .failure(.unknownKey))
        #expect(cache.claims(for: token) == .failure(.unknownKey))
        #expect(cache.verifications == 1, "the second judgement is remembered")
        // The key arrives: the token is verified again, and accepted.
        cache.replaceKeys([key.id: key.privateKey.publicKey])
        #expect(cache.claims(for: token).map(\.subject) == .success("alice"))
        #expect(cache.verifications == 2)
        // A refusal reached under keys replaced meanwhile is not remembered either.
        let forged = try Self.token(SigningKey(id: key.id, privateKey: P256.Signing.PrivateKey()))
        #expect(cache.claims(for: forged, afterVerifying: { cache.replaceKeys([key.id: key.privateKey.publicKey]) }) == .failure(.badSignature))
        #expect(cache.claims(for: forged) == .failure(.badSignature))
        #expect(cache.verifications == 4)
        // Refusals are bounded: the first of three is forgotten with room for two.
        let others = try (0..<3).map { _ in try Self.token(SigningKey(id: key.id, privateKey: P256.Signing.PrivateKey())) }
        for other in others { _ = cache.claims(for: other) }
        _ = cache.claims(for: others[2])
        #expect(cache.verifications == 7)
        _ = cache.claims(for: others[0])
        #expect(cache.verifications == 8)
    }

    @Test func aFileChangedJustBeforeALookIsReadAgainAtTheNextUntilItsTimesHaveSettled() throws {
        let file = try JWKSFile()
        let key = SigningKey.generate(), other = SigningKey.generate()
        try file.write([key])
        let authenticator = Self.authenticator([key])
        let reloader = CardholderKeyReloader(path: file.path, developmentKey: nil, authenticator: authenticator, logger: TestTMP.logger("reload", into: Locked([])))
        let changed = Date(timeIntervalSince1970: FileIdentity(path: file.path).modifiedSeconds)
        #expect(reloader.checkOnce(now: changed.addingTimeInterval(0.5)) == .unchanged)
        // A rewrite within the file system's clock tick leaves the same size and times; here the
        // keys in force are changed instead, which only a read of the file can notice.
        authenticator.replaceCardholderKeys([other.id: other.privateKey.publicKey])
        #expect(reloader.checkOnce(now: changed.addingTimeInterval(0.6)) == .reloaded(added: [key.id], removed: [other.id]), "read again: the file changed 0.5 s before the last look")
        #expect(reloader.checkOnce(now: changed.addingTimeInterval(5)) == .unchanged)
        // Settled: a look with nothing changed reads nothing.
        authenticator.replaceCardholderKeys([other.id: other.privateKey.publicKey])
        #expect(reloader.checkOnce(now: changed.addingTimeInterval(15)) == .unchanged)
        #expect(authenticator.cardholderTokens.keys.keys.sorted() == [other.id])
    }

    // Only a process run by root can give a file away.
    @Test(.enabled(if: geteuid() == 0, "giving a file to another user needs root"))
    func aFileAnotherUserOwnsIsRefused() throws {
        let file = try JWKSFile()
        let key = SigningKey.generate()
        try file.write([key])
        let authenticator = Self.authenticator([key])
        let reloader = CardholderKeyReloader(path: file.path, developmentKey: nil, authenticator: authenticator, logger: TestTMP.logger("reload", into: Locked([])))
        #expect(reloader.checkOnce() == .unchanged)
        try file.write([SigningKey.generate()])
        try FileManager.default.setAttributes([.ownerAccountID: 54_321], ofItemAtPath: file.path)
        #expect(reloader.checkOnce() == .refused("JWKS file \(file.path) belongs to user id 54321, neither this process's user (0) nor root; whoever owns it can sign in as any cardholder: chown it"))
        #expect(authenticator.cardholderTokens.keys.keys.sorted() == [key.id])
        var settings = ServerSettings()
        settings.dataDirectory = file.directory.appendingPathComponent("data").path
        let error = #expect(throws: ConfigurationError.self) { try settings.resolve(environment: ["PUSHPROV_JWKS": file.path]) }
        #expect(error?.message.contains("belongs to user id 54321") == true)
    }

    @Test func theReloadIntervalIsResolvedWithClearErrors() throws {
        var settings = ServerSettings()
        #expect(try settings.resolveCardholderKeysReloadInterval(environment: [:]) == .seconds(10))
        #expect(try settings.resolveCardholderKeysReloadInterval(environment: ["PUSHPROV_JWKS_RELOAD_INTERVAL": "0"]) == nil)
        #expect(try settings.resolveCardholderKeysReloadInterval(environment: ["PUSHPROV_JWKS_RELOAD_INTERVAL": "2.5"]) == .milliseconds(2500))
        settings.cardholderKeysReloadInterval = "60"  // the flag wins
        #expect(try settings.resolveCardholderKeysReloadInterval(environment: ["PUSHPROV_JWKS_RELOAD_INTERVAL": "0"]) == .seconds(60))
        for bad in ["0.5", "3601", "soon", "-1"] {
            settings.cardholderKeysReloadInterval = bad
            let error = #expect(throws: ConfigurationError.self) { try settings.resolveCardholderKeysReloadInterval(environment: [:]) }
            #expect(error?.message == "JWKS reload interval must be 0 (read only at start) or a number of seconds from 1 to 3600 (got \(bad))")
        }
    }
}
