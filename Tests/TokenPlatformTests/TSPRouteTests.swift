import Foundation
import ProvisioningCrypto
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import Testing
import TokenPlatform

@Suite("TSP API")
struct TSPRouteTests {
    func decide(_ api: APIClient, pan: String = "4111111111111111", expiration: String = "12/29", activationData: String?, device: DeviceType = .phone, request: String = "r-\(UUID())") async throws -> TokenizationDecisionResponse {
        try await api.send(.post, "/tsp/tokenization-decisions", as: .tsp, json: TokenizationDecisionRequest(
            requestId: request, primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration(expiration), activationData: activationData, deviceType: device
        )).decode(TokenizationDecisionResponse.self)
    }

    func activationData(_ api: APIClient, card: String = "c1", user: String = "alice", device: DeviceType = .phone) async throws -> String {
        let reply = try await api.signCard(card, user: user, device: device)
        return String(decoding: try reply.decode(SignedCardResponse.self).activationData.data, as: UTF8.self)
    }

    @Test func validActivationDataIsYellowInAppAndGreenImmediate() async throws {
        for (policy, expected) in [(ActivationPolicy.inApp, TokenizationDecision.requireAdditionalAuthentication), (.immediate, .approved)] {
            let platform = try await TestPlatform(policy: policy)
            try await platform.run { api in
                try await api.putCard("c1", user: "alice")
                let decision = try await decide(api, activationData: try await activationData(api))
                #expect(decision.decision == expected)
                #expect(decision.panUniqueReference == (try await platform.store.card(externalCardId: "c1"))?.panUniqueReference)
            }
        }
    }

