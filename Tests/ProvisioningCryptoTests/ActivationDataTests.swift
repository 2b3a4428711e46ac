import Crypto
import Foundation
import ProvisioningCrypto
import ProvisioningModels
import Testing

@Suite("Activation data")
struct ActivationDataTests {
    let key = SigningKey.generate()
    let nonce = Data((0..<32).map { UInt8($0) })
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    var issuer: ActivationDataIssuer { ActivationDataIssuer(signingKey: key) }
    var verifier: ActivationDataVerifier { ActivationDataVerifier(keys: [key.id: key.privateKey.publicKey]) }

    func issue(at time: Date? = nil, device: DeviceType = .phone) throws -> String {
        try issuer.issue(panUniqueReference: "pur-1", nonce: nonce, deviceType: device, now: time ?? now, id: "jti-1").token
    }

    func refusalCode(_ token: String, card: String = "pur-1", nonce: Data? = nil, at time: Date? = nil) -> ActivationDataRefusal.Code? {
        verifier.verify(token, panUniqueReference: card, nonce: nonce ?? self.nonce, now: time ?? now).refusal?.code
    }

    @Test func issuedDataVerifiesAndCarriesItsClaims() throws {
        let token = try issue()
        let claims = try #require(verifier.verify(token, panUniqueReference: "pur-1", nonce: nonce, now: now.addingTimeInterval(599)).claims)
        #expect(claims.panUniqueReference == "pur-1")
        #expect(claims.requestedDeviceType == .phone)
        #expect(claims.id == "jti-1")
        #expect(claims.expiresAt.timeIntervalSince(claims.issuedAt) == 600)
        #expect(claims.nh == Data(SHA256.hash(data: nonce)).base64URLEncodedString)
    }

    @Test func isACompactES256JWSWithTheKeyID() throws {
        let parts = try CompactJWS.parse(try issue())
        #expect(parts.header.alg == "ES256")
        #expect(parts.header.kid == key.id)
        #expect(parts.header.typ == "pushprov-activation+jws")
        #expect(parts.signature.count == 64)
    }

    @Test func headerAndClaimsAreWhatJSONEncoderWritesWithSortedKeys() throws {
        let (token, claims) = try issuer.issue(panUniqueReference: "pur/with+chars", nonce: nonce, deviceType: .watch, now: now, id: "jti-\"x\"")
        let parts = try CompactJWS.parse(token)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        #expect(parts.payload == (try encoder.encode(claims)))
        let segments = token.split(separator: ".")
        #expect(Data(base64URLEncoded: segments[0]) == (try encoder.encode(CompactJWS.Header(kid: key.id, typ: ActivationDataIssuer.type))))
        #expect(try JSONDecoder().decode(ActivationDataClaims.self, from: parts.payload) == claims)
    }

