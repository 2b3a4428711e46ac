import Foundation
import ProvisioningCrypto
import ProvisioningModels
import Testing
import TMPTestSupport
import TokenPlatform
import WalletSimulator

@Suite("Token service simulator: tokenization against a live TMP")
struct TokenizationTests {
    @Test func greenPathCreatesAnActiveTokenThatTheOwnerFindsAndNobodyElse() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            let card = try await session.putCard("c1")
            let outcome = try await session.simulator.tokenize(try await session.addPaymentPass("c1").tokenization)
            guard case .approved(let token) = outcome else { throw TestFailure("expected green, got \(outcome)") }
            #expect(token.status == .active && token.authorizationPath == .green)
            #expect(token.panUniqueReference == card.panUniqueReference)
            #expect(token.panLast4 == "1111" && token.tokenLast4.count == 4 && token.tokenLast4.allSatisfy(\.isNumber))
            #expect(token.tokenUniqueReference.hasPrefix("DAPL"))

            let found = try await session.search([token.tokenUniqueReference, "DAPL-UNKNOWN"])
            #expect(found.map(\.tokenUniqueReference) == [token.tokenUniqueReference])
            #expect(found.first?.tokenStatus == .active && found.first?.authorizationPath == .green && found.first?.externalCardId == "c1")
            #expect(try await session.search([token.tokenUniqueReference], user: "mallory").isEmpty)
            #expect(try await session.tmpToken(token.tokenUniqueReference)?.tokenLast4 == token.tokenLast4)

