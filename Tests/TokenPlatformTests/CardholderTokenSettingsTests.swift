import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import ProvisioningCrypto
import Testing
import TokenPlatform

/// Where cardholder JWTs come from: the JWKS file, and the issuer and audience they must carry.
@Suite("Cardholder token settings")
struct CardholderTokenSettingsTests {
    /// A production environment with every secret configured, in a fresh directory.
    static func production(_ extra: [String: String] = [:], jwks: String? = nil) throws -> (environment: [String: String], directory: URL, key: SigningKey) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-jwt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let keyFile = directory.appendingPathComponent("keys.json").path
        _ = try LocalKeyFile.loadOrCreate(at: keyFile)
        let key = SigningKey.generate()
        let jwksFile = directory.appendingPathComponent("jwks.json")
        let keyJSON = String(decoding: try JSONEncoder().encode(JSONWebKey(publicKey: key.privateKey.publicKey, keyID: key.id)), as: UTF8.self)
        try Data((jwks ?? "{\"keys\":[\(keyJSON)]}").replacingOccurrences(of: "$EC", with: keyJSON).utf8).write(to: jwksFile)
        let environment = [
            "PUSHPROV_ISSUER_API_KEY": Self.issuerKey, "PUSHPROV_TSP_API_KEY": Self.tspKey,
            "PUSHPROV_JWKS": jwksFile.path, "PUSHPROV_KEY_FILE": keyFile,
            "PUSHPROV_DATABASE": directory.appendingPathComponent("pushprov.sqlite").path,
        ].merging(extra) { $1 }
        return (environment, directory, key)
    }

    static let issuerKey = "issuer-key-0123456789abcdefghijklmnopqrstuv"
    static let tspKey = "tsp-key-0123456789abcdefghijklmnopqrstuvwxyz"

    static func productionSettings() -> ServerSettings {
        var settings = ServerSettings()
        settings.production = true
        return settings
    }

    @Test func productionRefusesToStartWithoutTheTokensIssuerAndAudience() throws {
        let setup = try Self.production()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let neither = #expect(throws: ConfigurationError.self) { try Self.productionSettings().resolve(environment: setup.environment) }
        #expect(neither?.message == "--production needs the cardholder JWTs' issuer and audience; missing: --jwt-issuer / PUSHPROV_JWT_ISSUER, --jwt-audience / PUSHPROV_JWT_AUDIENCE")
        var settings = Self.productionSettings()
        settings.cardholderIssuer = "https://id.example"
        let noAudience = #expect(throws: ConfigurationError.self) { try settings.resolve(environment: setup.environment) }
        #expect(noAudience?.message.hasSuffix("missing: --jwt-audience / PUSHPROV_JWT_AUDIENCE") == true)
    }

    @Test func productionAcceptsOnlyTokensIssuedForThisServer() throws {
        let setup = try Self.production(["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "from-environment"])
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        var settings = Self.productionSettings()
        settings.cardholderAudience = "pushprov-tmp"  // the flag wins
        let configuration = try settings.resolve(environment: setup.environment)
        #expect(configuration.cardholderIssuer == "https://id.example")
        #expect(configuration.cardholderAudience == "pushprov-tmp")
        let verifier = TMPServer.makeAuthenticator(configuration: configuration).cardholderTokens
        let now = Date()
        func token(_ issuer: String, _ audience: String?) throws -> String {
            try DevelopmentTokenIssuer(key: setup.key, issuer: issuer, audience: audience).token(userId: "alice", lifetime: 60, now: now)
        }
        #expect(verifier.userId(from: try token("https://id.example", "pushprov-tmp"), now: now) == .success("alice"))
        #expect(verifier.userId(from: try token("https://id.example", "another-app"), now: now) == .failure(.wrongAudience))
        #expect(verifier.userId(from: try token("https://id.example", nil), now: now) == .failure(.wrongAudience))
        #expect(verifier.userId(from: try token("https://other.example", "pushprov-tmp"), now: now) == .failure(.wrongIssuer))
    }

    @Test func overHTTPProductionRefusesTokensForAnotherIssuerOrAudienceLikeNoCredential() async throws {
        let setup = try Self.production(["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "pushprov-tmp"])
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let configuration = try Self.productionSettings().resolve(environment: setup.environment)
        let platform = try await TestPlatform()
        let router = TokenPlatformRouter(environment: platform.environment, authenticator: TMPServer.makeAuthenticator(configuration: configuration)).build()
        let cases: [(String, [String]?, HTTPResponse.Status)] = [
            ("https://id.example", ["pushprov-tmp"], .ok),
            ("https://id.example", ["another-app", "pushprov-tmp"], .ok),
            ("https://id.example", ["another-app"], .unauthorized),
            ("https://id.example", nil, .unauthorized),
            ("https://id.example/", ["pushprov-tmp"], .unauthorized),
            ("https://other.example", ["pushprov-tmp"], .unauthorized),
        ]
        try await Application(router: router).test(.router) { client in
            for (issuer, audience, expected) in cases {
                let now = Int(Date().timeIntervalSince1970)
                let aud = audience.map { #","aud":[\#($0.map { "\"\($0)\"" }.joined(separator: ","))]"# } ?? ""
                let claims = Data(#"{"sub":"alice","iss":"\#(issuer)"\#(aud),"iat":\#(now),"exp":\#(now + 60)}"#.utf8)
                let token = try CompactJWS.sign(payload: claims, key: setup.key.privateKey, keyID: setup.key.id, type: "JWT")
                try await client.execute(uri: "/issuer/push-provisioning/cards", method: .get, headers: [.authorization: "Bearer \(token)"]) { response in
                    #expect(response.status == expected, "iss \(issuer), aud \(audience ?? [])")
                    if expected == .unauthorized {
                        let body = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: [String: String]]
                        #expect(body == ["error": ["code": "unauthorized", "message": "missing or invalid credentials"]])
                    }
                }
            }
        }
    }

    @Test func aConfiguredTypeIsRequiredOfEveryTokenAndComparedAsAMediaType() throws {
        let setup = try Self.production(["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "pushprov-tmp", "PUSHPROV_JWT_TYPE": "from-environment"])
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        var settings = Self.productionSettings()
        settings.cardholderType = "at+jwt"  // the flag wins
        let configuration = try settings.resolve(environment: setup.environment)
        #expect(configuration.cardholderType == "at+jwt")
        let verifier = TMPServer.makeAuthenticator(configuration: configuration).cardholderTokens
        let now = Date()
        func typed(_ type: String) throws -> String {
            try DevelopmentTokenIssuer(key: setup.key, issuer: "https://id.example", audience: "pushprov-tmp", type: type).token(userId: "alice", lifetime: 60, now: now)
        }
        for accepted in ["at+jwt", "AT+JWT", "application/at+jwt"] {
            #expect(verifier.userId(from: try typed(accepted), now: now) == .success("alice"), "\(accepted)")
        }
        for refused in ["JWT", "at+jwt2", "application/jwt"] {
            #expect(verifier.userId(from: try typed(refused), now: now) == .failure(.wrongType), "\(refused)")
        }
        let untyped = try CompactJWS.sign(payload: Data(#"{"sub":"alice","iss":"https://id.example","aud":"pushprov-tmp","exp":\#(Int(now.timeIntervalSince1970) + 60)}"#.utf8), key: setup.key.privateKey, keyID: setup.key.id, type: nil)
        #expect(verifier.userId(from: untyped, now: now) == .failure(.wrongType))
        // Without the setting, any typ (or none) is accepted, as before.
        var unset = setup.environment
        unset["PUSHPROV_JWT_TYPE"] = nil
        let open = TMPServer.makeAuthenticator(configuration: try Self.productionSettings().resolve(environment: unset)).cardholderTokens
        #expect(open.userId(from: untyped, now: now) == .success("alice"))
        settings.cardholderType = "at jwt"
        let spaced = #expect(throws: ConfigurationError.self) { try settings.resolve(environment: setup.environment) }
        #expect(spaced?.message.hasPrefix("JWT type must be a media type") == true)
    }

    @Test func anEmbeddedRunSetUpLikeMoreThanDevelopmentSaysSo() throws {
        let setup = try Self.production()
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        var settings = ServerSettings()
        settings.dataDirectory = setup.directory.appendingPathComponent("data").path
        func warnings(_ settings: ServerSettings, _ environment: [String: String]) throws -> [String] {
            try settings.resolve(environment: environment).notices.filter { $0.hasPrefix("warning:") }
        }
        // The identity provider's keys without iss and aud checks: named, with both claims.
        let unchecked = try warnings(settings, setup.environment)
        #expect(unchecked.count == 1)
        #expect(unchecked.first?.contains("(PUSHPROV_JWKS) are accepted without checking their iss or aud") == true)
        settings.cardholderIssuer = "https://id.example"
        #expect(try warnings(settings, setup.environment).first?.contains("without checking their aud,") == true)
        settings.cardholderAudience = "pushprov-tmp"
        #expect(try warnings(settings, setup.environment).isEmpty)
        // Without PUSHPROV_JWKS only the development key is trusted: nothing to say on loopback.
        var developmentOnly = setup.environment
        developmentOnly["PUSHPROV_JWKS"] = nil
        settings.cardholderIssuer = nil
        settings.cardholderAudience = nil
        for host in ["127.0.0.1", "localhost", "::1", "127.0.0.2"] {
            settings.host = host
            #expect(try warnings(settings, developmentOnly).isEmpty, "\(host)")
        }
        for host in ["0.0.0.0", "::", "10.1.2.3", "tmp.example"] {
            settings.host = host
            let reachable = try warnings(settings, developmentOnly)
            #expect(reachable.count == 1, "\(host)")
            #expect(reachable.first?.hasPrefix("warning: embedded mode on \(host) is reachable from other machines") == true)
        }
    }

    @Test func aJWKSThatMixesInKeysOfOtherTypesKeepsItsP256Keys() throws {
        let mixed = """
            {"keys":[{"kty":"RSA","kid":"rsa-1","use":"sig","alg":"RS256","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"},$EC,{"kty":"EC","crv":"P-384","kid":"p384"},"not a key"]}
            """
        let setup = try Self.production(["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "pushprov-tmp"], jwks: mixed)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let configuration = try Self.productionSettings().resolve(environment: setup.environment)
        #expect(Array(configuration.cardholderKeys.p256KeysByID.keys) == [setup.key.id])
    }

    @Test(arguments: [
        ("[1, 2, 3]", "is not a JSON Web Key Set"),
        ("{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"rsa-1\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}", "holds no EC P-256 signing key with a kid (keys of other types or for encryption are skipped)"),
    ])
    func aJWKSWithoutAUsableKeyIsOneClearLine(jwks: String, message: String) throws {
        let setup = try Self.production(["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "pushprov-tmp"], jwks: jwks)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let error = #expect(throws: ConfigurationError.self) { try Self.productionSettings().resolve(environment: setup.environment) }
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }

    static let withIssuerAndAudience = ["PUSHPROV_JWT_ISSUER": "https://id.example", "PUSHPROV_JWT_AUDIENCE": "pushprov-tmp"]

    @Test func productionNeedsADatabaseNamed() throws {
        let setup = try Self.production(Self.withIssuerAndAudience)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        var environment = setup.environment
        environment["PUSHPROV_DATABASE"] = nil
        let error = #expect(throws: ConfigurationError.self) { try Self.productionSettings().resolve(environment: environment) }
        #expect(error?.message == "--production needs --database / PUSHPROV_DATABASE (a postgres:// URL, or the SQLite file this one instance owns); it creates no database of its own")
        environment["PUSHPROV_DATABASE"] = ""
        #expect(throws: ConfigurationError.self) { try Self.productionSettings().resolve(environment: environment) }
        var settings = Self.productionSettings()
        settings.database = setup.directory.appendingPathComponent("named.sqlite").path
        #expect(try settings.resolve(environment: environment).database.description.hasSuffix("named.sqlite"))
    }

    @Test(arguments: [
        ("short-key-0123456789", "PUSHPROV_ISSUER_API_KEY must be at least 32 characters before any = padding in production (got 20); `openssl rand -base64 32` makes one"),
        // 32 characters with the padding, 28 without: padding carries no secret.
        ("short-key-0123456789abcdefgh====", "PUSHPROV_ISSUER_API_KEY must be at least 32 characters before any = padding in production (got 28); `openssl rand -base64 32` makes one"),
        ("issuer-key-0123456789abcdefghijklmnopqrstuv ", "PUSHPROV_ISSUER_API_KEY must be letters, digits and - . _ ~ + / (then = padding), with no spaces"),
        ("issuer key 0123456789abcdefghijklmnopqrstuv", "PUSHPROV_ISSUER_API_KEY must be letters, digits and - . _ ~ + / (then = padding), with no spaces"),
        ("=issuer-key-0123456789abcdefghijklmnopqrstuv", "PUSHPROV_ISSUER_API_KEY must be letters, digits and - . _ ~ + / (then = padding), with no spaces"),
        (tspKey, "PUSHPROV_ISSUER_API_KEY and PUSHPROV_TSP_API_KEY must differ: with one key the token service could call the Lifecycle API"),
        // Padding carries no secret: the TSP key with an `=` more is the TSP key.
        (tspKey + "=", "PUSHPROV_ISSUER_API_KEY and PUSHPROV_TSP_API_KEY must differ: with one key the token service could call the Lifecycle API"),
    ])
    func productionRefusesWeakOrSharedAPIKeys(issuerKey: String, message: String) throws {
        let setup = try Self.production(Self.withIssuerAndAudience.merging(["PUSHPROV_ISSUER_API_KEY": issuerKey]) { $1 })
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let error = #expect(throws: ConfigurationError.self) { try Self.productionSettings().resolve(environment: setup.environment) }
        #expect(error?.message == message)
    }

    @Test func productionTakesAStrongKeyWithPadding() throws {
        let setup = try Self.production(Self.withIssuerAndAudience.merging(["PUSHPROV_ISSUER_API_KEY": "aXNzdWVyLWtleS0wMTIzNDU2Nzg5YWJjZGVmZ2hpams="]) { $1 })
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        #expect(try Self.productionSettings().resolve(environment: setup.environment).issuerAPIKey == "aXNzdWVyLWtleS0wMTIzNDU2Nzg5YWJjZGVmZ2hpams=")
    }

    @Test func anEmbeddedRunRefusesOneKeyForBothAPIs() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerSettings()
        settings.dataDirectory = directory.path
        let error = #expect(throws: ConfigurationError.self) {
            try settings.resolve(environment: ["PUSHPROV_ISSUER_API_KEY": "same-key", "PUSHPROV_TSP_API_KEY": "same-key"])
        }
        #expect(error?.message == "PUSHPROV_ISSUER_API_KEY and PUSHPROV_TSP_API_KEY must differ: with one key the token service could call the Lifecycle API")
        // Short keys stay fine for an embedded run.
        #expect(try settings.resolve(environment: ["PUSHPROV_ISSUER_API_KEY": "issuer", "PUSHPROV_TSP_API_KEY": "tsp"]).tspAPIKey == "tsp")
    }

    @Test func trustAnchorFlagsReplaceTheEnvironmentsList() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-anchors-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var settings = ServerSettings()
        settings.dataDirectory = directory.path
        let environment = ["PUSHPROV_TRUST_ANCHORS": directory.appendingPathComponent("no-such-root.pem").path]
        #expect(throws: ConfigurationError.self) { try settings.resolve(environment: environment) }
        let root = try #require(Self.repositoryCertificate("apple-root-ca-g3.pem"))
        settings.trustAnchorFiles = [root]
        // The environment's missing file is not read once a flag names the anchors.
        #expect(throws: Never.self) { try settings.resolve(environment: environment) }
    }

    static func repositoryCertificate(_ name: String) -> String? {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("ProvisioningCryptoTests/Resources/certs/\(name)").path
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    @Test func aJWKSWithOnlyAnEncryptionKeyOrARepeatedKeyIDIsRefused() throws {
        let setup = try Self.production(Self.withIssuerAndAudience, jwks: #"{"keys":[$EC]}"#)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let jwksFile = try #require(setup.environment["PUSHPROV_JWKS"])
        let key = String(decoding: try Data(contentsOf: URL(fileURLWithPath: jwksFile)), as: UTF8.self)
        let single = String(key.dropFirst(#"{"keys":["#.count).dropLast(2))
        try Data(#"{"keys":[\#(single.replacingOccurrences(of: "\"use\":\"sig\"", with: "\"use\":\"enc\""))]}"#.utf8).write(to: URL(fileURLWithPath: jwksFile))
        let encryption = #expect(throws: ConfigurationError.self) { try Self.productionSettings().resolve(environment: setup.environment) }
        #expect(encryption?.message == "JWKS file \(jwksFile) holds no EC P-256 signing key with a kid (keys of other types or for encryption are skipped)")
        let other = String(decoding: try JSONEncoder().encode(JSONWebKey(publicKey: SigningKey.generate().privateKey.publicKey, keyID: setup.key.id)), as: UTF8.self)
        try Data(#"{"keys":[\#(single),\#(other)]}"#.utf8).write(to: URL(fileURLWithPath: jwksFile))
        let repeated = #expect(throws: ConfigurationError.self) { try Self.productionSettings().resolve(environment: setup.environment) }
        #expect(repeated?.message == "JWKS file \(jwksFile) has more than one P-256 key with kid \(setup.key.id); each key needs its own kid")
    }

    @Test func productionReachesARemotePostgreSQLOnlyOverRequiredTLS() throws {
        let setup = try Self.production(Self.withIssuerAndAudience)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        for (url, refused) in [
            ("postgres://tmp:pw@db.internal/pushprov", true),
            ("postgres://tmp:pw@db.internal/pushprov?sslmode=disable", true),
            ("postgres://tmp:pw@db.internal/pushprov?sslmode=require", false),
            ("postgres://tmp:pw@db.internal/pushprov?sslmode=verify-full", false),
            ("postgres://tmp:pw@db.internal/pushprov?sslmode=verify-ca&sslrootcert=/etc/ssl/rds.pem", false),
            ("postgres://tmp:pw@db.internal/pushprov?sslmode=prefer", true),
            ("postgres://tmp:pw@127.0.0.1/pushprov?sslmode=disable", false),
            ("postgres://tmp:pw@localhost/pushprov", false),
            ("postgres://tmp:pw@127.0.0.1.example/pushprov", true),
        ] {
            var settings = Self.productionSettings()
            settings.database = url
            if refused {
                let error = #expect(throws: ConfigurationError.self, "\(url)") { try settings.resolve(environment: setup.environment) }
                #expect(error?.message.hasPrefix("--production needs sslmode=require (or verify-full, verify-ca) to reach PostgreSQL on ") == true, "\(error?.message ?? "")")
                #expect(error?.message.contains("pw") == false)
            } else {
                #expect(throws: Never.self, "\(url)") { try settings.resolve(environment: setup.environment) }
            }
        }
    }

    @Test func aJWKSFileOthersCanWriteIsRefused() throws {
        let setup = try Self.production(Self.withIssuerAndAudience)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let jwks = try #require(setup.environment["PUSHPROV_JWKS"])
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: jwks)
        let error = #expect(throws: ConfigurationError.self) { try Self.productionSettings().resolve(environment: setup.environment) }
        #expect(error?.message == "JWKS file \(jwks) can be written by group or others (mode 666); whoever can write it can sign in as any cardholder: chmod go-w \(jwks)")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: jwks)
        #expect(throws: Never.self) { try Self.productionSettings().resolve(environment: setup.environment) }
    }

    @Test func aJWKSFileReachedThroughASymbolicLinkIsJudgedByTheFileItself() throws {
        // As a Kubernetes ConfigMap mount gives it: the link's own mode is 777 on Linux.
        let setup = try Self.production(Self.withIssuerAndAudience)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let jwks = try #require(setup.environment["PUSHPROV_JWKS"])
        let link = setup.directory.appendingPathComponent("jwks-link.json").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: jwks)
        var environment = setup.environment
        environment["PUSHPROV_JWKS"] = link
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: jwks)
        #expect(throws: Never.self) { try Self.productionSettings().resolve(environment: environment) }
        try FileManager.default.setAttributes([.posixPermissions: 0o664], ofItemAtPath: jwks)
        let error = #expect(throws: ConfigurationError.self) { try Self.productionSettings().resolve(environment: environment) }
        #expect(error?.message.hasPrefix("JWKS file \(link) can be written by group or others (mode 664)") == true, "\(error?.message ?? "")")
    }
}