    @Test func aValidlySignedTokenWithACriticalHeaderIsRefused() throws {
        let token = try issue()
        let segments = token.split(separator: ".").map(String.init)
        let header = #"{"alg":"ES256","crit":["exp"],"kid":"\#(key.id)","typ":"pushprov-activation+jws"}"#
        let signingInput = Data(header.utf8).base64URLEncodedString + "." + segments[1]
        let signature = CompactJWS.lowS(try key.privateKey.signature(for: Data(signingInput.utf8)).rawRepresentation).base64URLEncodedString
        let critical = signingInput + "." + signature
        #expect(throws: CompactJWS.ParseError.malformed) { try CompactJWS.parse(critical) }
        #expect(refusalCode(critical) == .malformed)
        // The same header without crit, signed the same way, is read.
        let plain = Data(#"{"alg":"ES256","kid":"\#(key.id)","typ":"pushprov-activation+jws"}"#.utf8).base64URLEncodedString + "." + segments[1]
        let accepted = plain + "." + CompactJWS.lowS(try key.privateKey.signature(for: Data(plain.utf8)).rawRepresentation).base64URLEncodedString
        #expect(refusalCode(accepted) == nil)
    }

    @Test func neverContainsThePAN() throws {
        let token = try issuer.issue(panUniqueReference: "pur-xyz", nonce: nonce, deviceType: .watch, now: now).token
        let payload = try CompactJWS.parse(token).payload
        #expect(!String(decoding: payload, as: UTF8.self).contains("4111"))
        let keys = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any]).keys.sorted()
        #expect(keys == ["dev", "exp", "iat", "jti", "nh", "pur"])
    }

    @Test func refusesABadSignature() throws {
        let impostor = SigningKey(id: key.id, privateKey: P256.Signing.PrivateKey())
        let token = try ActivationDataIssuer(signingKey: impostor).issue(panUniqueReference: "pur-1", nonce: nonce, deviceType: .phone, now: now).token
        #expect(refusalCode(token) == .badSignature)
    }

    @Test func refusesAnAlteredPayload() throws {
        let token = try issue()
        let segments = token.split(separator: ".").map(String.init)
        var claims = try JSONSerialization.jsonObject(with: Data(base64URLEncoded: segments[1])!) as! [String: Any]
        claims["pur"] = "pur-2"
        let altered = segments[0] + "." + (try JSONSerialization.data(withJSONObject: claims)).base64URLEncodedString + "." + segments[2]
        #expect(refusalCode(altered, card: "pur-2") == .badSignature)
    }

    @Test func refusesExpiredData() throws {
        #expect(refusalCode(try issue(), at: now.addingTimeInterval(600)) == .expired)
    }

    @Test func refusesDataIssuedInTheFuture() throws {
        #expect(refusalCode(try issue(at: now.addingTimeInterval(120))) == .notYetValid)
        #expect(refusalCode(try issue(at: now.addingTimeInterval(20))) == nil)
    }

    @Test func refusesTheWrongNonce() throws {
        #expect(refusalCode(try issue(), nonce: Data("another".utf8)) == .wrongNonce)
    }

    @Test func refusesTheWrongCard() throws {
        #expect(refusalCode(try issue(), card: "pur-2") == .wrongCard)
    }

    @Test func withoutACardReferenceChecksEverythingElseAndReturnsTheBoundCard() throws {
        let claims = try #require(verifier.verify(try issue(), panUniqueReference: nil, nonce: nonce, now: now).claims)
        #expect(claims.panUniqueReference == "pur-1")
        #expect(verifier.verify(try issue(), panUniqueReference: nil, nonce: Data("another".utf8), now: now).refusal?.code == .wrongNonce)
        #expect(verifier.verify(try issue(), panUniqueReference: nil, now: now.addingTimeInterval(600)).refusal?.code == .expired)
    }

    @Test func theRequestedDeviceIsNotedButNotBinding() throws {
        // Wallet's sheet may add the card to another device than the one the app asked for, so
        // the verifier takes no device and has no device refusal; the signed claims still name
        // the device asked for.
        let token = try issue(device: .watch)
        let claims = try #require(verifier.verify(token, panUniqueReference: "pur-1", nonce: nonce, now: now).claims)
        #expect(claims.requestedDeviceType == .watch)
        #expect(try CompactJWS.parse(token).payload.contains(Data(#""dev":"WATCH""#.utf8)))
        #expect(ActivationDataRefusal.Code.allCases.map(\.rawValue).allSatisfy { !$0.contains("device") })
    }

    @Test func refusesAnUnknownKeyID() throws {
        let other = SigningKey.generate()
        let token = try ActivationDataIssuer(signingKey: other).issue(panUniqueReference: "pur-1", nonce: nonce, deviceType: .phone, now: now).token
        let refusal = try #require(verifier.verify(token, panUniqueReference: "pur-1", now: now).refusal)
        #expect(refusal.code == .unknownKeyID)
        #expect(refusal.message.contains(other.id))
    }

    @Test func refusesALifetimeOverTenMinutes() throws {
        let claims = ActivationDataClaims(pur: "pur-1", nh: ActivationDataVerifier.nonceHash(nonce), dev: .phone, iat: 1_800_000_000, exp: 1_800_000_601, jti: "x")
        let token = try CompactJWS.sign(payload: JSONEncoder().encode(claims), key: key.privateKey, keyID: key.id, type: ActivationDataIssuer.type)
        #expect(refusalCode(token) == .lifetimeTooLong)
    }

    @Test(arguments: [(Int64.min, Int64.max), (Int64.max, Int64.min), (-1, Int64.max), (1_800_000_000, 1_800_000_000)] as [(Int64, Int64)])
    func refusesTimesWhoseDifferenceOverflowsOrIsNotPositive(iat: Int64, exp: Int64) throws {
        let claims = ActivationDataClaims(pur: "pur-1", nh: ActivationDataVerifier.nonceHash(nonce), dev: .phone, iat: iat, exp: exp, jti: "x")
        let token = try CompactJWS.sign(payload: JSONEncoder().encode(claims), key: key.privateKey, keyID: key.id, type: ActivationDataIssuer.type)
        #expect(refusalCode(token) == .lifetimeTooLong)
    }

    @Test(arguments: ["", "a.b", "a.b.c.d", "!!!.???.***", String(repeating: "A", count: 9000)])
    func refusesMalformedData(_ token: String) {
        #expect(refusalCode(token) == .malformed)
    }

    @Test func refusesAnotherAlgorithmOrType() throws {
        // Valid claims of a valid token, each variant differing from it in one header field.
        let valid = try ActivationDataIssuer(signingKey: key).issue(panUniqueReference: "pur-1", nonce: nonce, deviceType: .phone, now: now).token
        #expect(verifier.verify(valid, panUniqueReference: "pur-1", nonce: nonce, now: now).claims != nil)
        let payload = try CompactJWS.parse(valid).payload
        let header = #"{"alg":"HS256","kid":"\#(key.id)","typ":"\#(ActivationDataIssuer.type)"}"#
        let hs256 = Data(header.utf8).base64URLEncodedString + "." + payload.base64URLEncodedString + "." + Data(repeating: 7, count: 32).base64URLEncodedString
        let algorithm = try #require(verifier.verify(hs256, panUniqueReference: "pur-1", nonce: nonce, now: now).refusal)
        #expect(algorithm.code == .malformed)
        #expect(algorithm.message == "activation data must be signed with ES256, not HS256")
        let jwt = try CompactJWS.sign(payload: payload, key: key.privateKey, keyID: key.id, type: "JWT")
        let type = try #require(verifier.verify(jwt, panUniqueReference: "pur-1", nonce: nonce, now: now).refusal)
        #expect(type.code == .malformed)
        #expect(type.message == "activation data has type JWT, expected \(ActivationDataIssuer.type)")
    }

    @Test func verifiesWithEveryPublishedKeyDuringRotation() throws {
        let newKey = SigningKey.generate()
        let keySet = JSONWebKeySet(keys: [newKey.publicJWK, key.publicJWK])
        let rotatingVerifier = ActivationDataVerifier(keySet: keySet)
        for signer in [key, newKey] {
            let token = try ActivationDataIssuer(signingKey: signer).issue(panUniqueReference: "pur-1", nonce: nonce, deviceType: .phone, now: now).token
            #expect(rotatingVerifier.verify(token, panUniqueReference: "pur-1", now: now).claims != nil)
        }
    }

    /// The other signature of the same (r, s): (r, n − s).
    static func twin(_ raw: Data) -> Data {
        let order: [UInt8] = [
            0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
            0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
        ]
        var bytes = Array(raw)
        var borrow = 0
        for index in (0..<32).reversed() {
            let value = Int(order[index]) - Int(bytes[32 + index]) - borrow
            borrow = value < 0 ? 1 : 0
            bytes[32 + index] = UInt8((value + 256) % 256)
        }
        return Data(bytes)
    }

    @Test func activationDataHasOneValidTextThatOfItsLowSSignature() throws {
        for _ in 0..<32 {
            let token = try ActivationDataIssuer(signingKey: key).issue(panUniqueReference: "pur-1", nonce: nonce, deviceType: .phone, now: now).token
            let parts = try CompactJWS.parse(token)
            // TMP signs in the low form (half of BoringSSL's signatures are in the high one).
            #expect(CompactJWS.hasLowS(parts.signature))
            #expect(verifier.verify(token, panUniqueReference: "pur-1", nonce: nonce, now: now).claims != nil)
            // The twin is a valid ECDSA signature of the same data, and is refused.
            let twin = String(token[..<token.lastIndex(of: ".")!]) + "." + Self.twin(parts.signature).base64URLEncodedString
            let twinParts = try CompactJWS.parse(twin)
            #expect(!CompactJWS.hasLowS(twinParts.signature))
            #expect(CompactJWS.isValidSignature(twinParts, key: key.privateKey.publicKey))
            #expect(verifier.verify(twin, panUniqueReference: "pur-1", nonce: nonce, now: now).refusal?.code == .badSignature)
        }
    }

    @Test func lowSIsAtMostHalfTheGroupOrder() {
        let r = [UInt8](repeating: 1, count: 32)
        // ⌊n/2⌋ and ⌊n/2⌋ + 1.
        let half: [UInt8] = [
            0x7F, 0xFF, 0xFF, 0xFF, 0x80, 0x00, 0x00, 0x00, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
            0xDE, 0x73, 0x7D, 0x56, 0xD3, 0x8B, 0xCF, 0x42, 0x79, 0xDC, 0xE5, 0x61, 0x7E, 0x31, 0x92, 0xA8,
        ]
        var above = half
        above[31] += 1
        #expect(CompactJWS.hasLowS(r + half))
        #expect(!CompactJWS.hasLowS(r + above))
        #expect(CompactJWS.hasLowS(r + [UInt8](repeating: 0, count: 31) + [1]))
        #expect(!CompactJWS.hasLowS(r + [UInt8](repeating: 0xFF, count: 32)))
        #expect(!CompactJWS.hasLowS(r))
    }

    @Test func aKeyIdGivenToTwoDifferentKeysNamesNeither() throws {
        let twin = SigningKey(id: key.id, privateKey: P256.Signing.PrivateKey())
        let other = SigningKey.generate()
        for order in [[key, twin, other], [twin, key, other]] {
            let keySet = JSONWebKeySet(keys: order.map(\.publicJWK))
            #expect(keySet.repeatedP256KeyIDs == [key.id])
            #expect(keySet.p256KeysByID.keys.sorted() == [other.id])
            let verifier = ActivationDataVerifier(keySet: keySet)
            for signer in [key, twin] {
                let token = try ActivationDataIssuer(signingKey: signer).issue(panUniqueReference: "pur-1", nonce: nonce, deviceType: .phone, now: now).token
                #expect(verifier.verify(token, panUniqueReference: "pur-1", now: now).refusal?.code == .unknownKeyID)
            }
        }
        // The same key listed twice is no ambiguity.
        #expect(JSONWebKeySet(keys: [key.publicJWK, key.publicJWK]).p256KeysByID.keys.sorted() == [key.id])
    }

    @Test func jwkRoundTripsThePublicKey() throws {
        let jwk = key.publicJWK
        #expect(jwk.kty == "EC" && jwk.crv == "P-256" && jwk.alg == "ES256" && jwk.kid == key.id)
        let decoded = try JSONDecoder().decode(JSONWebKey.self, from: JSONEncoder().encode(jwk))
        #expect(decoded.p256PublicKey?.rawRepresentation == key.privateKey.publicKey.rawRepresentation)
        var broken = jwk
        broken.x = "AAAA"
        #expect(broken.p256PublicKey == nil)
    }
}