            let log = await session.simulator.deliveryLog
            #expect(log.map(\.event.event) == [.created, .activated])
            #expect(log.map(\.outcome) == [.applied(.inactive), .applied(.active)])
            #expect(Set(log.map(\.event.eventId)).count == 2)
            #expect(await session.simulator.pendingEvents.isEmpty)
        }
    }

    @Test func yellowPathCreatesAnInactiveTokenWithAnActivationLink() async throws {
        let tmp = try await LiveTMP(policy: .inApp)
        try await tmp.run { session in
            try await session.putCard("c1")
            let outcome = try await session.simulator.tokenize(try await session.addPaymentPass("c1", device: .watch).tokenization)
            guard case .requiresActivation(let token) = outcome else { throw TestFailure("expected yellow, got \(outcome)") }
            #expect(token.status == .inactive && token.authorizationPath == .yellow && token.deviceType == .watch)
            let found = try #require(try await session.search([token.tokenUniqueReference]).first)
            #expect(found.tokenStatus == .inactive && found.processStatus == "PENDING_ACTIVATION" && found.deviceType == .watch)

            let link = try await session.simulator.activationLink(forToken: token.tokenUniqueReference, serialNumber: "pass 1/α")
            #expect(link.absoluteString.hasPrefix("pushprov-issuer://wallet/activate?serialNumber="))
            #expect(ActivationLinkFormat().serialNumber(in: link) == "pass 1/α")
            #expect(await session.simulator.deliveryLog.map(\.event.event) == [.created])
        }
    }

    @Test func declinesUnknownBlockedAndExpiredCardsAsTMPDecides() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        tmp.clock.withValue { $0 = Date(timeIntervalSince1970: 1_788_220_800 - 300) }  // 2026-08-31 23:55 UTC
        try await tmp.run { session in
            try await session.putCard("c1", pan: "4111111111111111")
            try await session.putCard("c2", pan: "5555555555554444")
            try await session.putCard("old", pan: "378282246310005", expiration: "08/26")

            // A PAN TMP does not know, carried with otherwise valid activation data.
            let pass = try await session.addPaymentPass("c1")
            let unknown = try PassDataPayload(primaryAccountNumber: try PrimaryAccountNumber("6011111111111117"), expiration: pass.card.expiration, name: pass.card.name, nonce: pass.card.nonce, nonceSignature: pass.card.nonceSignature)
            let unknownOutcome = try await session.simulator.tokenize(TokenizationRequest(card: unknown, activationData: pass.activationData, deviceType: .phone))
            #expect(unknownOutcome.decline == TokenizationDecline(reason: "card_unknown", source: .issuer))

            let blockedPass = try await session.addPaymentPass("c2")
            try await session.setCardStatus("c2", .blocked)
            #expect(try await session.simulator.tokenize(blockedPass.tokenization).decline == TokenizationDecline(reason: "card_blocked", source: .issuer))

            // Sealed in the card's last valid minutes; Apple tokenizes after midnight.
            let expiringPass = try await session.addPaymentPass("old")
            tmp.advance(360)
            #expect(try await session.simulator.tokenize(expiringPass.tokenization).decline == TokenizationDecline(reason: "card_expired", source: .issuer))

            #expect(await session.simulator.allTokens.isEmpty)
            #expect(try await tmp.store.tokens(externalCardId: "c2").isEmpty)
            #expect(try await tmp.store.tokens(externalCardId: "old").isEmpty)
            #expect(await session.simulator.deliveryLog.isEmpty)
        }
    }

    @Test func activationDataIsSingleUseAtTheTokenServiceItself() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            let card = try await session.putCard("c1")
            let pass = try await session.addPaymentPass("c1")
            #expect(try await session.simulator.tokenize(pass.tokenization).token != nil)
            let decisions = try await tmp.store.latestTokenizationDecision(panUniqueReference: card.panUniqueReference, deviceType: .phone)
            let replay = try await session.simulator.tokenize(pass.tokenization)
            #expect(replay.decline == TokenizationDecline(reason: "activation_data_replayed", source: .tokenService))
            // Refused before TMP was asked: TMP's latest decision is still the first one.
            #expect(try await tmp.store.latestTokenizationDecision(panUniqueReference: card.panUniqueReference, deviceType: .phone) == decisions)
            #expect(await session.simulator.allTokens.count == 1)
            #expect(try await tmp.store.tokens(externalCardId: "c1").count == 1)
        }
    }

    @Test func refusesExpiredTamperedMisboundAndForgedActivationData() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            let card = try await session.putCard("c1", pan: "4111111111111111")
            try await session.putCard("c2", pan: "5555555555554444")
            func decline(_ request: TokenizationRequest) async throws -> TokenizationDecline? {
                try await session.simulator.tokenize(request).decline
            }

            let late = try await session.addPaymentPass("c1")
            tmp.advance(601)
            #expect(try await decline(late.tokenization) == TokenizationDecline(reason: "activation_data_expired", source: .tokenService))
            #expect(try await tmp.store.latestTokenizationDecision(panUniqueReference: card.panUniqueReference, deviceType: .phone) == nil)

            var tampered = try await session.addPaymentPass("c1").tokenization
            let segments = String(decoding: try #require(tampered.activationData), as: UTF8.self).split(separator: ".").map(String.init)
            var signature = try #require(Data(base64URLEncoded: segments[2]))
            signature[0] ^= 0x01
            tampered.activationData = Data((segments[0] + "." + segments[1] + "." + signature.base64URLEncodedString).utf8)
            #expect(try await decline(tampered) == TokenizationDecline(reason: "activation_data_bad_signature", source: .tokenService))

            var otherNonce = try await session.addPaymentPass("c1").tokenization
            let card1 = otherNonce.card
            otherNonce.card = try PassDataPayload(primaryAccountNumber: card1.primaryAccountNumber, expiration: card1.expiration, name: card1.name, nonce: Data("another nonce".utf8), nonceSignature: card1.nonceSignature)
            #expect(try await decline(otherNonce) == TokenizationDecline(reason: "activation_data_wrong_nonce", source: .tokenService))

            // Activation data of c1 travelling with c2's card (and c1's nonce): the card binding refuses it.
            let forC1 = try await session.addPaymentPass("c1")
            let c2 = try await session.addPaymentPass("c2").card
            let swappedCard = try PassDataPayload(primaryAccountNumber: c2.primaryAccountNumber, expiration: c2.expiration, name: c2.name, nonce: forC1.card.nonce, nonceSignature: forC1.card.nonceSignature)
            let swapped = TokenizationRequest(card: swappedCard, activationData: forC1.activationData, deviceType: .phone)
            #expect(try await decline(swapped)?.reason == "activation_data_wrong_card")

            let forged = try ActivationDataIssuer(signingKey: SigningKey.generate()).issue(panUniqueReference: card.panUniqueReference, nonce: forC1.card.nonce, deviceType: .phone, now: tmp.clock.current).token
            let forgedRequest = TokenizationRequest(card: forC1.card, activationData: Data(forged.utf8), deviceType: .phone)
            #expect(try await decline(forgedRequest) == TokenizationDecline(reason: "activation_data_unknown_key_id", source: .tokenService))

            #expect(try await decline(TokenizationRequest(card: forC1.card, activationData: Data("garbage".utf8), deviceType: .phone)) == TokenizationDecline(reason: "activation_data_malformed", source: .tokenService))
            #expect(await session.simulator.allTokens.isEmpty)
            #expect(try await tmp.store.tokens(externalCardId: "c1").isEmpty)
        }
    }

    @Test func dataAskedForOneDeviceTokenizesTheCardOnTheOtherDeviceTheSheetPicked() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            // Asked for the Watch, added to the iPhone: no device refusal, the nonce binds it.
            var otherDevice = try await session.addPaymentPass("c1", device: .watch).tokenization
            otherDevice.deviceType = .phone
            let token = try #require(try await session.simulator.tokenize(otherDevice).token)
            #expect(token.deviceType == .phone)
            #expect(try await tmp.store.tokens(externalCardId: "c1").map(\.deviceType) == [.phone])
        }
    }

    @Test func fetchesTMPsKeysAgainWhenAnUnknownKeyIDAppears() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            _ = try await session.provision("c1")

            // TMP rotates its activation key: a new server on the same database signs with it.
            var rotated = tmp.environment
            let newKey = SigningKey.generate()
            rotated.activationKeys = [newKey, tmp.activationKey]
            try await TestTMP.runLive(router: tmp.router(environment: rotated), logger: tmp.httpLogger) { client, port in
                await session.simulator.connect(to: LiveTMP.endpoint(port: port))
                let next = LiveSession(client: client, tmp: tmp)
                let tooSoon = try await next.addPaymentPass("c1", device: .watch)
                #expect(try await next.simulator.tokenize(tooSoon.tokenization).decline?.reason == "activation_data_unknown_key_id")
                tmp.advance(10)
                let pass = try await next.addPaymentPass("c1", device: .watch)
                #expect(try CompactJWS.parse(String(decoding: pass.activationData, as: UTF8.self)).header.kid == newKey.id)
                #expect(try await next.simulator.tokenize(pass.tokenization).token != nil)
            }
        }
    }

    @Test func aSimulatorWithoutTMPOrWithTheWrongKeyFailsClearly() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            let pass = try await session.addPaymentPass("c1")

            let unconnected = TokenServiceSimulator()
            await #expect(throws: TokenServiceSimulatorError.notConnected) { try await unconnected.tokenize(pass.tokenization) }

            let port = try #require(session.client.port)
            let wrongKey = TokenServiceSimulator(endpoint: LiveTMP.endpoint(port: port, apiKey: "not-the-tsp-key"), now: { tmp.clock.current })
            do throws(TokenServiceSimulatorError) {
                _ = try await wrongKey.tokenize(pass.tokenization)
                Issue.record("a wrong TSP API key must not pass for a decline")
            } catch {
                #expect(error.code == "issuer_refused")
                guard case .issuerRefused(let refusal) = error else { throw error }
                #expect(refusal.code == "unauthorized")
            }

            let unreachable = TokenServiceSimulator(endpoint: TSPAPIEndpoint(baseURL: URL(string: "http://127.0.0.1:1")!, apiKey: LiveTMP.tspKey), now: { tmp.clock.current })
            #expect(try await unreachable.tokenize(pass.tokenization).decline == TokenizationDecline(reason: "issuer_unavailable", source: .tokenService))
        }
    }

    @Test func neverLogsTheCardNumber() async throws {
        let tmp = try await LiveTMP(policy: .inApp)
        try await tmp.run { session in
            try await session.putCard("c1", pan: "4111111111111111")
            let token = try await session.provision("c1")
            _ = try await session.activate(token.tokenUniqueReference)
            try await session.setCardStatus("c1", .blocked)
            await session.simulator.drainEvents()
            let lines = tmp.logs.current
            #expect(lines.contains { $0.contains("token created") })
            #expect(!lines.contains { $0.contains("4111111111111111") || $0.contains("411111") })
        }
    }
}