    @Test func inAppPolicyIsGreenForASecondDeviceOnlyOnceTheFirstDevicesTokenIsActive() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let phone = try await api.provision("c1", user: "alice", device: .phone, token: "TPHONE")
            #expect(phone.decision == .requireAdditionalAuthentication)
            // While the phone's token waits for activation, the Watch is yellow too.
            let early = try await decide(api, activationData: try await activationData(api, device: .watch), device: .watch)
            #expect(early.decision == .requireAdditionalAuthentication)
            let pur = try #require(phone.panUniqueReference)
            try await api.event("TPHONE", pur: pur, .activated, device: .phone)
            let watch = try await decide(api, activationData: try await activationData(api, device: .watch), device: .watch)
            #expect(watch.decision == .approved)
            #expect(watch.reason == "active_on_other_device")
            // Another phone token of the same card is not "another device".
            let phoneAgain = try await decide(api, activationData: try await activationData(api, device: .phone), device: .phone)
            #expect(phoneAgain.decision == .requireAdditionalAuthentication)
        }
    }

    @Test func declinesUnknownBlockedClosedExpiredAndMismatchedCards() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            #expect(try await decide(api, activationData: nil).reason == "card_unknown")
            try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            #expect(try await decide(api, expiration: "11/29", activationData: nil).reason == "expiration_mismatch")
            #expect(try await decide(api, activationData: nil).decision == .requireAdditionalAuthentication)
            _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            #expect(try await decide(api, activationData: nil).reason == "card_blocked")
            _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .closed))
            #expect(try await decide(api, activationData: nil).reason == "card_closed")
            try await api.putCard("c2", user: "alice", pan: "5555555555554444", expiration: "08/26")
            let expired = try await decide(api, pan: "5555555555554444", expiration: "08/26", activationData: nil)
            #expect(expired.decision == .declined && expired.reason == "card_expired")
        }
    }

    @Test func aRetriedDecisionGetsItsAnswerAgainAndAReplayUnderAnotherRequestIdDoesNot() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let data = try await activationData(api)
            let first = try await decide(api, activationData: data, request: "r-1")
            #expect(first.decision == .approved && first.reason == "activation_data_valid")
            let recorded = try #require(try await platform.store.tokenizationDecision(requestId: "r-1"))
            // The token service did not get the answer and asks again: the same answer.
            let retry = try await decide(api, activationData: data, request: "r-1")
            #expect(retry.decision == first.decision && retry.reason == first.reason && retry.panUniqueReference == first.panUniqueReference)
            // The same activation data under another request id is a replay.
            #expect(try await decide(api, activationData: data, request: "r-2").reason == "activation_data_replayed")
            #expect(try await decide(api, activationData: data, request: "r-2").reason == "activation_data_replayed")
            // The retry is not a second decision: r-1's record is the first one, unchanged; the
            // replays are each recorded as declined.
            #expect(try await platform.store.tokenizationDecision(requestId: "r-1") == recorded)
            let card = try #require(try await platform.store.card(externalCardId: "c1"))
            let latest = try await platform.store.latestTokenizationDecision(panUniqueReference: card.panUniqueReference, deviceType: .phone)
            #expect(latest?.requestId == "r-2" && latest?.reason == "activation_data_replayed")
        }
    }

    @Test(arguments: [(ActivationPolicy.immediate, TokenizationDecision.approved), (.inApp, .requireAdditionalAuthentication)])
    func aRetryAfterTheActivationDataExpiredGetsTheRecordedAnswer(policy: ActivationPolicy, expected: TokenizationDecision) async throws {
        let platform = try await TestPlatform(policy: policy)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let data = try await activationData(api)
            platform.advance(595)
            let decidedAt = platform.clock.current
            let first = try await decide(api, activationData: data, request: "r-1")
            #expect(first.decision == expected)
            // The answer was lost; the token service asks again once the data has expired.
            platform.advance(10)
            let retry = try await decide(api, activationData: data, request: "r-1")
            #expect(retry.decision == first.decision && retry.reason == first.reason && retry.panUniqueReference == first.panUniqueReference)
            // Answered from the record, not recorded again (a newer copy would become the
            // newest decision a later token's authorization path is taken from).
            let pur = try #require(first.panUniqueReference)
            #expect(try await platform.store.latestTokenizationDecision(panUniqueReference: pur, deviceType: .phone)?.decidedAt == decidedAt)
            // Nothing else rides on it: another request id, or the same one for another device.
            #expect(try await decide(api, activationData: data, request: "r-2").reason == "activation_data_expired")
            #expect(try await decide(api, activationData: data, device: .watch, request: "r-1").reason == "activation_data_expired")
            // Not for a card given to another user since (the check valid data gets), and only
            // within the retry window after the data expired.
            try await api.putCard("c1", user: "bob")
            #expect(try await decide(api, activationData: data, request: "r-1").reason == "activation_data_owner_changed")
            try await api.putCard("c1", user: "alice")
            #expect(try await decide(api, activationData: data, request: "r-1").decision == expected)
            platform.advance(TSPService.retryWindowAfterExpiry)
            #expect(try await decide(api, activationData: data, request: "r-1").reason == "activation_data_expired")
            // Still a decline for a card blocked since.
            _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            #expect(try await decide(api, activationData: data, request: "r-1").reason == "card_blocked")
        }
    }

    @Test func aRequestIdRetriedForAnotherDeviceIsAReplay() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let data = try await activationData(api)
            #expect(try await decide(api, activationData: data, request: "r-1").decision == .approved)
            let otherDevice = try await decide(api, activationData: data, device: .watch, request: "r-1")
            #expect(otherDevice.decision == .declined && otherDevice.reason == "activation_data_replayed")
        }
    }

    @Test func activationDataSignedWithAPublishedKeyButNotAsIssuedIsUnknown() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            let issuer = ActivationDataIssuer(signingKey: platform.activationKey)
            let now = platform.clock.current
            // A fresh id no seal recorded.
            let invented = try issuer.issue(panUniqueReference: card.panUniqueReference, nonce: Data([1]), deviceType: .phone, now: now).token
            #expect(try await decide(api, activationData: invented).reason == "activation_data_unknown")
            // A real seal's id with another nonce, or another lifetime, than it was issued with.
            let realNonce = Data("the real nonce".utf8)
            let realToken = String(decoding: try await api.signCard("c1", user: "alice", nonce: realNonce).decode(SignedCardResponse.self).activationData.data, as: UTF8.self)
            let real = ActivationDataVerifier(keys: [platform.activationKey.id: platform.activationKey.privateKey.publicKey])
                .verify(realToken, panUniqueReference: card.panUniqueReference, now: now).claims
            let id = try #require(real?.id)
            let otherNonce = try issuer.issue(panUniqueReference: card.panUniqueReference, nonce: Data("another nonce".utf8), deviceType: .phone, now: now, id: id).token
            #expect(try await decide(api, activationData: otherNonce).reason == "activation_data_unknown")
            let reissued = try issuer.issue(panUniqueReference: card.panUniqueReference, nonce: realNonce, deviceType: .phone, now: now.addingTimeInterval(5), id: id).token
            #expect(try await decide(api, activationData: reissued).reason == "activation_data_unknown")
            // Nothing was used up: the real data still works.
            #expect(try await decide(api, activationData: realToken).reason == "activation_data_valid")
            // Another card's seal, its id, nonce and lifetime, minted anew for this card: the
            // attempt is that card's, so it proves nothing for this one.
            try await api.putCard("c2", user: "alice", pan: "5555555555554444")
            let otherReply = try await api.signCard("c2", user: "alice", nonce: realNonce).decode(SignedCardResponse.self)
            let otherToken = String(decoding: otherReply.activationData.data, as: UTF8.self)
            let other = try #require(ActivationDataVerifier(keys: [platform.activationKey.id: platform.activationKey.privateKey.publicKey]).verify(otherToken, panUniqueReference: nil, now: now).claims)
            let moved = try issuer.issue(panUniqueReference: card.panUniqueReference, nonce: realNonce, deviceType: .phone, now: now, id: other.id).token
            #expect(try await decide(api, activationData: moved).reason == "activation_data_unknown")
        }
    }

    @Test func rotatedActivationKeysSignWithTheNewestAndStillVerifyWhatAnOlderPublishedOneSigned() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        let newest = SigningKey.generate()
        var rotated = platform.environment
        rotated.activationKeys = [newest, platform.activationKey]
        var retired = platform.environment
        retired.activationKeys = [newest]
        func serving(_ environment: PlatformEnvironment, _ body: @escaping @Sendable (APIClient) async throws -> Void) async throws {
            try await platform.secrets.application(environment: environment, now: { [clock = platform.clock] in clock.current }, logger: platform.logger).test(.router) { client in
                try await body(APIClient(client: client, platform: platform))
            }
        }
        let issued = Locked<[String]>([])
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            for _ in 0..<2 {
                let data = try await activationData(api)
                issued.withValue { $0.append(data) }
            }
        }
        let older = issued.current[0]
        let another = issued.current[1]
        try await serving(rotated) { api in
            let set = try await api.send(.get, "/tsp/activation-keys", as: .tsp).decode(JSONWebKeySet.self)
            #expect(set.keys.map(\.kid) == [newest.id, platform.activationKey.id])
            let fresh = try await activationData(api)
            #expect(try CompactJWS.parse(fresh).header.kid == newest.id)
            #expect(try await decide(api, activationData: fresh).reason == "activation_data_valid")
            #expect(try await decide(api, activationData: older).reason == "activation_data_valid")
        }
        try await serving(retired) { api in
            let decision = try await decide(api, activationData: another)
            #expect(decision.reason == "activation_data_unknown_key_id")
        }
    }

    @Test func aRequestIdReusedWithActivationDataAnotherDecisionUsedUpIsAReplay() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let first = try await activationData(api)
            let second = try await activationData(api)
            #expect(try await decide(api, activationData: first, request: "r-1").decision == .approved)
            #expect(try await decide(api, activationData: second, request: "r-2").decision == .approved)
            // r-1 again, but with r-2's activation data: not a retry of r-1, so not r-1's answer.
            let reused = try await decide(api, activationData: second, request: "r-1")
            #expect(reused.decision == .declined && reused.reason == "activation_data_replayed")
            // r-1 with its own activation data is still a retry.
            #expect(try await decide(api, activationData: first, request: "r-1").decision == .approved)
        }
    }

    @Test func aDeclineAfterTheApprovalDoesNotChangeTheNewTokensAuthorizationPath() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            let data = try await activationData(api)
            #expect(try await decide(api, activationData: data, request: "r-1").decision == .approved)
            // A replay of the same activation data is declined before the token is created.
            #expect(try await decide(api, activationData: data, request: "r-2").reason == "activation_data_replayed")
            #expect(try await api.event("T1", pur: card.panUniqueReference, .created).status == .ok)
            #expect(try await platform.store.token(reference: "T1")?.authorizationPath == .green)
        }
    }

    @Test func activationDataIssuedToTheCardsPreviousOwnerIsDeclined() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let alices = try await activationData(api, user: "alice")
            // The issuer gives the card (same PAN, so the same panUniqueReference) to bob.
            try await api.putCard("c1", user: "bob")
            let decision = try await decide(api, activationData: alices)
            #expect(decision.decision == .declined && decision.reason == "activation_data_owner_changed")
            // Bob's own activation data is fine.
            #expect(try await decide(api, activationData: try await activationData(api, user: "bob")).decision == .approved)
        }
    }

    /// The card given to another user (same PAN) after a green decision read it and before the
    /// decision is recorded: decided again on the card as it is now, so declined, and the
    /// activation data is not used up by the approval that was not recorded.
    @Test func aCardHandedOverWhileADecisionIsRecordedIsDecidedAgain() async throws {
        let base = try SQLiteStore.inMemory()
        try await base.migrate()
        let store = FaultyStore(base: base)
        let platform = try TestPlatform(policy: .immediate, store: store, secrets: .init())
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let data = try await activationData(api)
            let handedOver = Locked(false)
            store.aroundDecisionRecord.withValue {
                $0 = (before: {
                    guard !handedOver.withValue({ let was = $0; $0 = true; return was }) else { return }
                    guard var card = try? await base.card(externalCardId: "c1") else { return }
                    card.userId = "bob"
                    _ = try? await base.putCard(card, audit: AuditEntry(at: Date(), actor: "issuer", action: "card.replace", subject: "card:c1", detail: "to bob"))
                }, after: {})
            }
            let decision = try await decide(api, activationData: data, request: "r-handover")
            #expect(decision.decision == .declined && decision.reason == "activation_data_owner_changed")
            #expect(handedOver.current)
            let recorded = try await base.tokenizationDecision(requestId: "r-handover")
            #expect(recorded?.decision == .declined && recorded?.activationDataId == nil, "only the decline is recorded, using nothing up")
        }
    }

    /// A card that changes again while the decision made anew is recorded: declined
    /// (`card_changed_during_decision`), and its activation data still unused.
    @Test func aCardChangingTwiceWhileADecisionIsRecordedDeclinesIt() async throws {
        let base = try SQLiteStore.inMemory()
        try await base.migrate()
        let store = FaultyStore(base: base)
        let platform = try TestPlatform(policy: .immediate, store: store, secrets: .init())
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let data = try await activationData(api)
            let audit = AuditEntry(at: Date(), actor: "issuer", action: "card.status", subject: "card:c1", detail: "test")
            // Blocked just before each record, and active again just after it.
            store.aroundDecisionRecord.withValue {
                $0 = (
                    before: { _ = try? await base.setCardStatus(externalCardId: "c1", status: .blocked, at: Date()) { _ in audit } },
                    after: { _ = try? await base.setCardStatus(externalCardId: "c1", status: .active, at: Date()) { _ in audit } }
                )
            }
            let decision = try await decide(api, activationData: data, request: "r-twice")
            #expect(decision.decision == .declined && decision.reason == "card_changed_during_decision")
            store.aroundDecisionRecord.withValue { $0 = nil }
            #expect(try await decide(api, activationData: data, request: "r-after").decision == .approved, "the activation data was not used up")
        }
    }

    /// The card given to another user (same PAN) after a green decision and before the token
    /// service's CREATED: the token is on the previous owner's device, made with activation
    /// data issued to them, so it is ended at the token service as soon as TMP learns of it;
    /// unconfirmed, its deactivation stays pending (and an ACTIVATED event later ends it too).
    @Test(arguments: [false, true])
    func aTokenMadeForTheCardsPreviousOwnerIsEndedWhenItIsCreated(tokenServiceFails: Bool) async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            #expect(try await decide(api, activationData: try await activationData(api, user: "alice")).decision == .approved)
            try await api.putCard("c1", user: "bob")
            platform.connector.failing.withValue { $0 = tokenServiceFails }
            #expect(try await api.event("T1", pur: card.panUniqueReference, .created).status == .ok)
            let token = try #require(try await platform.store.token(reference: "T1"))
            if tokenServiceFails {
                #expect(token.status == .inactive && token.pendingCommand == .deactivate, "\(token)")
                // Its activation at the token service (the green path) does not make it bob's
                // to use: ended then too, once the token service answers.
                platform.connector.failing.withValue { $0 = false }
                #expect(try await api.event("T1", pur: card.panUniqueReference, .activated).status == .ok)
                #expect(try await platform.store.token(reference: "T1")?.status == .deactivated)
                #expect(platform.connector.commands.current.last == "deactivate T1")
            } else {
                #expect(token.status == .deactivated && token.userId == "bob")
                #expect(platform.connector.commands.current.last == "deactivate T1")
            }
            let trail = try await platform.store.auditEntries(subject: "token:T1")
            #expect(trail.last?.action == "token.deactivated" && trail.last?.detail.hasPrefix("made or activated for the card's previous owner") == true, "\(trail)")
            // Bob's own token is not touched.
            let commands = platform.connector.commands.current.count
            #expect(try await decide(api, activationData: try await activationData(api, user: "bob")).decision == .approved)
            #expect(try await api.event("T2", pur: card.panUniqueReference, .created).status == .ok)
            #expect(try await platform.store.token(reference: "T2")?.pendingCommand == nil)
            #expect(platform.connector.commands.current.count == commands)
        }
    }

    /// An event naming another device than the token's is not this token's (409, nothing
    /// recorded), and a token's last four digits are the first reported: filled in, never replaced.
    @Test func anEventForAnotherDeviceIsRefusedAndTheTokensDigitsAreNotReplaced() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            #expect(try await api.event("T1", pur: card.panUniqueReference, .created, tokenLast4: nil).status == .ok)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .activated, tokenLast4: "1234").status == .ok)
            #expect(try await platform.store.token(reference: "T1")?.tokenLast4 == "1234", "filled in")
            let watch = try await api.event("T1", pur: card.panUniqueReference, .suspended, device: .watch, tokenLast4: "0000")
            #expect(watch.status == .conflict && watch.error?.code == "illegal_token_transition", "\(watch)")
            #expect(watch.error?.message.contains("PHONE") == true && watch.error?.message.contains("WATCH") == true, "\(String(describing: watch.error))")
            #expect(try await platform.store.token(reference: "T1")?.status == .active, "nothing recorded")
            #expect(try await api.event("T1", pur: card.panUniqueReference, .suspended, tokenLast4: "0000").status == .ok)
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.tokenLast4 == "1234", "not replaced")
            // A deactivation is final at the token service whatever device it names.
            #expect(try await api.event("T1", pur: card.panUniqueReference, .deactivated, device: .watch).status == .ok)
            #expect(try await platform.store.token(reference: "T1")?.status == .deactivated)
        }
    }

    /// The hand-over lands while the CREATED is on its way in (after the event's card was read,
    /// before the token is written): judged on the owner as committed, so ended all the same.
    @Test func aCardHandedOverWhileTheCreatedEventIsAppliedStillEndsThePreviousOwnersToken() async throws {
        let base = try SQLiteStore.inMemory()
        try await base.migrate()
        let store = FaultyStore(base: base)
        let platform = try TestPlatform(policy: .immediate, store: store, secrets: .init())
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            #expect(try await decide(api, activationData: try await activationData(api, user: "alice")).decision == .approved)
            store.beforeTokenEvent.withValue {
                $0 = {
                    guard var card = try? await base.card(externalCardId: "c1"), card.userId == "alice" else { return }
                    card.userId = "bob"
                    _ = try? await base.putCard(card, audit: AuditEntry(at: Date(), actor: "issuer", action: "card.replace", subject: "card:c1", detail: "to bob"))
                }
            }
            #expect(try await api.event("T1", pur: card.panUniqueReference, .created).status == .ok)
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .deactivated && token?.userId == "bob", "\(String(describing: token))")
            #expect(platform.connector.commands.current.last == "deactivate T1")
        }
    }

    /// The mark that a token made for the card's previous owner is owed its deactivation is
    /// written in the event's own transaction: with every later write of a token failing, the
    /// CREATED is still APPLIED with the mark and its audit entry, and the realignment or the
    /// next event sends the deactivation. Before, the mark was a second write after the
    /// event's: when it failed the event was APPLIED without it, and nothing ended the token.
    @Test func theDeactivationOwedToAPreviousOwnersTokenIsMarkedWithItsEvent() async throws {
        let base = try SQLiteStore.inMemory()
        try await base.migrate()
        let store = FaultyStore(base: base)
        let platform = try TestPlatform(policy: .immediate, store: store, secrets: .init())
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            #expect(try await decide(api, activationData: try await activationData(api, user: "alice")).decision == .approved)
            try await api.putCard("c1", user: "bob")
            store.tokenUpdateFailure.withValue { $0 = TestFailure("the disk is full") }
            let created = try await api.event("T1", pur: card.panUniqueReference, .created, id: "e-created")
            #expect(created.status == .ok && created.text.contains("APPLIED"), "\(created)")
            let recorded = try #require(try await platform.store.token(reference: "T1"))
            #expect(recorded.userId == "bob" && recorded.pendingCommand == .deactivate, "\(recorded)")
            let trail = try await platform.store.auditEntries(subject: "token:T1").map(\.action)
            #expect(trail.contains("token.pending_command"), "\(trail)")
            store.tokenUpdateFailure.withValue { $0 = nil }
            #expect(try await api.event("T1", pur: card.panUniqueReference, .activated).status == .ok)
            #expect(try await platform.store.token(reference: "T1")?.status == .deactivated)
            #expect(platform.connector.commands.current.last == "deactivate T1")
        }
    }

    /// A token of the card's owner stays the owner's when the issuer renames that user (same
    /// PAN, the card's tokens follow) within the hour its decision reaches: a repeat of its
    /// event is a DUPLICATE and nothing more. (A check of the repeat against the decision's
    /// user, tried first, took the renamed owner for another person and ended the token.)
    @Test func aRepeatedEventLeavesATokenWhoseOwnerWasRenamedAlone() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            #expect(try await decide(api, activationData: try await activationData(api, user: "alice")).decision == .approved)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .created, id: "e-1").status == .ok)
            #expect(try await platform.store.token(reference: "T1")?.pendingCommand == nil)
            platform.advance(600)
            try await api.putCard("c1", user: "alice-2")
            #expect(try await platform.store.token(reference: "T1")?.userId == "alice-2")
            #expect(try await api.event("T1", pur: card.panUniqueReference, .created, id: "e-1").text.contains("DUPLICATE"))
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.pendingCommand == nil && token?.status == .inactive, "\(String(describing: token))")
            #expect(platform.connector.commands.current.isEmpty)
        }
    }

    /// Only a recent decision tells whom a token was made for: the previous owner's decision of
    /// long ago says nothing of a token the new owner added later without one TMP recorded (a
    /// network's stand-in approval), which is left alone.
    @Test func anOldDecisionOfThePreviousOwnerDoesNotEndTheNewOwnersToken() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            #expect(try await decide(api, activationData: try await activationData(api, user: "alice")).decision == .approved)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .created).status == .ok)
            try await api.putCard("c1", user: "bob")
            platform.advance(TSPService.decisionReachForCreation + 60)
            let commands = platform.connector.commands.current
            #expect(try await api.event("T2", pur: card.panUniqueReference, .created).status == .ok)
            let token = try await platform.store.token(reference: "T2")
            #expect(token?.status == .inactive && token?.pendingCommand == nil && token?.userId == "bob", "\(String(describing: token))")
            #expect(platform.connector.commands.current == commands, "nothing sent for it")
        }
    }

    @Test func activationDataIsSingleUseAndBoundToCardAndTimeButNotToTheDeviceAskedFor() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            try await api.putCard("c2", user: "alice", pan: "5555555555554444")
            let data = try await activationData(api)
            #expect(try await decide(api, activationData: data).decision == .approved)
            #expect(try await decide(api, activationData: data).reason == "activation_data_replayed")

            let forC1 = try await activationData(api)
            #expect(try await decide(api, pan: "5555555555554444", activationData: forC1).reason == "activation_data_wrong_card")
            // Asked for the phone, added to the Watch (Wallet's sheet lets the cardholder pick):
            // approved, and used up like any other.
            let pickedWatch = try await decide(api, activationData: forC1, device: .watch)
            #expect(pickedWatch.decision == .approved && pickedWatch.reason == "activation_data_valid")
            #expect(try await decide(api, activationData: forC1, device: .watch).reason == "activation_data_replayed")

            let late = try await activationData(api)
            platform.advance(601)
            #expect(try await decide(api, activationData: late).reason == "activation_data_expired")

            let forged = try ActivationDataIssuer(signingKey: SigningKey.generate()).issue(panUniqueReference: "x", nonce: Data([1]), deviceType: .phone, now: platform.clock.current).token
            #expect(try await decide(api, activationData: forged).reason == "activation_data_unknown_key_id")
            #expect(try await decide(api, activationData: "garbage").reason == "activation_data_malformed")
            // An empty string is activation data too, and not a JWS: declined, not taken for none.
            #expect(try await decide(api, activationData: "").reason == "activation_data_malformed")
        }
    }

    @Test func tokenEventsAreIdempotentByEventIdAndFollowTheStateMachine() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            let created = try await api.event("T1", pur: card.panUniqueReference, .created, id: "e1")
            #expect(try created.decode(TokenEventResponse.self).result == "APPLIED")
            #expect(try await api.tokenStatus("T1") == .inactive)
            let duplicate = try await api.event("T1", pur: card.panUniqueReference, .created, id: "e1")
            #expect(try duplicate.decode(TokenEventResponse.self).result == "DUPLICATE")
            // The eventId is looked at before the card: a repeat naming a reference TMP does not
            // know (the token service's record of the card changed) is still the duplicate.
            let repeatedElsewhere = try await api.event("T1", pur: "PURnope", .created, id: "e1")
            #expect(repeatedElsewhere.status == .ok && (try? repeatedElsewhere.decode(TokenEventResponse.self).result) == "DUPLICATE", "\(repeatedElsewhere.text)")
            // A new CREATED for a reference no card has is 404, and nothing is recorded.
            let noCard = try await api.event("T3", pur: "PURnope", .created, id: "e1-new")
            #expect(noCard.status == .notFound && noCard.error?.code == "card_not_found", "\(noCard.text)")
            #expect(try await api.tokenStatus("T3") == nil)
            #expect(try await api.event("T3", pur: card.panUniqueReference, .created, id: "e1-new").status == .ok, "the refused event's id was not recorded")
            let reused = try await api.event("T2", pur: card.panUniqueReference, .created, id: "e1")
            #expect(reused.status == .conflict)
            #expect(reused.error?.code == "event_id_reused")
            #expect(reused.error?.message.contains("T1") == false)
            #expect(try await api.tokenStatus("T2") == nil)
            // A CREATED for a token TMP holds, under a new id, is old news: acknowledged as
            // STALE. Naming another device, it is not this token's.
            #expect(try Self.result(await api.event("T1", pur: card.panUniqueReference, .created, id: "e2")) == ("STALE", .inactive))
            let otherDevice = try await api.event("T1", pur: card.panUniqueReference, .created, device: .watch, id: "e2w")
            #expect(otherDevice.status == .conflict && otherDevice.error?.message.contains("on a PHONE device, not WATCH") == true, "\(otherDevice.text)")
            let resumeInactive = try await api.event("T1", pur: card.panUniqueReference, .resumed, id: "e3")
            #expect(resumeInactive.status == .conflict)
            // An event naming another card's reference for T1 is not T1's.
            let otherCard = try await api.event("T1", pur: "PURsomeoneelse", .activated, id: "e4x")
            #expect(otherCard.status == .conflict && otherCard.error?.message.contains("another panUniqueReference") == true)
            #expect(try await api.tokenStatus("T1") == .inactive)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .activated, id: "e4").status == .ok)
            // e4 again for another event of T1: not a duplicate, which would lose the suspension.
            let reusedForT1 = try await api.event("T1", pur: card.panUniqueReference, .suspended, id: "e4")
            #expect(reusedForT1.status == .conflict)
            #expect(reusedForT1.error?.code == "event_id_reused")
            #expect(reusedForT1.error?.message.contains("this token's ACTIVATED event") == true)
            #expect(try await api.tokenStatus("T1") == .active)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .activated, id: "e5").status == .ok)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .suspended, id: "e6").status == .ok)
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .tokenService)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .resumed, id: "e7").status == .ok)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .deactivated, id: "e8").status == .ok)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .activated, id: "e9").status == .conflict)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .suspended, id: "e9s").status == .conflict)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .resumed, id: "e9r").status == .conflict)
            #expect(try await api.event("T404", pur: card.panUniqueReference, .activated, id: "e10").status == .notFound)
            #expect(try await api.event("T2", pur: "PURnope", .created, id: "e11").status == .notFound)
            #expect(try await api.tokenStatus("T1") == .deactivated)
            let audit = try await platform.store.auditEntries(subject: "token:T1")
            #expect(audit.count == 6, "\(audit.map(\.detail))")
            #expect(audit.allSatisfy { $0.actor == "tsp" })
        }
    }

    /// An event time `seconds` after a fixed instant.
    static func at(_ seconds: TimeInterval) -> EventTime { EventTime(Date(timeIntervalSince1970: 1_790_000_000 + seconds)) }

    /// A token event's answer: its result and the token's status.
    static func result(_ reply: APIClient.Reply) throws -> (String, TokenStatus) {
        let response = try reply.decode(TokenEventResponse.self)
        return (response.result, response.tokenStatus)
    }

    /// Events that say when they happened are applied in that order, whatever order they
    /// arrive in: one older than an event already applied is acknowledged as STALE.
    @Test func aTokenEventOlderThanOneAlreadyAppliedIsStale() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            let pur = card.panUniqueReference
            #expect(try Self.result(await api.event("T1", pur: pur, .created, id: "e1", occurredAt: Self.at(0))) == ("APPLIED", .inactive))
            #expect(try Self.result(await api.event("T1", pur: pur, .activated, id: "e2", occurredAt: Self.at(1))) == ("APPLIED", .active))
            // Suspended at 3 and resumed at 4, but the suspension arrives last.
            #expect(try Self.result(await api.event("T1", pur: pur, .resumed, id: "e4", occurredAt: Self.at(4))) == ("APPLIED", .active))
            #expect(try Self.result(await api.event("T1", pur: pur, .suspended, id: "e3", occurredAt: Self.at(3))) == ("STALE", .active))
            #expect(try await api.tokenStatus("T1") == .active)
            // A redelivery of the stale event is a duplicate; the same time as the newest applies.
            #expect(try Self.result(await api.event("T1", pur: pur, .suspended, id: "e3", occurredAt: Self.at(3))) == ("DUPLICATE", .active))
            #expect(try Self.result(await api.event("T1", pur: pur, .suspended, id: "e5", occurredAt: Self.at(4))) == ("APPLIED", .suspended))
            // An event that does not say when it happened is applied as it arrives.
            #expect(try Self.result(await api.event("T1", pur: pur, .resumed, id: "e6")) == ("APPLIED", .active))
            #expect(try await platform.store.token(reference: "T1")?.lastEventAt == Self.at(4))
            #expect(try await platform.store.auditEntries(subject: "token:T1").map(\.detail) == ["event e1", "event e2", "event e4", "event e5", "event e6"])
            #expect(platform.logs.current.contains { $0.contains("stale token event acknowledged, not applied") })
        }
    }

    /// An event that happened later but arrives first records the state it reports, even where
    /// the events it overtook were the way there: the overtaken ones are STALE when they come.
    /// (Before, a SUSPENDED overtaking an ACTIVATED was refused, and the late ACTIVATED left
    /// TMP with an active token the network had suspended, proof for another device's green.)
    @Test func anEventThatOvertookTheEventsBeforeItRecordsTheStateItReports() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            let pur = card.panUniqueReference
            // Activated at 1, suspended at 2: the suspension comes first.
            #expect(try Self.result(await api.event("T1", pur: pur, .created, id: "e1", occurredAt: Self.at(0))) == ("APPLIED", .inactive))
            #expect(try Self.result(await api.event("T1", pur: pur, .suspended, id: "e3", occurredAt: Self.at(2))) == ("APPLIED", .suspended))
            #expect(try Self.result(await api.event("T1", pur: pur, .activated, id: "e2", occurredAt: Self.at(1))) == ("STALE", .suspended))
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .tokenService)
            // The suspended token is no proof of the cardholder: the Watch is yellow.
            let watch = try await decide(api, activationData: try await activationData(api, device: .watch), device: .watch)
            #expect(watch.decision == .requireAdditionalAuthentication)

            // Activated, suspended and resumed: the resumption comes first.
            #expect(try Self.result(await api.event("T2", pur: pur, .created, id: "f1", occurredAt: Self.at(0))) == ("APPLIED", .inactive))
            #expect(try Self.result(await api.event("T2", pur: pur, .resumed, id: "f4", occurredAt: Self.at(3))) == ("APPLIED", .active))
            #expect(try Self.result(await api.event("T2", pur: pur, .activated, id: "f2", occurredAt: Self.at(1))) == ("STALE", .active))
            #expect(try Self.result(await api.event("T2", pur: pur, .suspended, id: "f3", occurredAt: Self.at(2))) == ("STALE", .active))

            // Deactivated at 2, its CREATED at 1 comes after: the token is recorded dead.
            #expect(try Self.result(await api.event("T3", pur: pur, .deactivated, id: "g2", occurredAt: Self.at(2))) == ("APPLIED", .deactivated))
            #expect(try Self.result(await api.event("T3", pur: pur, .created, id: "g1", occurredAt: Self.at(1))) == ("STALE", .deactivated))
            let dead = try #require(try await platform.store.token(reference: "T3"))
            #expect(dead.externalCardId == "c1" && dead.userId == "alice" && dead.lastEventAt == Self.at(2))
            // Suspended at 2 before its CREATED: recorded suspended, by the token service.
            #expect(try Self.result(await api.event("T4", pur: pur, .suspended, id: "h2", occurredAt: Self.at(2))) == ("APPLIED", .suspended))
            #expect(try Self.result(await api.event("T4", pur: pur, .created, id: "h1", occurredAt: Self.at(1))) == ("STALE", .suspended))
            #expect(try await platform.store.token(reference: "T4")?.suspendedBy == .tokenService)
            #expect(try await platform.store.auditEntries(subject: "token:T3").map(\.detail) == ["event g2"])

            // The late CREATED brings the token number's last four digits, which the events
            // that overtook it did not carry: they are kept, though the CREATED is STALE.
            #expect(try Self.result(await api.event("T8", pur: pur, .activated, id: "p2", occurredAt: Self.at(2), tokenLast4: nil)) == ("APPLIED", .active))
            #expect(try await platform.store.token(reference: "T8")?.tokenLast4 == nil)
            #expect(try Self.result(await api.event("T8", pur: pur, .created, id: "p1", occurredAt: Self.at(1), tokenLast4: "4321")) == ("STALE", .active))
            #expect(try await platform.store.token(reference: "T8")?.tokenLast4 == "4321")
            #expect(try await platform.store.auditEntries(subject: "token:T8").map(\.detail) == ["event p2", "event p1 (stale: only its tokenLast4 recorded)"])
            // Untimed, it is as late (creation comes first), and as welcome.
            #expect(try Self.result(await api.event("T9", pur: pur, .suspended, id: "q2", occurredAt: Self.at(2), tokenLast4: nil)) == ("APPLIED", .suspended))
            #expect(try Self.result(await api.event("T9", pur: pur, .created, id: "q1", tokenLast4: "5678")) == ("STALE", .suspended))
            #expect(try await platform.store.token(reference: "T9")?.tokenLast4 == "5678")
            // Nor is one naming another device, however old: its digits are not this token's.
            let elsewhere = try await api.event("T9", pur: pur, .created, device: .watch, id: "q0", occurredAt: Self.at(1), tokenLast4: "0000")
            #expect(elsewhere.status == .conflict && elsewhere.error?.code == "illegal_token_transition", "\(elsewhere.text)")
            #expect(try await platform.store.token(reference: "T9")?.tokenLast4 == "5678")
            // A CREATED that says it happened after an event of the token is not its creation.
            let afterwards = try await api.event("T9", pur: pur, .created, id: "q3", occurredAt: Self.at(3))
            #expect(afterwards.status == .conflict && afterwards.error?.code == "illegal_token_transition", "\(afterwards.text)")

            // Without times the order is unknown: the state machine decides, as before.
            #expect(try Self.result(await api.event("T5", pur: pur, .created, id: "k1")) == ("APPLIED", .inactive))
            let untimed = try await api.event("T5", pur: pur, .suspended, id: "k2")
            #expect(untimed.status == .conflict && untimed.error?.code == "illegal_token_transition")
            #expect(try await api.event("T6", pur: pur, .suspended, id: "m1").status == .notFound)
            // A timed event for a card TMP does not know records nothing.
            let noCard = try await api.event("T7", pur: "PURnope", .deactivated, id: "n1", occurredAt: Self.at(2))
            #expect(noCard.status == .notFound && noCard.error?.code == "card_not_found", "\(noCard.text)")
            #expect(try await api.tokenStatus("T7") == nil)
        }
    }

    /// A time more than five minutes ahead of the server's would make every later event STALE.
    /// The token service's ids are stored and shown in clear (a token's reference to its
    /// cardholder and the back office, event and request ids in the audit trail and the
    /// decisions): one holding the number of a card held here, in any spelling, is refused and
    /// nothing is recorded. Only numbers held count, so long numeric references are fine.
    @Test func aTokenServiceIdHoldingTheNumberOfACardHeldIsRefusedAndNothingRecorded() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.putCard("c2", user: "bob", pan: "5555555555554444")
            let held = "must not hold the number of a card this platform holds: ids are stored, logged and returned in clear; use an id of your own"
            for (index, reference) in ["5555555555554444", "DAPL-5555-5555-5555-4444", "T4111111111111111"].enumerated() {
                let created = try await api.event(reference, pur: card.panUniqueReference, .created, id: "e-\(index)")
                #expect(created.status == .badRequest && created.error?.message == "tokenUniqueReference \(held)", "\(reference): \(created.text)")
                #expect(try await platform.store.token(reference: reference) == nil)
                // Nor by a timed event ahead of its CREATED, which would make the token too.
                let ahead = try await api.event(reference, pur: card.panUniqueReference, .activated, id: "e-ahead-\(index)", occurredAt: Self.at(1))
                #expect(ahead.status == .badRequest && ahead.error?.message == "tokenUniqueReference \(held)", "\(reference): \(ahead.text)")
                #expect(try await platform.store.token(reference: reference) == nil)
            }
            let byEventId = try await api.event("T1", pur: card.panUniqueReference, .created, id: "evt_5555_5555_5555_4444")
            #expect(byEventId.status == .badRequest && byEventId.error?.message == "eventId \(held)", "\(byEventId.text)")
            #expect(try await platform.store.token(reference: "T1") == nil)
            // A long numeric reference that holds no card's number is a reference like any other.
            let numeric = try await api.event("DNITHE000000000000012345678901", pur: card.panUniqueReference, .created, id: "e-numeric-40128888888818810")
            #expect(try numeric.decode(TokenEventResponse.self).result == "APPLIED")

            // A decision's request id: the request's own number (a card held too), or another's.
            for (requestId, pan) in [("req-4111111111111111", "4111111111111111"), ("req-5555.5555.5555.4444", "4111111111111111"), ("4111111111111111", "378282246310005")] {
                let reply = try await api.send(.post, "/tsp/tokenization-decisions", as: .tsp, json: TokenizationDecisionRequest(
                    requestId: requestId, primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"), activationData: nil, deviceType: .phone
                ))
                #expect(reply.status == .badRequest && reply.error?.code == "invalid_field", "\(requestId): \(reply.text)")
                #expect(reply.error?.message.hasPrefix("requestId must not hold ") == true, "\(reply.text)")
            }
            #expect(try await platform.store.latestTokenizingDecision(panUniqueReference: card.panUniqueReference, deviceType: .phone) == nil)
            // The card's own number, not held (no card has 3782 8224 6310 005): refused all the same.
            let own = try await api.send(.post, "/tsp/tokenization-decisions", as: .tsp, json: TokenizationDecisionRequest(
                requestId: "r-378282246310005", primaryAccountNumber: try PrimaryAccountNumber("378282246310005"), expiration: try CardExpiration("12/29"), activationData: nil, deviceType: .phone
            ))
            #expect(own.error?.message == "requestId must not hold the card's primaryAccountNumber: ids are stored, logged and returned in clear; use an id of your own", "\(own.text)")
        }
    }

    @Test func anEventFromTheFutureIsRefusedAndNothingIsRecorded() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            let now = platform.clock.current
            let ahead = try await api.event("T1", pur: card.panUniqueReference, .created, id: "e1", occurredAt: EventTime(now.addingTimeInterval(301)))
            #expect(ahead.status == .badRequest)
            #expect(ahead.error?.code == "invalid_field")
            #expect(ahead.error?.message.contains("more than 5 minutes ahead of this server's clock") == true, "\(ahead.text)")
            #expect(try await platform.store.token(reference: "T1") == nil)
            // Within the skew it applies, and the same event id was not used up by the refusal.
            let close = try await api.event("T1", pur: card.panUniqueReference, .created, id: "e1", occurredAt: EventTime(now.addingTimeInterval(299)))
            #expect(try close.decode(TokenEventResponse.self).result == "APPLIED")
        }
    }

    @Test(arguments: ["yesterday", "2026-11-22", "2026-13-01T00:00:00Z", "2026-11-22T11:50:00", ""])
    func anOccurredAtThatIsNotAnRFC3339TimeIsRefused(text: String) async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            let body = #"{"eventId":"e1","tokenUniqueReference":"T1","panUniqueReference":"\#(card.panUniqueReference)","event":"CREATED","walletType":"APPLE_PAY","deviceType":"PHONE","occurredAt":"\#(text)"}"#
            let reply = try await api.send(.post, "/tsp/token-events", as: .tsp, raw: Data(body.utf8))
            #expect(reply.status == .badRequest)
            #expect(reply.text.contains("occurredAt: must be an RFC 3339 time"))
            #expect(try await platform.store.token(reference: "T1") == nil)
        }
    }

    /// The token service created or activated a token after its tokenization was approved,
    /// and the card was closed or blocked in between: TMP corrects the token there at once.
    @Test func aTokenTheCardsStatusForbidsIsCorrectedAtTheTokenService() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let closed = try await api.putCard("closed", user: "alice")
            _ = try await api.send(.patch, "/lifecycle/cards/closed", as: .issuer, json: CardStatusChangeRequest(status: .closed))
            let created = try await api.event("T-CLOSED", pur: closed.panUniqueReference, .created).decode(TokenEventResponse.self)
            #expect(created.result == "APPLIED" && created.tokenStatus == .deactivated)
            #expect(try await api.tokenStatus("T-CLOSED") == .deactivated)

            let blocked = try await api.putCard("blocked", user: "alice", pan: "5555555555554444")
            _ = try await api.send(.patch, "/lifecycle/cards/blocked", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            // Created inactive: nothing to correct; activated: suspended for the block.
            #expect(try await api.event("T-BLOCKED", pur: blocked.panUniqueReference, .created).decode(TokenEventResponse.self).tokenStatus == .inactive)
            let activated = try await api.event("T-BLOCKED", pur: blocked.panUniqueReference, .activated).decode(TokenEventResponse.self)
            #expect(activated.tokenStatus == .suspended)
            #expect(try await platform.store.token(reference: "T-BLOCKED")?.suspendedBy == .cardBlocked)
            #expect(platform.connector.commands.current == ["deactivate T-CLOSED", "suspend T-BLOCKED"])

            // Unblocking resumes it like any token the block suspended.
            let unblock = try await api.send(.patch, "/lifecycle/cards/blocked", as: .issuer, json: CardStatusChangeRequest(status: .active)).decode(LifecycleService.StatusChange.self)
            #expect(unblock.tokens.map(\.result) == ["RESUMED"])
            // A suspension the token service reports for an active card is its own and stays.
            #expect(try await api.event("T-BLOCKED", pur: blocked.panUniqueReference, .suspended).decode(TokenEventResponse.self).tokenStatus == .suspended)
            #expect(try await platform.store.token(reference: "T-BLOCKED")?.suspendedBy == .tokenService)
            #expect(platform.connector.commands.current == ["deactivate T-CLOSED", "suspend T-BLOCKED", "resume T-BLOCKED"])
        }
    }

    @Test func aCorrectionTheTokenServiceMissesLeavesTheTokenAsItHoldsItAndIsLogged() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            _ = try await api.event("T1", pur: card.panUniqueReference, .created)
            platform.connector.failing.withValue { $0 = true }
            let activated = try await api.event("T1", pur: card.panUniqueReference, .activated)
            #expect(activated.status == .ok)
            #expect(try activated.decode(TokenEventResponse.self).tokenStatus == .active)
            #expect(try await api.tokenStatus("T1") == .active)
            #expect(platform.logs.current.contains { $0.contains("did not confirm correcting") })
            // The same block again suspends it.
            platform.connector.failing.withValue { $0 = false }
            let again = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked)).decode(LifecycleService.StatusChange.self)
            #expect(again.tokens.map(\.result) == ["SUSPENDED"])
        }
    }

    /// The token service sends an event again when it had no answer. The correction the first
    /// delivery owed, and the token service did not confirm, is owed to the repeat too, which
    /// is a duplicate but no reason to leave a blocked card's token paying until the next
    /// realignment (or for ever, with the realignment turned off).
    @Test func aRepeatedEventRunsTheCorrectionItsFirstDeliveryDidNotGetConfirmed() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            _ = try await api.event("T1", pur: card.panUniqueReference, .created, id: "e1")
            platform.connector.failing.withValue { $0 = true }
            #expect(try await api.event("T1", pur: card.panUniqueReference, .activated, id: "e2").decode(TokenEventResponse.self).tokenStatus == .active)
            platform.connector.failing.withValue { $0 = false }
            let repeated = try await api.event("T1", pur: card.panUniqueReference, .activated, id: "e2").decode(TokenEventResponse.self)
            #expect(repeated.result == "DUPLICATE")
            #expect(repeated.tokenStatus == .suspended)
            #expect(platform.connector.commands.current == ["suspend T1"])
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .cardBlocked)
            // A repeat owing nothing sends nothing.
            let again = try await api.event("T1", pur: card.panUniqueReference, .activated, id: "e2").decode(TokenEventResponse.self)
            #expect(again.result == "DUPLICATE" && again.tokenStatus == .suspended)
            #expect(platform.connector.commands.current == ["suspend T1"])
        }
    }

    /// A repeat that comes while the first delivery's correction is still with the token
    /// service (why it came again) leaves the correction to it, rather than send another.
    @Test func aRepeatedEventLeavesTheCorrectionUnderWayToItsFirstDelivery() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            _ = try await api.event("T1", pur: card.panUniqueReference, .created, id: "e1")
            let repeated = Locked<TokenEventResponse?>(nil)
            let sent = Locked(false)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                let first = sent.withValue { sent in
                    defer { sent = true }
                    return !sent
                }
                guard command == "suspend", first else { return }
                let reply = try await api.event("T1", pur: card.panUniqueReference, .activated, id: "e2").decode(TokenEventResponse.self)
                repeated.withValue { $0 = reply }
            } }
            let first = try await api.event("T1", pur: card.panUniqueReference, .activated, id: "e2").decode(TokenEventResponse.self)
            #expect(first.result == "APPLIED" && first.tokenStatus == .suspended)
            let second = try #require(repeated.current)
            #expect(second.result == "DUPLICATE" && second.tokenStatus == .active)
            #expect(platform.connector.commands.current == ["suspend T1"])
        }
    }

    @Test func publishesTheActivationKeysAsJWKS() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let set = try await api.send(.get, "/tsp/activation-keys", as: .tsp).decode(JSONWebKeySet.self)
            #expect(set.keys.map(\.kid) == [platform.activationKey.id])
            #expect(set.p256KeysByID[platform.activationKey.id]?.rawRepresentation == platform.activationKey.privateKey.publicKey.rawRepresentation)
        }
    }
}
