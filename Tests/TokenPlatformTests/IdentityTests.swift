import Crypto
import Foundation
import ProvisioningCrypto
import ProvisioningModels
import TestSupport
import Testing
import TokenPlatform

/// Identities are compared byte for byte: Swift's `==` on strings treats canonically
/// equivalent ones as equal ("K" and KELVIN SIGN, "é" and "e" + COMBINING ACUTE ACCENT).
@Suite("Identities compared byte for byte")
struct IdentityTests {
    static let lookAlikes: [(stored: String, presented: String)] = [
        ("jos\u{E9}", "jose\u{301}"),  // precomposed against decomposed
        ("Kate", "\u{212A}ate"),  // LATIN CAPITAL K against KELVIN SIGN
    ]

    @Test func swiftsEqualityIsNotEnough() {
        for pair in Self.lookAlikes {
            #expect(pair.stored == pair.presented, "the premise: Swift calls these equal")
            #expect(!pair.stored.isSameIdentifier(as: pair.presented))
            #expect(pair.stored.isSameIdentifier(as: String(decoding: Array(pair.stored.utf8), as: UTF8.self)))
        }
    }

    @Test(arguments: 0..<2)
    func aLookAlikeUserIdSeesSealsAndActivatesNothingOfTheOwners(pair index: Int) async throws {
        let (owner, other) = Self.lookAlikes[index]
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            try await api.putCard("card-1", user: owner)
            let token = try await api.provision("card-1", user: owner, token: "TOKEN1")
            #expect(token.decision == .requireAdditionalAuthentication)
            // The card has art, so a refusal of it can only be the card's.
            #expect(try await api.send(.put, "/lifecycle/card-art/art-1", as: .issuer, raw: TestPNG.file(width: 1536, height: 969), contentType: "image/png").status == .ok)
            let withArt = CardUpsertRequest(userId: owner, primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"), cardholderName: "Jane Appleseed", network: .visa, productTitle: "Everyday Debit", artId: "art-1")
            #expect(try await api.send(.put, "/lifecycle/cards/card-1", as: .issuer, json: withArt).status == .ok)
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards/card-1/art", as: .cardholder(owner)).status == .ok)

            let sealed = try await api.signCard("card-1", user: other)
            #expect(sealed.status == .notFound)
            let listed = try await api.send(.get, "/issuer/push-provisioning/cards", as: .cardholder(other))
            #expect(listed.status == .ok && listed.text.contains("\"cards\":[]"), "\(listed.text)")
            let art = try await api.send(.get, "/issuer/push-provisioning/cards/card-1/art", as: .cardholder(other))
            #expect(art.status == .notFound && art.error?.code == "card_not_found", "\(art.text)")
            let activation = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder(other), json: TokenActivationRequest(tokenUniqueReference: "TOKEN1"))
            #expect(activation.status == .notFound)
            #expect(try await api.tokenStatus("TOKEN1") == .inactive)

            // The owner, byte for byte, still can.
            #expect(try await api.signCard("card-1", user: owner).status == .ok)
        }
    }

    @Test func aCredentialWithAnythingButASCIIIsRefusedEvenWhenItsLookAlikeWasVerified() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("card-1", user: "alice")
            var token = platform.jwt("alice")
            while !token.contains("K") { platform.advance(1); token = platform.jwt("alice") }
            let lookAlike = token.replacingOccurrences(of: "K", with: "\u{212A}")
            #expect(lookAlike == token, "the premise: Swift calls these equal")
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer \(token)")).status == .ok)
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer \(lookAlike)")).status == .unauthorized)
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards", as: .raw("Bearer \(token)")).status == .ok)
        }
    }

    @Test func aSubjectWithAControlCharacterIsRefused() {
        let key = SigningKey.generate()
        let verifier = CardholderTokenVerifier(keys: [key.id: key.privateKey.publicKey])
        let issuer = DevelopmentTokenIssuer(key: key)
        for subject in ["alice\n2026-01-01 notice forged line", "bob\u{0}", String(repeating: "a", count: 129)] {
            let token = try! issuer.token(userId: subject, lifetime: 60, now: Date())
            #expect(verifier.userId(from: token, now: Date()) == .failure(.invalidSubject), "\(subject.debugDescription)")
        }
        let fine = try! issuer.token(userId: "jos\u{E9}@example.com", lifetime: 60, now: Date())
        #expect(verifier.userId(from: fine, now: Date()) == .success("jos\u{E9}@example.com"))
    }

    @Test func issuerAndAudienceAreComparedByteForByte() throws {
        let key = SigningKey.generate()
        let verifier = CardholderTokenVerifier(keys: [key.id: key.privateKey.publicKey], issuer: "https://id.example/Kiosk", audience: "pushprov-\u{E9}")
        let now = Date()
        func token(issuer: String, audience: String?) throws -> String {
            try DevelopmentTokenIssuer(key: key, issuer: issuer, audience: audience).token(userId: "alice", lifetime: 60, now: now)
        }
        #expect(verifier.userId(from: try token(issuer: "https://id.example/Kiosk", audience: "pushprov-\u{E9}"), now: now) == .success("alice"))
        #expect(verifier.userId(from: try token(issuer: "https://id.example/\u{212A}iosk", audience: "pushprov-\u{E9}"), now: now) == .failure(.wrongIssuer))
        #expect(verifier.userId(from: try token(issuer: "https://id.example/Kiosk", audience: "pushprov-e\u{301}"), now: now) == .failure(.wrongAudience))
        #expect(verifier.userId(from: try token(issuer: "https://id.example/Kiosk", audience: nil), now: now) == .failure(.wrongAudience))
    }
}
