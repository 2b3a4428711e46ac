import Crypto
import Foundation
import ProvisioningCrypto
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import Testing
@testable import TokenPlatform
import WalletSimulator
import X509

@Suite("Push Provisioning API")
struct PushProvisioningRouteTests {
    @Test func signedCardsSealsTheCardForTheLeafAndIssuesActivationData() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("card-1", user: "alice", pan: "5555555555554444", expiration: "11/28", name: "Alice Smith")
            let nonce = Data([1, 2, 3, 4, 5])
            let reply = try await api.signCard("card-1", user: "alice", nonce: nonce)
            #expect(reply.status == .ok)
            let response = try reply.decode(SignedCardResponse.self)
            #expect(response.ephemeralPublicKey.data.count == 65)
            let plaintext = try ECCV2.open(SealedPassData(encryptedData: response.encryptedData.data, ephemeralPublicKey: response.ephemeralPublicKey.data), with: platform.pki.leafPrivateKey)
            let payload = try PassDataPayload(jsonData: plaintext)
            #expect(payload.primaryAccountNumber.digits == "5555555555554444")
            #expect(payload.expiration.text == "11/28")
            #expect(payload.name == "Alice Smith")
            #expect(payload.nonce == nonce)
            #expect(payload.nonceSignature == Data("apple-signature".utf8))
            let card = try #require(try await platform.store.card(externalCardId: "card-1"))
            let verdict = ActivationDataVerifier(keySet: platform.environment.activationKeySet)
                .verify(String(decoding: response.activationData.data, as: UTF8.self), panUniqueReference: card.panUniqueReference, nonce: nonce, now: platform.clock.current)
            #expect(verdict.claims?.requestedDeviceType == .phone)
            let audit = try await platform.store.auditEntries(subject: "card:card-1").map(\.action)
            #expect(audit.contains("card.seal"))
        }
    }

    @Test func signedCardsRefusesAnUntrustedChainWithTheReason() async throws {
        var configured = try await TestPlatform()
        // One line per reason an hour: the count below does not hang on the machine's speed.
        configured.environment.chainRefusalLog = KeyedWarningThrottle(interval: .seconds(3_600))
        let platform = configured
        try await platform.run { api in
            try await api.putCard("card-1", user: "alice")
            let other = try SimulatedApplePKI()
            let request = SignedCardRequest(externalCardId: "card-1", deviceType: .phone, certificates: other.walletCertificates, nonce: Data([1]), nonceSignature: Data([2]))
            let reply = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), json: request)
            #expect(reply.status == .badRequest)
            #expect(reply.error?.code == "certificate_chain_refused")
            #expect(reply.error?.message.hasPrefix("untrusted_root") == true)
            let leafOnly = SignedCardRequest(externalCardId: "card-1", deviceType: .phone, certificates: [platform.pki.walletCertificates[0]], nonce: Data([1]), nonceSignature: Data([2]))
            let second = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), json: leafOnly)
            #expect(second.error?.message.hasPrefix("incomplete_chain") == true)
            // A cardholder sending bad chains at request rate: every one is refused, and the log
            // has a line a second for each reason, not one per request.
            for _ in 0..<5 {
                let again = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), json: request)
                #expect(again.error?.code == "certificate_chain_refused")
            }
        }
        let lines = platform.logs.current.filter { $0.contains("signed-cards refused certificate chain") }
        #expect(lines.filter { $0.contains("untrusted_root") }.count == 1, "\(lines)")
        #expect(lines.filter { $0.contains("incomplete_chain") }.count == 1, "\(lines)")
    }

    @Test func signedCardsRefusesAnEmptyOrOversizedNonceOrSignatureNamingTheField() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("card-1", user: "alice")
            let limit = PassDataPayload.maximumNonceBytes
            #expect(limit == 1024)
            func send(nonce: Data, signature: Data) async throws -> APIClient.Reply {
                let request = SignedCardRequest(externalCardId: "card-1", deviceType: .phone, certificates: platform.pki.walletCertificates, nonce: nonce, nonceSignature: signature)
                return try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), json: request)
            }
            let fine = Data(repeating: 7, count: 16)
            for field in ["nonce", "nonceSignature"] {
                // Sizes are of the decoded bytes, not of the base64 text.
                for bad in [Data(), Data(repeating: 0xA5, count: limit + 1)] {
                    let reply = try await field == "nonce" ? send(nonce: bad, signature: fine) : send(nonce: fine, signature: bad)
                    #expect(reply.status == .badRequest, "\(field) of \(bad.count) bytes: \(reply.text)")
                    #expect(reply.error?.code == "invalid_field", "\(field) of \(bad.count) bytes")
                    // "nonce" is a prefix of "nonceSignature": the field name is followed by a space.
                    #expect(reply.error?.message.hasPrefix("\(field) must ") == true, "\(field) of \(bad.count) bytes: \(reply.error?.message ?? reply.text)")
                }
            }
            let largest = Data(repeating: 0x5A, count: limit)
            let accepted = try await send(nonce: largest, signature: largest)
            #expect(accepted.status == .ok, "\(accepted.text)")
            let sealed = try accepted.decode(SignedCardResponse.self)
            let plaintext = try ECCV2.open(SealedPassData(encryptedData: sealed.encryptedData.data, ephemeralPublicKey: sealed.ephemeralPublicKey.data), with: platform.pki.leafPrivateKey)
            let payload = try PassDataPayload(jsonData: plaintext)
            #expect(payload.nonce == largest && payload.nonceSignature == largest)
        }
    }

    /// A nonce or signature spelled in non-canonical base64 (bits set after the last byte, which
    /// Foundation ignores) is refused naming the field, on the fast and the decoder path alike;
    /// the same request spelled canonically is sealed.
    @Test func signedCardsRefusesNonCanonicalBase64() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("card-1", user: "alice")
            let request = SignedCardRequest(externalCardId: "card-1", deviceType: .phone, certificates: platform.pki.walletCertificates, nonce: Data([1]), nonceSignature: Data([2]))
            let canonical = String(decoding: try JSONEncoder().encode(request), as: UTF8.self)
            #expect(canonical.contains(#""nonce":"AQ==""#) && canonical.contains(#""nonceSignature":"Ag==""#))
            // The fast reader leaves non-canonical text to the decoder, whose answer stands; a
            // body that reaches the decoder for another reason (an escaped member name) too.
            for body in [canonical, canonical.replacingOccurrences(of: #""externalCardId""#, with: #""externalCard\u0049d""#)] {
                for (field, from, to) in [("nonce", #""nonce":"AQ==""#, #""nonce":"AR==""#), ("nonceSignature", #""nonceSignature":"Ag==""#, #""nonceSignature":"Ah==""#)] {
                    let reply = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), raw: Data(body.replacingOccurrences(of: from, with: to).utf8))
                    #expect(reply.status == .badRequest, "\(reply.text)")
                    #expect(reply.error?.message == "field \(field) must be base64 in canonical form (the bits after the last byte zero)")
                }
                let accepted = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), raw: Data(body.utf8))
                #expect(accepted.status == .ok, "\(accepted.text)")
            }
        }
    }

    @Test func signedCardsRecordsTheAttemptForTheDeviceUserCardNonceAndLeaf() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("card-1", user: "alice")
            let nonce = Data([9, 8, 7, 6, 5, 4, 3, 2, 1])
            let reply = try await api.signCard("card-1", user: "alice", device: .watch, nonce: nonce)
            #expect(reply.status == .ok)
            let response = try reply.decode(SignedCardResponse.self)
            let card = try #require(try await platform.store.card(externalCardId: "card-1"))
            let verdict = ActivationDataVerifier(keySet: platform.environment.activationKeySet)
                .verify(String(decoding: response.activationData.data, as: UTF8.self), panUniqueReference: card.panUniqueReference, nonce: nonce, now: platform.clock.current)
            let claims = try #require(verdict.claims)
            let attempt = try #require(try await platform.store.provisioningAttempt(activationDataId: claims.id))
            #expect(attempt.activationDataId == claims.id)
            #expect(attempt.deviceType == .watch)
            #expect(attempt.userId == "alice")
            #expect(attempt.externalCardId == "card-1")
            // base64url SHA-256 of the nonce, computed here rather than by the code under test.
            let nonceHash = Data(SHA256.hash(data: nonce)).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(attempt.nonceHash == nonceHash)
            #expect(attempt.nonceHash == ActivationDataVerifier.nonceHash(nonce))
            // Lowercase hex SHA-256 of the signed body of the leaf, the first certificate the request sent.
            let leaf = try Certificate(derEncoded: Array(platform.pki.walletCertificates[0]))
            #expect(attempt.leafFingerprint == SHA256.hash(data: leaf.tbsCertificateBytes).map { String(format: "%02x", $0) }.joined())
            #expect(attempt.createdAt == platform.clock.current)
            #expect(attempt.expiresAt == platform.clock.current.addingTimeInterval(ActivationDataIssuer.maximumLifetime))
            #expect(attempt.expiresAt == claims.expiresAt)
        }
    }

    @Test func signedCardsRefusesBlockedClosedAndExpiredCards() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("blocked", user: "alice", pan: "4111111111111111")
            try await api.putCard("closed", user: "alice", pan: "5555555555554444")
            try await api.putCard("expired", user: "alice", pan: "378282246310005", expiration: "08/26")
            _ = try await api.send(.patch, "/lifecycle/cards/blocked", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            _ = try await api.send(.patch, "/lifecycle/cards/closed", as: .issuer, json: CardStatusChangeRequest(status: .closed))
            for (id, code) in [("blocked", "card_blocked"), ("closed", "card_closed"), ("expired", "card_expired")] {
                let reply = try await api.signCard(id, user: "alice")
                #expect(reply.status == .conflict, "\(id)")
                #expect(reply.error?.code == code)
            }
        }
    }

    @Test func aStoredCardNumberTheVaultCannotReadIsA500LoggedWithItsCard() async throws {
        let first = try await TestPlatform()
        try await first.run { api in try await api.putCard("a1", user: "alice") }
        // The same database served with other vault keys (a key file lost and made again).
        var secrets = first.secrets
        secrets.vaultKeys = PANVaultKeys.generate()
        let second = try TestPlatform(store: first.store, secrets: secrets)
        try await second.run { api in
            let reply = try await api.signCard("a1", user: "alice")
            #expect(reply.status == .internalServerError && reply.error?.code == "internal_error")
            #expect(reply.error?.message == "the server failed to process the request")
        }
        let lines = second.logs.current.filter { $0.contains("a stored card number cannot be decrypted") }
        #expect(lines.count == 1, "\(second.logs.current)")
        #expect(lines.first?.hasPrefix("error ") == true && lines.first?.contains("a1") == true, "\(lines)")
        let trail = try await first.store.auditEntries(subject: "card:a1").map(\.action)
        #expect(trail.contains("card.create") && !trail.contains("card.seal"), "\(trail)")
    }

    @Test func aStoredCardNumberOtherThanTheCardsIsA500AndNothingIsSealed() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice", pan: "4111111111111111")
            let old = try #require(try await platform.store.card(externalCardId: "a1")).encryptedPAN
            // The number replaced (compromised), then its old ciphertext written back into the row
            // (a backup restored by hand): it decrypts, being bound to the same card id.
            try await api.putCard("a1", user: "alice", pan: "5555555555554444")
            let current = try #require(try await platform.store.card(externalCardId: "a1")).encryptedPAN
            let audit = AuditEntry(at: Date(), actor: "test", action: "card.reencrypt", subject: "card:a1", detail: "old ciphertext written back")
            #expect(try await platform.store.replaceEncryptedPANs([EncryptedPANChange(externalCardId: "a1", expected: current, replacement: old, audit: audit)]) == ["a1"])
            let reply = try await api.signCard("a1", user: "alice")
            #expect(reply.status == .internalServerError && reply.error?.code == "internal_error")
            #expect(reply.error?.message == "the server failed to process the request")
        }
        let lines = platform.logs.current.filter { $0.contains("is not the one the card was stored with") }
        #expect(lines.count == 1 && lines.first?.hasPrefix("error ") == true, "\(platform.logs.current)")
        #expect(!platform.logs.current.joined().contains("4111111111111111"))
        let trail = try await platform.store.auditEntries(subject: "card:a1").map(\.action)
        #expect(!trail.contains("card.seal"), "\(trail)")
    }

    @Test func anotherUsersCardAnswersExactlyLikeAMissingOne() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("card-1", user: "alice")
            let foreign = try await api.signCard("card-1", user: "mallory")
            let missing = try await api.signCard("card-404", user: "mallory")
            #expect(foreign.status == .notFound && missing.status == .notFound)
            #expect(foreign.error?.code == missing.error?.code)
            #expect(foreign.error?.message.replacingOccurrences(of: "card-1", with: "X") == missing.error?.message.replacingOccurrences(of: "card-404", with: "X"))
            let art = try await api.send(.get, "/issuer/push-provisioning/cards/card-1/art", as: .cardholder("mallory"))
            let missingArt = try await api.send(.get, "/issuer/push-provisioning/cards/card-404/art", as: .cardholder("mallory"))
            #expect(art.status == .notFound && missingArt.status == .notFound)
            #expect(art.error?.code == missingArt.error?.code)
            #expect(art.error?.message.replacingOccurrences(of: "card-1", with: "X") == missingArt.error?.message.replacingOccurrences(of: "card-404", with: "X"))
        }
    }

    @Test func searchReturnsOnlyTheCallersTokens() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice", pan: "4111111111111111")
            try await api.putCard("b1", user: "bob", pan: "5555555555554444")
            try await api.provision("a1", user: "alice", pan: "4111111111111111", token: "TOK-A1")
            try await api.provision("b1", user: "bob", pan: "5555555555554444", token: "TOK-B1")
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/searches", as: .cardholder("alice"), json: TokenSearchRequest(tokenUniqueReferences: ["TOK-A1", "TOK-B1", "TOK-UNKNOWN"]))
            #expect(reply.status == .ok)
            let results = try reply.decode([TokenSearchResult].self)
            #expect(results.map(\.tokenUniqueReference) == ["TOK-A1"])
            #expect(results.first?.externalCardId == "a1")
            #expect(results.first?.tokenStatus == .inactive)
            #expect(results.first?.authorizationPath == .yellow)
            #expect(results.first?.processStatus == "PENDING_ACTIVATION")
            #expect(results.first?.deviceType == .phone)
        }
    }

    @Test func aSearchReferenceNotOfTheIdentifierFormIsAbsentAndTheOthersAnswered() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-A1")
            // As Wallet could hand them to the app: empty, too long, with ':' '+' '/' '='.
            let odd = ["", String(repeating: "A", count: 65), "DNITHE:123", "DNITHE+1/2="]
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/searches", as: .cardholder("alice"), json: TokenSearchRequest(tokenUniqueReferences: ["TOK-A1"] + odd))
            #expect(reply.status == .ok, "\(reply.text)")
            #expect(try reply.decode([TokenSearchResult].self).map(\.tokenUniqueReference) == ["TOK-A1"])
            let onlyOdd = try await api.send(.post, "/issuer/push-provisioning/tokens/searches", as: .cardholder("alice"), json: TokenSearchRequest(tokenUniqueReferences: odd))
            #expect(onlyOdd.status == .ok)
            #expect(try onlyOdd.decode([TokenSearchResult].self).isEmpty)
            // Not a list of strings is still refused, naming the field.
            let numbers = try await api.send(.post, "/issuer/push-provisioning/tokens/searches", as: .cardholder("alice"), raw: Data(#"{"walletType":"APPLE_PAY","tokenUniqueReferences":[1,2]}"#.utf8))
            #expect(numbers.status == .badRequest && numbers.error?.message.contains("tokenUniqueReferences") == true, "\(numbers.text)")
        }
    }

    @Test func searchRefusesMoreThanAHundredReferences() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/searches", as: .cardholder("alice"), json: TokenSearchRequest(tokenUniqueReferences: (0...100).map { "T\($0)" }))
            #expect(reply.status == .badRequest)
            #expect(reply.error?.code == "too_many_references")
            let hundred = try await api.send(.post, "/issuer/push-provisioning/tokens/searches", as: .cardholder("alice"), json: TokenSearchRequest(tokenUniqueReferences: (0..<100).map { "T\($0)" }))
            #expect(hundred.status == .ok)
        }
    }

    @Test func activationOfAnInactiveTokenAsksTheTokenServiceAndApproves() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-1")
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1"))
            let response = try reply.decode(TokenActivationResponse.self)
            #expect(response.issuerMobileAppAuthResponse == .approved)
            #expect(response.cardLast4Digits == "1111")
            #expect(try await api.tokenStatus("TOK-1") == .active)
            #expect(platform.connector.commands.current == ["activate TOK-1"])
            let again = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1")).decode(TokenActivationResponse.self)
            #expect(again.issuerMobileAppAuthResponse == .approved)
            #expect(platform.connector.commands.current.count == 1)
        }
    }

    /// An activation that sends nothing (the token already active, or its card blocked) is
    /// answered without taking the token's place in line, whose lease costs two database
    /// writes; one that sends the activation takes it.
    @Test func anActivationThatSendsNothingTakesNoPlaceInLine() async throws {
        let store = FaultyStore(base: try await TestTMP.memoryStore())
        let platform = try TestPlatform(store: store, secrets: .init())
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-1")
            let activate = { @Sendable in
                try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1")).decode(TokenActivationResponse.self)
            }
            #expect(try await activate().issuerMobileAppAuthResponse == .approved)
            let takes = store.leaseTakes.current.count
            #expect(takes > 0, "the activation sent took the token's place")
            for _ in 0..<3 {
                let again = try await activate()
                #expect(again.issuerMobileAppAuthResponse == .approved && again.comment == "the token is already active")
            }
            #expect(store.leaseTakes.current.count == takes, "\(store.leaseTakes.current)")
            let blocked = try await api.send(.patch, "/lifecycle/cards/a1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            #expect(blocked.status == .ok)
            let blockTakes = store.leaseTakes.current.count
            let declined = try await activate()
            #expect(declined.issuerMobileAppAuthResponse == .declined && declined.comment == "the card is blocked")
            #expect(store.leaseTakes.current.count == blockTakes, "\(store.leaseTakes.current)")
            #expect(platform.connector.commands.current == ["activate TOK-1", "suspend TOK-1"])
        }
    }

    /// While customer service's suspension of an active token is with the token service, an
    /// activation waits for it and answers from the token as the suspension left it (DECLINED,
    /// suspended), not from the read before it (APPROVED, already active).
    @Test func anActivationDuringAnotherCommandAnswersOnceThatCommandIsRecorded() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-1")
            #expect(try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1")).decode(TokenActivationResponse.self).issuerMobileAppAuthResponse == .approved)
            let answer = Locked<TokenActivationResponse?>(nil)
            let service = PushProvisioningService(environment: platform.environment)
            platform.connector.meanwhile.withValue {
                $0 = { command, _ in
                    guard command == "suspend" else { return }
                    Task {
                        let done = try await service.activateToken(userId: "alice", request: TokenActivationRequest(tokenUniqueReference: "TOK-1"))
                        answer.withValue { $0 = done }
                    }
                    // Until it waits in line behind the suspension (or has answered already).
                    let deadline = ContinuousClock.now + .seconds(30)
                    while platform.environment.tokenCommandOrder.waiting == 0, answer.current == nil, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(1))
                    }
                }
            }
            let suspended = try await api.send(.post, "/lifecycle/tokens/TOK-1/suspend", as: .issuer)
            #expect(suspended.status == .ok, "\(suspended.text)")
            let deadline = ContinuousClock.now + .seconds(30)
            while answer.current == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            let response = try #require(answer.current)
            #expect(response.issuerMobileAppAuthResponse == .declined && response.comment == "the token is suspended", "\(response)")
        }
    }

    @Test func activationOvertakenByTheTokenServicesEchoIsApprovedAndAudited() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let card = try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-1")
            let tsp = TSPService(environment: platform.environment)
            platform.connector.meanwhile.withValue {
                $0 = { _, token in
                    _ = try await tsp.apply(TokenEventRequest(eventId: "echo", tokenUniqueReference: token.tokenUniqueReference, panUniqueReference: card.panUniqueReference, event: .activated, deviceType: .phone))
                }
            }
            let response = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1")).decode(TokenActivationResponse.self)
            #expect(response.issuerMobileAppAuthResponse == .approved)
            #expect(try await api.tokenStatus("TOK-1") == .active)
            let audit = try await platform.store.auditEntries(subject: "token:TOK-1").map { "\($0.actor) \($0.action)" }
            #expect(audit.suffix(2) == ["tsp token.event.activated", "user:alice token.activate"])
        }
    }

    @Test func anActivationOvertakenByABlockIsDeclinedAndSuspendedAtTheTokenService() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-1")
            #expect(try await api.tokenStatus("TOK-1") == .inactive)
            // The issuer blocks the card while the token service activates the token.
            api.meanwhile("activate", setCard: "a1", to: .blocked)
            let response = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1")).decode(TokenActivationResponse.self)
            #expect(response.issuerMobileAppAuthResponse == .declined)
            #expect(response.comment == "the card is blocked")
            // The activation the token service carried out is in the trail, though not recorded.
            let trail = try await platform.store.auditEntries(subject: "token:TOK-1")
            #expect(trail.map(\.action) == ["token.event.created", "token.command_not_recorded", "token.suspended"])
            #expect(trail.first { $0.action == "token.command_not_recorded" }.map { "\($0.actor): \($0.detail)" } == "user:alice: activate confirmed by the token service; TMP's record not changed: the card is blocked")
            // The token service activated it, so it is suspended there for the block, and
            // unblocking the card resumes it.
            let token = try await platform.store.token(reference: "TOK-1")
            #expect(token?.status == .suspended && token?.suspendedBy == .cardBlocked)
            platform.connector.meanwhile.withValue { $0 = nil }
            let unblock = try await api.send(.patch, "/lifecycle/cards/a1", as: .issuer, json: CardStatusChangeRequest(status: .active)).decode(LifecycleService.StatusChange.self)
            #expect(unblock.tokens.map(\.result) == ["RESUMED"])
            #expect(try await api.tokenStatus("TOK-1") == .active)
            #expect(platform.connector.commands.current == ["activate TOK-1", "suspend TOK-1", "resume TOK-1"])
        }
    }

    @Test func activationFailsWithoutChangeWhenTheTokenServiceIsDown() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-1")
            platform.connector.failing.withValue { $0 = true }
            let response = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1")).decode(TokenActivationResponse.self)
            #expect(response.issuerMobileAppAuthResponse == .failed)
            #expect(try await api.tokenStatus("TOK-1") == .inactive)
        }
    }

    @Test func activationDeclinesSuspendedTokensAndBlockedCards() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-1")
            #expect(try await api.tokenStatus("TOK-1") == .active)
            _ = try await api.send(.post, "/lifecycle/tokens/TOK-1/suspend", as: .issuer)
            let suspended = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1")).decode(TokenActivationResponse.self)
            #expect(suspended.issuerMobileAppAuthResponse == .declined)
            _ = try await api.send(.patch, "/lifecycle/cards/a1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            let blocked = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1")).decode(TokenActivationResponse.self)
            #expect(blocked.issuerMobileAppAuthResponse == .declined)
            #expect(blocked.comment.contains("blocked"))
        }
    }

    @Test func activationOfADeactivatedTokenIsDeclinedWithoutAskingTheTokenService() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-1")
            let deactivated = try await api.send(.post, "/lifecycle/tokens/TOK-1/deactivate", as: .issuer)
            #expect(deactivated.status == .ok, "\(deactivated.text)")
            #expect(try await api.tokenStatus("TOK-1") == .deactivated)
            let before = platform.connector.commands.current
            #expect(before == ["deactivate TOK-1"])
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1"))
            #expect(reply.status == .ok)
            let answer = try reply.decode(TokenActivationResponse.self)
            #expect(answer.issuerMobileAppAuthResponse == .declined)
            #expect(answer.comment == "the token is deactivated")
            #expect(answer.tokenUniqueReference == "TOK-1")
            // No command at all went to the token service for the activation.
            #expect(platform.connector.commands.current == before)
            #expect(try await api.tokenStatus("TOK-1") == .deactivated)
        }
    }

    @Test func aTokenOfAnExpiredCardIsNotActivated() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            // The clock starts in September 2026; the card is valid to the end of that month.
            try await api.putCard("a1", user: "alice", expiration: "09/26")
            try await api.provision("a1", user: "alice", token: "TOK-1", expiration: "09/26")
            #expect(try await api.tokenStatus("TOK-1") == .inactive)
            platform.advance(30 * 86_400)
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1"))
            let answer = try reply.decode(TokenActivationResponse.self)
            #expect(answer.issuerMobileAppAuthResponse == .declined)
            #expect(answer.comment == "the card expired at the end of 09/26")
            #expect(platform.connector.commands.current.allSatisfy { !$0.hasPrefix("activate") })
            #expect(try await api.tokenStatus("TOK-1") == .inactive)
        }
    }

    @Test func activationOfAnotherUsersTokenIsNotFound() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice")
            try await api.provision("a1", user: "alice", token: "TOK-1")
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("mallory"), json: TokenActivationRequest(tokenUniqueReference: "TOK-1"))
            let missing = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("mallory"), json: TokenActivationRequest(tokenUniqueReference: "TOK-404"))
            #expect(reply.status == .notFound && missing.status == .notFound)
            #expect(reply.error?.code == "token_not_found" && missing.error?.code == "token_not_found")
            #expect(reply.error?.message.replacingOccurrences(of: "TOK-1", with: "X") == missing.error?.message.replacingOccurrences(of: "TOK-404", with: "X"))
            #expect(try await api.tokenStatus("TOK-1") == .inactive)
            #expect(platform.connector.commands.current.isEmpty)
        }
    }

    @Test func cardsListsTheCallersCardsWithoutPANs() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("a1", user: "alice", pan: "4111111111111111")
            try await api.putCard("a2", user: "alice", pan: "5555555555554444", network: .mastercard)
            try await api.putCard("b1", user: "bob", pan: "378282246310005", network: .amex)
            let reply = try await api.send(.get, "/issuer/push-provisioning/cards", as: .cardholder("alice"))
            let cards = try reply.decode(CardListResponse.self).cards
            #expect(cards.map(\.externalCardId) == ["a1", "a2"])
            #expect(cards.map(\.panLast4) == ["1111", "4444"])
            #expect(cards[1].network == .mastercard)
            #expect(!reply.text.contains("4111111111111111") && !reply.text.contains("5555555555554444"))
        }
    }
}
