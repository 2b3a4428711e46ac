import Crypto
import Foundation
import HTTPTypes
import ProvisioningCrypto
import Testing
@testable import TokenPlatform

@Suite("Authorization matrix")
struct AuthorizationMatrixTests {
    enum Presented: String, CaseIterable, Sendable {
        case nothing, alice, bob, issuerKey, tspKey, expiredJWT, wrongSignatureJWT, garbage
        // Near misses: forged or mistyped credentials, each refused like no credential.
        case unknownKeyIdJWT, noKeyIdJWT, algNoneJWT, hs256WithThePublicKeyJWT, notYetValidJWT, twoSubjectsJWT
        case issuerKeyTruncated, issuerKeyExtended, issuerKeyAsBasic, tspKeyTruncated, bothAPIKeys
    }

    /// A token from the exact JSON texts given, with `signature` over them (none: empty).
    static func token(header: String, payload: String, signature: (Data) throws -> Data = { _ in Data() }) rethrows -> String {
        let signingInput = Data(header.utf8).base64URLEncodedString + "." + Data(payload.utf8).base64URLEncodedString
        return signingInput + "." + (try signature(Data(signingInput.utf8))).base64URLEncodedString
    }

    /// The raw `Authorization` value for each near miss.
    static func nearMisses(_ platform: TestPlatform) throws -> [Presented: String] {
        let key = platform.cardholderKey
        let now = Int(platform.clock.current.timeIntervalSince1970)
        let claims = #"{"sub":"alice","iat":\#(now),"exp":\#(now + 600)}"#
        let header = #"{"alg":"ES256","kid":"\#(key.id)","typ":"JWT"}"#
        let es256 = { (input: Data) in try key.privateKey.signature(for: input).rawRepresentation }
        return [
            .unknownKeyIdJWT: platform.jwt("alice", key: SigningKey(id: "not-\(key.id)", privateKey: .init())),
            .noKeyIdJWT: try token(header: #"{"alg":"ES256","typ":"JWT"}"#, payload: claims, signature: es256),
            .algNoneJWT: try token(header: #"{"alg":"none","kid":"\#(key.id)","typ":"JWT"}"#, payload: claims),
            .hs256WithThePublicKeyJWT: token(header: #"{"alg":"HS256","kid":"\#(key.id)","typ":"JWT"}"#, payload: claims) {
                Data(HMAC<SHA256>.authenticationCode(for: $0, using: SymmetricKey(data: key.privateKey.publicKey.x963Representation)))
            },
            .notYetValidJWT: try token(header: header, payload: #"{"sub":"alice","nbf":\#(now + 3600),"exp":\#(now + 7200)}"#, signature: es256),
            .twoSubjectsJWT: try token(header: header, payload: #"{"sub":"mallory","sub":"alice","exp":\#(now + 600)}"#, signature: es256),
        ].mapValues { "Bearer \($0)" }.merging([
            .issuerKeyTruncated: "Bearer \(TestPlatform.issuerKey.dropLast())",
            .issuerKeyExtended: "Bearer \(TestPlatform.issuerKey)x",
            .issuerKeyAsBasic: "Basic \(TestPlatform.issuerKey)",
            .tspKeyTruncated: "Bearer \(TestPlatform.tspKey.dropLast())",
            .bothAPIKeys: "Bearer \(TestPlatform.issuerKey), Bearer \(TestPlatform.tspKey)",
        ]) { $1 }
    }

    /// Every route with a concrete path and the credentials that may call it.
    static let routes: [(RouteSpec, String)] = RouteTable.all.map { spec in
        let path = spec.path
            .replacingOccurrences(of: "{externalCardId}", with: "c1")
            .replacingOccurrences(of: "{tokenUniqueReference}", with: "T1")
            .replacingOccurrences(of: "{artId}", with: "art-1")
        return (spec, path)
    }

    static func accepted(_ presented: Presented, by auth: AuthRequirement) -> Bool {
        switch auth {
        // (The test platform configures no metrics key: `/metrics` answers anyone.)
        case .none, .metrics: true
        case .cardholder: presented == .alice || presented == .bob
        case .issuer: presented == .issuerKey
        case .tsp: presented == .tspKey
        }
    }

    @Test func everyRouteAcceptsExactlyItsOwnCredential() async throws {
        let platform = try await TestPlatform()
        let expired = platform.jwt("alice", lifetime: -120)
        let forged = platform.jwt("alice", key: SigningKey(id: platform.cardholderKey.id, privateKey: .init()))
        let nearMisses = try Self.nearMisses(platform)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            var checked = 0
            for (spec, path) in Self.routes {
                for presented in Presented.allCases {
                    let credential: Credential = switch presented {
                    case .nothing: .none
                    case .alice: .cardholder("alice")
                    case .bob: .cardholder("bob")
                    case .issuerKey: .issuer
                    case .tspKey: .tsp
                    case .expiredJWT: .raw("Bearer \(expired)")
                    case .wrongSignatureJWT: .raw("Bearer \(forged)")
                    case .garbage: .raw("Basic YWxpY2U6c2VjcmV0")
                    default: .raw(nearMisses[presented]!)
                    }
                    let body: Data? = [.post, .put, .patch].contains(spec.method) ? Data("{}".utf8) : nil
                    let reply = try await api.send(spec.method, path, as: credential, raw: body)
                    if Self.accepted(presented, by: spec.auth) {
                        #expect(reply.status != .unauthorized, "\(spec) with \(presented.rawValue)")
                    } else {
                        #expect(reply.status == .unauthorized, "\(spec) with \(presented.rawValue): \(reply.status)")
                        #expect(reply.error == .init(code: "unauthorized", message: "missing or invalid credentials"), "\(spec)")
                        #expect(reply.headers[.wwwAuthenticate] == "Bearer")
                    }
                    checked += 1
                }
            }
            #expect(checked == RouteTable.all.count * Presented.allCases.count)
            // Nothing was changed by any request (the refused ones, and the accepted ones whose
            // empty bodies are invalid): the card as put, one audit entry, no token, no art.
            #expect(try await platform.store.card(externalCardId: "c1")?.status == .active)
            #expect(try await platform.store.auditEntries(subject: "card:c1").map(\.action) == ["card.create"])
            #expect(try await platform.store.tokens(externalCardId: "c1").isEmpty)
            #expect(try await platform.store.token(reference: "T1") == nil)
            #expect(try await platform.store.cardArt(id: "art-1") == nil)
        }
    }

    @Test func everyRefusalIsLoggedWithWhatWasExpectedAndWhyButNeverTheCredential() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let refusals: [(String, String, Credential, String, String)] = [
                ("GET", "/lifecycle/cards/c1", .raw("Bearer not-the-issuer-key-0123456789"), "issuer", "wrong_key"),
                ("POST", "/tsp/token-events", .none, "tsp", "missing"),
                ("GET", "/issuer/push-provisioning/cards", .raw("Basic YWxpY2U6c2VjcmV0"), "cardholder", "not_bearer"),
                ("GET", "/issuer/push-provisioning/cards", .raw("Bearer eyJub3QiOiJhIEpXVCJ9"), "cardholder", "malformed"),
            ]
            for (method, path, credential, expected, reason) in refusals {
                let before = platform.logs.current.count
                let reply = try await api.send(method == "GET" ? .get : .post, path, as: credential, raw: method == "GET" ? nil : Data("{}".utf8))
                #expect(reply.status == .unauthorized)
                let lines = platform.logs.current.dropFirst(before).filter { $0.contains("credential refused") }
                #expect(lines.count == 1, "\(path): \(lines)")
                #expect(lines.contains { $0.contains("\"expected\": \(expected)") && $0.contains("\"reason\": \(reason)") }, "\(path): \(lines)")
            }
            #expect(!platform.logs.current.contains { $0.contains("not-the-issuer-key") || $0.contains("YWxpY2U6c2VjcmV0") || $0.contains("eyJub3QiOiJhIEpXVCJ9") })
            // A burst of the same refusal writes at most one line a second (the rest are counted
            // into the next one): bounded by the burst's duration, not its 20 requests.
            let started = ContinuousClock.now
            for _ in 0..<20 { _ = try await api.send(.get, "/lifecycle/cards/c1", as: .raw("Bearer not-the-issuer-key-0123456789")) }
            let seconds = Int((ContinuousClock.now - started).components.seconds)
            let lines = platform.logs.current.filter { $0.contains("credential refused") && $0.contains("wrong_key") }.count
            #expect(lines <= 2 + seconds, "\(lines) lines in \(seconds) s")
        }
    }

    @Test func refusalLinesAreThrottledPerKindAndCountWhatTheyHeldBack() {
        let throttle = KeyedWarningThrottle(interval: .seconds(1))
        let start = ContinuousClock.now
        #expect(throttle.admit("issuer wrong_key", now: start) == 0)
        #expect(throttle.admit("issuer wrong_key", now: start + .milliseconds(10)) == nil)
        #expect(throttle.admit("issuer wrong_key", now: start + .milliseconds(20)) == nil)
        // Another kind has its own allowance.
        #expect(throttle.admit("tsp missing", now: start + .milliseconds(30)) == 0)
        #expect(throttle.admit("issuer wrong_key", now: start + .seconds(1)) == 2)
    }

    @Test func aJWTWithoutExpiryOrSubjectIsRefused() async throws {
        let platform = try await TestPlatform()
        let key = platform.cardholderKey
        let noExp = try CompactJWS.sign(payload: Data(#"{"sub":"alice"}"#.utf8), key: key.privateKey, keyID: key.id, type: "JWT")
        let noSub = try CompactJWS.sign(payload: Data(#"{"exp":9999999999}"#.utf8), key: key.privateKey, keyID: key.id, type: "JWT")
        let both = try CompactJWS.sign(payload: Data(#"{"sub":"alice","exp":9999999999}"#.utf8), key: key.privateKey, keyID: key.id, type: "JWT")
        try await platform.run { api in
            for (token, reason) in [(noExp, "missing_expiry"), (noSub, "missing_subject")] {
                let before = platform.logs.current.count
                let reply = try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer \(token)"))
                #expect(reply.status == .unauthorized)
                let lines = platform.logs.current.dropFirst(before).filter { $0.contains("credential refused") }
                #expect(lines.contains { $0.contains("\"reason\": \(reason)") }, "\(reason): \(lines)")
            }
            // The same token with both claims, signed the same way, is accepted.
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer \(both)")).status == .ok)
        }
    }

    @Test func aTokenAcceptedOnceIsStillRefusedAfterItExpires() async throws {
        let platform = try await TestPlatform()
        let token = platform.jwt("alice", lifetime: 300)
        try await platform.run { api in
            let first = try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer " + token))
            let second = try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer " + token))
            platform.advance(300 + 61)
            let expired = try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer " + token))
            #expect(first.status == .ok)
            #expect(second.status == .ok)
            #expect(expired.status == .unauthorized)
        }
    }

    @Test func clockSkewIsToleratedOnlyWithinItsBound() async throws {
        let platform = try await TestPlatform()
        let justExpired = platform.jwt("alice", lifetime: -30)
        let longExpired = platform.jwt("alice", lifetime: -90)
        try await platform.run { api in
            let withinSkew = try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer " + justExpired))
            let beyondSkew = try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer " + longExpired))
            #expect(withinSkew.status == .ok)
            #expect(beyondSkew.status == .unauthorized)
        }
    }

    @Test func schemeIsCaseInsensitiveAndWhiteSpaceAroundTheCredentialIsAllowedButNotACredentialOfWhiteSpace() async throws {
        let platform = try await TestPlatform()
        let token = platform.jwt("alice")
        try await platform.run { api in
            let padded = try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer  \t" + token + " \t"))
            let blank = try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer  \t "))
            let lowercaseScheme = try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("bearer " + token))
            #expect(padded.status == .ok)
            #expect(blank.status == .unauthorized)
            #expect(lowercaseScheme.status == .ok, "the scheme name is case-insensitive")
        }
    }
}
