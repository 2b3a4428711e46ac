import Foundation
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import TestSupport
import Testing
import TokenPlatform

@Suite("Lifecycle API")
struct LifecycleRouteTests {
    @Test func putCreatesThenReplacesAndNeverReturnsThePAN() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let body = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold")
            let created = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, json: body)
            #expect(created.status == .created)
            let card = try created.decode(CardResource.self)
            #expect(card.panLast4 == "1111" && card.status == .active && card.panUniqueReference.hasPrefix("PUR"))
            #expect(!created.text.contains("4111111111111111"))
            let replaced = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, json: body)
            #expect(replaced.status == .ok)
            #expect(try replaced.decode(CardResource.self).panUniqueReference == card.panUniqueReference)
            let read = try await api.send(.get, "/lifecycle/cards/c1", as: .issuer)
            #expect(try read.decode(CardResource.self) == card)
            #expect(!read.text.contains("4111111111111111"))
        }
    }

    @Test func replacingThePANDeactivatesTheOldTokens() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let original = try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            try await api.provision("c1", user: "alice", token: "TOK-1")
            let replaced = try await api.putCard("c1", user: "alice", pan: "5555555555554444")
            #expect(replaced.panUniqueReference != original.panUniqueReference)
            #expect(try await api.tokenStatus("TOK-1") == .deactivated)
            #expect(platform.connector.commands.current == ["deactivate TOK-1"])
            // Audited as every confirmed deactivation is.
            let trail = try await platform.store.auditEntries(subject: "token:TOK-1")
            #expect(trail.last?.action == "token.deactivated" && trail.last?.detail == "card PAN replaced", "\(trail)")
            let unchanged = try await api.putCard("c1", user: "alice", pan: "5555555555554444", name: "Alice B")
            #expect(unchanged.panUniqueReference == replaced.panUniqueReference)
        }
    }

    @Test func aPANReplacementThatTheTokenServicePartlyRefusesReplacesNothingAndCanBeRetried() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let original = try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            for reference in ["T1", "T2", "T3"] { try await api.provision("c1", user: "alice", token: reference) }
            let before = try await api.tokenStatus("T2")
            #expect(before != .deactivated)
            platform.connector.meanwhile.withValue { $0 = { command, token in
                if command == "deactivate", token.tokenUniqueReference == "T2" { throw URLError(.timedOut) }
            } }
            let body = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("5555555555554444"), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .mastercard, productTitle: "Gold")
            let refused = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, json: body)
            #expect(refused.status == .serviceUnavailable)
            #expect(refused.error?.code == "token_service_unavailable")
            #expect(refused.error?.message == "replacing the PAN of card c1 needs the token service to deactivate its 3 live tokens, and 1 did not answer; those that did are deactivated, the card was not replaced, try again")
            #expect(try await api.tokenStatus("T1") == .deactivated)
            #expect(try await api.tokenStatus("T2") == before)
            #expect(try await api.tokenStatus("T3") == .deactivated)
            #expect(try await platform.store.card(externalCardId: "c1")?.panUniqueReference == original.panUniqueReference)
            // Once the token service answers, the same request goes through.
            platform.connector.meanwhile.withValue { $0 = nil }
            let replaced = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, json: body)
            #expect(replaced.status == .ok)
            #expect(try replaced.decode(CardResource.self).panUniqueReference != original.panUniqueReference)
            #expect(try await api.tokenStatus("T2") == .deactivated)
        }
    }

    /// A card stored under an id holding a card number (before the id rule) is named
    /// redacted in the refusal of its PAN's replacement, as in every other message.
    @Test func aPANReplacementRefusalNamesALegacyCardIdRedacted() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let id = "4111----1111----1111----1111"
            let pan = try PrimaryAccountNumber("4111111111111111")
            let vault = platform.environment.vault
            let now = platform.clock.current
            let card = CardRecord(
                externalCardId: id, userId: "alice", encryptedPAN: try vault.encrypt(pan, cardID: id).serialized, panLookupHash: vault.lookupHash(pan),
                panLast4: pan.last4, panUniqueReference: "PUR-LEGACY", expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa,
                productTitle: "Gold", artId: nil, status: .active, createdAt: now, updatedAt: now
            )
            _ = try await platform.store.putCard(card, audit: AuditEntry(at: now, actor: "test", action: "card.create", subject: "card:\(id)", detail: ""))
            let token = TokenRecord(
                tokenUniqueReference: "T1", externalCardId: id, panUniqueReference: "PUR-LEGACY", userId: "alice", deviceType: .phone, status: .active,
                authorizationPath: .green, suspendedBy: nil, tokenLast4: nil, createdAt: now, updatedAt: now
            )
            _ = try await platform.store.applyTokenEvent(eventId: "e1", event: .created, tokenReference: "T1", audit: AuditEntry(at: now, actor: "test", action: "token.create", subject: "token:T1", detail: "")) { _, _ in .insert(token) }
            platform.connector.meanwhile.withValue { $0 = { command, _ in if command == "deactivate" { throw URLError(.timedOut) } } }
            let body = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("5555555555554444"), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .mastercard, productTitle: "Gold")
            let refused = try await api.send(.put, "/lifecycle/cards/\(id)", as: .issuer, json: body)
            #expect(refused.status == .serviceUnavailable, "\(refused.text)")
            let message = try #require(refused.error?.message)
            #expect(message.hasPrefix("replacing the PAN of card ") && message.contains("needs the token service to deactivate its 1 live tokens"), "\(message)")
            #expect(!message.contains("4111") && !refused.text.contains("4111"), "\(refused.text)")
        }
    }

    @Test func aPANCanBelongToOneCardOnly() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            let body = CardUpsertRequest(userId: "bob", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"), cardholderName: "Bob", network: .visa, productTitle: "Gold")
            let reply = try await api.send(.put, "/lifecycle/cards/c2", as: .issuer, json: body)
            #expect(reply.status == .conflict)
            #expect(reply.error?.code == "duplicate_pan")
            #expect(try await platform.store.card(externalCardId: "c2") == nil)
        }
    }

    @Test func anExistingCardGivenAnotherCardsPANIsRefusedBeforeItsTokensAreTouched() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let original = try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            try await api.provision("c1", user: "alice", token: "T1")
            try await api.putCard("c2", user: "bob", pan: "5555555555554444", network: .mastercard)
            let body = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("5555555555554444"), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .mastercard, productTitle: "Gold")
            let reply = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, json: body)
            #expect(reply.status == .conflict)
            #expect(reply.error?.code == "duplicate_pan")
            #expect(reply.error?.message == "card c2 already has this primaryAccountNumber")
            #expect(platform.connector.commands.current.filter { $0.hasPrefix("deactivate") }.isEmpty)
            #expect(try await api.tokenStatus("T1") == .active)
            #expect(try await platform.store.card(externalCardId: "c1")?.panUniqueReference == original.panUniqueReference)
            #expect(try await platform.store.auditEntries(subject: "token:T1").allSatisfy { $0.action != "token.deactivated" })
        }
    }

    @Test func anOwnerChangeKeepsTheTokensAndIsInTheAuditTrail() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            try await api.putCard("c1", user: "bob")
            #expect(try await api.tokenStatus("T1") == .active)
            #expect(try await platform.store.token(reference: "T1")?.userId == "bob")
            let trail = try await platform.store.auditEntries(subject: "card:c1").map(\.detail)
            #expect(trail.contains("pan •••• 1111; owner changed from alice to bob"), "\(trail)")
        }
    }

    @Test func theAuditTrailSaysWhatEachPUTDidToTheStoredCard() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.putCard("c1", user: "alice")
            try await api.putCard("c1", user: "alice", pan: "5555555555554444", network: .mastercard)
            let trail = try await platform.store.auditEntries(subject: "card:c1").map { "\($0.action): \($0.detail)" }
            #expect(trail == ["card.create: pan •••• 1111", "card.replace: pan •••• 1111", "card.replace: pan changed to •••• 4444"])
        }
    }

    @Test func twoFirstPUTsOfOneCardRacingRecordOneCreationAndOneReplacement() async throws {
        // Both read no card before either writes, so each would call itself the creation.
        let store = FaultyStore(base: try await TestTMP.memoryStore())
        let platform = try TestPlatform(policy: .immediate, store: store, secrets: .init())
        let gate = AsyncGate()
        store.beforeCardRead.withValue { $0 = { await gate.wait() } }
        try await platform.run { api in
            async let first = api.putCard("c1", user: "alice")
            async let second = api.putCard("c1", user: "bob")
            await gate.waitForArrivals(2)
            store.beforeCardRead.withValue { $0 = nil }
            gate.open()
            _ = try await (first, second)
            let trail = try await platform.store.auditEntries(subject: "card:c1").map { "\($0.action): \($0.detail)" }
            #expect(trail.count == 2, "\(trail)")
            #expect(trail.first == "card.create: pan •••• 1111", "\(trail)")
            #expect(trail.last?.hasPrefix("card.replace: pan •••• 1111; owner changed from ") == true, "\(trail)")
        }
    }

    @Test func blockSuspendsUnblockResumesOnlyWhatTheBlockSuspendedAndCloseDeactivates() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", device: .phone, token: "PHONE-1")
            try await api.provision("c1", user: "alice", device: .watch, token: "WATCH-1")
            #expect(try await api.tokenStatus("PHONE-1") == .active)
            #expect(try await api.tokenStatus("WATCH-1") == .active)

            // Customer service suspends the watch token first; the block must not "own" it.
            #expect(try await api.send(.post, "/lifecycle/tokens/WATCH-1/suspend", as: .issuer).status == .ok)

            let block = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked)).decode(LifecycleService.StatusChange.self)
            #expect(block.card.status == .blocked)
            #expect(block.tokens.map(\.result) == ["SUSPENDED"])
            #expect(try await platform.store.token(reference: "PHONE-1")?.suspendedBy == .cardBlocked)

            let unblock = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .active)).decode(LifecycleService.StatusChange.self)
            #expect(unblock.tokens.map(\.tokenUniqueReference) == ["PHONE-1"])
            #expect(try await api.tokenStatus("PHONE-1") == .active)
            #expect(try await api.tokenStatus("WATCH-1") == .suspended)

            let close = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .closed)).decode(LifecycleService.StatusChange.self)
            #expect(Set(close.tokens.map(\.result)) == ["DEACTIVATED"])
            #expect(try await api.tokenStatus("PHONE-1") == .deactivated)
            #expect(try await api.tokenStatus("WATCH-1") == .deactivated)

            let reopen = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .active))
            #expect(reopen.status == .conflict)
            let commands = platform.connector.commands.current
            #expect(commands.prefix(3) == ["suspend WATCH-1", "suspend PHONE-1", "resume PHONE-1"])
            // A card's token commands run concurrently: in any order.
            #expect(Set(commands.dropFirst(3)) == ["deactivate PHONE-1", "deactivate WATCH-1"] && commands.count == 5)
            let audit = try await platform.store.auditEntries(subject: "token:PHONE-1").map(\.action)
            #expect(audit.contains("token.suspended") && audit.contains("token.active") && audit.contains("token.deactivated"))
        }
    }

    /// An unblock overtaken by a new block: the token service resumed the token, so it is
    /// suspended there again (a blocked card keeps no token that pays). When the token service
    /// does not confirm that, TMP records the token as active (as the token service holds it)
    /// and the same PATCH to BLOCKED repairs it.
    @Test(arguments: [true, false])
    func anUnblockOvertakenByANewBlockSuspendsTheTokenAgainAtTheTokenService(undoConfirmed: Bool) async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .cardBlocked)
            // The card is blocked again while the token service resumes the token (and then,
            // in one case, the token service stops answering).
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "resume" else { return }
                _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
                if !undoConfirmed { platform.connector.failing.withValue { $0 = true } }
            } }
            let unblock = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .active)).decode(LifecycleService.StatusChange.self)
            #expect(try await platform.store.card(externalCardId: "c1")?.status == .blocked)
            #expect(platform.connector.commands.current == ["suspend T1", "resume T1"] + (undoConfirmed ? ["suspend T1"] : []))
            if undoConfirmed {
                #expect(unblock.tokens.map(\.result) == ["UNCHANGED"])
                #expect(unblock.tokens.map(\.status) == [.suspended])
            } else {
                #expect(unblock.tokens.map(\.result) == ["FAILED"])
                #expect(unblock.tokens.map(\.status) == [.active])
                #expect(try await api.tokenStatus("T1") == .active)
                #expect(platform.logs.current.contains { $0.contains("did not confirm correcting") })
                platform.connector.failing.withValue { $0 = false }
                platform.connector.meanwhile.withValue { $0 = nil }
                let again = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked)).decode(LifecycleService.StatusChange.self)
                #expect(again.tokens.map(\.result) == ["SUSPENDED"])
                #expect(platform.connector.commands.current == ["suspend T1", "resume T1", "suspend T1"])
            }
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .cardBlocked)
        }
    }

    @Test func aBlockOvertakenByAnUnblockResumesTheTokenAgainAtTheTokenService() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            // The card is unblocked while the token service suspends the token for the block.
            api.meanwhile("suspend", setCard: "c1", to: .active)
            let block = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked)).decode(LifecycleService.StatusChange.self)
            #expect(block.tokens.map(\.result) == ["UNCHANGED"])
            #expect(block.tokens.map(\.status) == [.active])
            #expect(try await platform.store.card(externalCardId: "c1")?.status == .active)
            #expect(try await api.tokenStatus("T1") == .active)
            #expect(platform.connector.commands.current == ["suspend T1", "resume T1"])
        }
    }

    /// A customer-service command the card's status overtakes while it is with the token
    /// service is a conflict, not an outage: a suspend outgrown by a close (the token was
    /// deactivated meanwhile), and a resume overtaken by a block (undone at the token service,
    /// and the token recorded suspended by the block: customer service asked for it to be
    /// resumed, so unblocking the card resumes it).
    @Test(arguments: [
        (LifecycleService.TokenAction.suspend, CardStatus.closed, "illegal_token_transition", TokenStatus.deactivated, ["suspend T1", "deactivate T1"]),
        (.resume, .blocked, "card_not_active", .suspended, ["suspend T1", "resume T1", "suspend T1"]),
    ])
    func aCustomerServiceCommandOvertakenByTheCardIsAConflict(action: LifecycleService.TokenAction, cardBecomes: CardStatus, code: String, ends: TokenStatus, commands: [String]) async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            if action == .resume {
                #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            }
            api.meanwhile(action.rawValue, setCard: "c1", to: cardBecomes)
            let reply = try await api.send(.post, "/lifecycle/tokens/T1/\(action.rawValue)", as: .issuer)
            #expect(reply.status == .conflict)
            #expect(reply.error?.code == code)
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == ends)
            if ends == .suspended { #expect(token?.suspendedBy == .cardBlocked) }
            #expect(platform.connector.commands.current == commands)
        }
    }

    @Test func aCloseRacingReopeningsLeavesTheCardClosedWithItsTokensDeactivated() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        let pans = ["4111111111111111", "5555555555554444", "378282246310005", "6011111111111117", "4012888888881881"]
        try await platform.run { api in
            for (round, pan) in pans.enumerated() {
                let id = "race-\(round)"
                try await api.putCard(id, user: "alice", pan: pan)
                try await api.provision(id, user: "alice", pan: pan, token: "\(id)-T1")
                let statuses: [CardStatus] = [.active, .blocked, .closed, .active, .blocked]
                let replies = try await withThrowingTaskGroup(of: (CardStatus, APIClient.Reply).self) { group in
                    for status in statuses {
                        group.addTask { (status, try await api.send(.patch, "/lifecycle/cards/\(id)", as: .issuer, json: CardStatusChangeRequest(status: status))) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                for (status, reply) in replies {
                    // Closing always succeeds; any other change succeeds before it or is refused after it.
                    #expect(reply.status == .ok || (status != .closed && reply.status == .conflict && reply.error?.code == "card_closed"), "\(status): \(reply.status) \(reply.text)")
                }
                #expect(try await platform.store.card(externalCardId: id)?.status == .closed)
                #expect(try await api.tokenStatus("\(id)-T1") == .deactivated)
                let trail = try await platform.store.auditEntries(subject: "card:\(id)").filter { $0.action == "card.status" }.map(\.detail)
                let (end, illegal) = TMPStoreContractTests.replayCardStatus(trail)
                #expect(illegal.isEmpty && end == CardStatus.closed.rawValue, "\(trail)")
                // One entry per change: a PATCH that found the card in its status already (an
                // ACTIVE before any other) answers 200 and records nothing.
                #expect(!trail.isEmpty && trail.count <= replies.filter { $0.1.status == .ok }.count, "\(trail)")
            }
        }
    }

    /// Card c1 of alice with an active token `token` (the policy must be immediate), changed
    /// to `status` while the token service does not answer: the token's command is FAILED. The
    /// token service answers again afterwards.
    static func statusChangeTheTokenServiceMisses(_ api: APIClient, _ platform: TestPlatform, token: String, to status: CardStatus) async throws {
        try await api.putCard("c1", user: "alice")
        try await api.provision("c1", user: "alice", token: token)
        platform.connector.failing.withValue { $0 = true }
        let change = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: status)).decode(LifecycleService.StatusChange.self)
        #expect(change.tokens.map(\.result) == ["FAILED"])
        platform.connector.failing.withValue { $0 = false }
    }

    @Test func aBlockTheTokenServiceMissesReportsFailedAndCanBeRetried() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await Self.statusChangeTheTokenServiceMisses(api, platform, token: "PHONE-1", to: .blocked)
            #expect(try await api.tokenStatus("PHONE-1") == .active)
            let retry = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked)).decode(LifecycleService.StatusChange.self)
            #expect(retry.tokens.map(\.result) == ["SUSPENDED"])
        }
    }

    @Test func anEchoThatOvertakesTheCommandKeepsTMPsReasonAndAnswer() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "PHONE-1")
            // The token service reports each change before TMP's own call returns.
            let tsp = TSPService(environment: platform.environment)
            let echoes: [String: TokenEventType] = ["suspend": .suspended, "resume": .resumed]
            platform.connector.meanwhile.withValue {
                $0 = { command, token in
                    guard let type = echoes[command] else { return }
                    _ = try await tsp.apply(TokenEventRequest(eventId: "echo-\(command)", tokenUniqueReference: token.tokenUniqueReference, panUniqueReference: card.panUniqueReference, event: type, deviceType: .phone))
                }
            }
            let block = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked)).decode(LifecycleService.StatusChange.self)
            #expect(block.tokens.map(\.result) == ["SUSPENDED"])
            #expect(try await platform.store.token(reference: "PHONE-1")?.suspendedBy == .cardBlocked)
            let unblock = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .active)).decode(LifecycleService.StatusChange.self)
            #expect(unblock.tokens.map(\.result) == ["RESUMED"])
            #expect(try await api.tokenStatus("PHONE-1") == .active)
            let actors = try await platform.store.auditEntries(subject: "token:PHONE-1").map { "\($0.actor) \($0.action)" }
            // The echoes recorded each change, with the block's reason (the card was blocked
            // when the suspension arrived); TMP's confirmed commands found them recorded and
            // wrote nothing twice.
            #expect(actors.suffix(2) == ["tsp token.event.suspended", "tsp token.event.resumed"])
            #expect(actors.count == 4, "\(actors)")
        }
    }

    /// Customer service suspending a token the block suspended takes the suspension over:
    /// unblocking leaves it suspended, and only customer service's resume lifts it. The token
    /// service is asked (it may not hold the token suspended), and for it the command is done.
    @Test func customerServiceTakesOverTheBlocksSuspensionSoUnblockingKeepsItSuspended() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", device: .phone, token: "PHONE-1")
            try await api.provision("c1", user: "alice", device: .watch, token: "WATCH-1")
            _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            #expect(try await platform.store.token(reference: "WATCH-1")?.suspendedBy == .cardBlocked)

            let takeOver = try await api.send(.post, "/lifecycle/tokens/WATCH-1/suspend", as: .issuer)
            #expect(takeOver.status == .ok, "\(takeOver.text)")
            #expect(try takeOver.decode(TokenResource.self).status == .suspended)
            #expect(try await platform.store.token(reference: "WATCH-1")?.suspendedBy == .customerService)
            let trail = try await platform.store.auditEntries(subject: "token:WATCH-1")
            #expect(trail.last?.actor == "issuer" && trail.last?.action == "token.suspended" && trail.last?.detail.contains("suspended by CARD_BLOCKED") == true, "\(trail)")
            // Suspending it again is the state machine's 409, as for any customer-service suspension.
            let again = try await api.send(.post, "/lifecycle/tokens/WATCH-1/suspend", as: .issuer)
            #expect(again.status == .conflict && again.error?.message.contains("SUSPENDED") == true)

            let unblock = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .active)).decode(LifecycleService.StatusChange.self)
            #expect(unblock.tokens.map(\.tokenUniqueReference) == ["PHONE-1"])
            #expect(try await api.tokenStatus("PHONE-1") == .active)
            #expect(try await api.tokenStatus("WATCH-1") == .suspended)
            #expect(try await api.send(.post, "/lifecycle/tokens/WATCH-1/resume", as: .issuer).status == .ok)
            #expect(try await api.tokenStatus("WATCH-1") == .active)
            // The block's two suspensions (in either order), the take-over's, the unblock's
            // resume, customer service's resume.
            let commands = platform.connector.commands.current
            #expect(commands.count == 5 && Set(commands.prefix(2)) == ["suspend PHONE-1", "suspend WATCH-1"] && commands.suffix(3) == ["suspend WATCH-1", "resume PHONE-1", "resume WATCH-1"], "\(commands)")
        }
    }

    /// A resumption the token service carried out without TMP hearing so (its answer lost)
    /// leaves TMP recording the token suspended while it pays. Customer service's suspension
    /// of it then reaches the token service: recorded from TMP's word alone, it was answered
    /// 200 while the token stayed active, and nothing ever sent the suspension.
    @Test func takingOverASuspensionAsksTheTokenServiceWhichMayHoldTheTokenActive() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", device: .watch, token: "WATCH-1")
            _ = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            // The unblock's resume is carried out, and its answer lost.
            platform.connector.meanwhile.withValue { $0 = { command, _ in if command == "resume" { throw URLError(.timedOut) } } }
            let unblock = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .active)).decode(LifecycleService.StatusChange.self)
            #expect(unblock.tokens.map(\.result) == ["FAILED"])
            #expect(try await platform.store.token(reference: "WATCH-1")?.suspendedBy == .cardBlocked)
            platform.connector.meanwhile.withValue { $0 = nil }

            let suspend = try await api.send(.post, "/lifecycle/tokens/WATCH-1/suspend", as: .issuer)
            #expect(suspend.status == .ok, "\(suspend.text)")
            #expect(platform.connector.commands.current.last == "suspend WATCH-1", "\(platform.connector.commands.current)")
            #expect(try await platform.store.token(reference: "WATCH-1")?.suspendedBy == .customerService)
        }
    }

    /// Taking over a suspension the token service still owes (TMP records the token suspended,
    /// the suspension is pending) sends the suspension rather than skipping it: the pending
    /// command must not be dropped unsent. Unconfirmed, it stays pending and the answer is 503.
    @Test func takingOverASuspensionStillOwedSendsIt() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            let audit = AuditEntry(at: Date(), actor: "test", action: "test", subject: "token:T1", detail: "")
            _ = try await platform.store.updateToken(reference: "T1", audit: audit) { _, _ in .set(.suspended, suspendedBy: .tokenService) }
            _ = try await platform.store.updateToken(reference: "T1", audit: audit) { _, _ in .setPending(.suspend) }
            platform.connector.failing.withValue { $0 = true }
            let unconfirmed = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(unconfirmed.status == .serviceUnavailable && unconfirmed.error?.code == "token_service_unavailable", "\(unconfirmed.text)")
            var token = try await platform.store.token(reference: "T1")
            #expect(token?.pendingCommand == .suspend && token?.suspendedBy == .tokenService)
            platform.connector.failing.withValue { $0 = false }
            let confirmed = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(confirmed.status == .ok, "\(confirmed.text)")
            #expect(platform.connector.commands.current == ["suspend T1"])
            token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .customerService && token?.pendingCommand == nil)
        }
    }

    /// A closed card's token the token service has not yet confirmed deactivating (still
    /// SUSPENDED here) cannot be resumed, and the refusal does not suggest unblocking.
    @Test func aClosedCardsSuspendedTokenIsNotResumedAndTheAnswerSaysWhy() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            platform.connector.failing.withValue { $0 = true }
            let close = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, json: CardStatusChangeRequest(status: .closed)).decode(LifecycleService.StatusChange.self)
            #expect(close.tokens.map(\.result) == ["FAILED"])
            platform.connector.failing.withValue { $0 = false }
            let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
            #expect(resumed.status == .conflict && resumed.error?.code == "card_not_active", "\(resumed.text)")
            #expect(resumed.error?.message.hasSuffix("is CLOSED; a closed card's tokens are deactivated, never resumed") == true, "\(resumed.text)")
            #expect(try await api.tokenStatus("T1") == .suspended)
        }
    }

    /// A closed card's active token whose deactivation the token service has not confirmed is
    /// not suspended (nothing sent, nothing recorded): the answer says to deactivate it, which works.
    @Test func aClosedCardsTokenAwaitingDeactivationIsNotSuspended() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await Self.statusChangeTheTokenServiceMisses(api, platform, token: "T1", to: .closed)
            let auditBefore = try await platform.store.auditEntries(subject: "token:T1").count
            let commandsBefore = platform.connector.commands.current
            let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(suspended.status == .conflict && suspended.error?.code == "deactivation_pending", "\(suspended.text)")
            #expect(suspended.error?.message == "token T1 is being deactivated: card c1 is CLOSED; deactivate it rather than suspend it")
            #expect(platform.connector.commands.current == commandsBefore)
            #expect(try await platform.store.auditEntries(subject: "token:T1").count == auditBefore)
            #expect(try await api.tokenStatus("T1") == .active)
            let deactivated = try await api.send(.post, "/lifecycle/tokens/T1/deactivate", as: .issuer)
            #expect(try deactivated.decode(TokenResource.self).status == .deactivated)
        }
    }

    @Test func tokenActionsFollowTheStateMachine() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            let suspendInactive = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(suspendInactive.status == .conflict)
            #expect(suspendInactive.error?.message.contains("INACTIVE") == true)
            #expect(try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer).status == .conflict)
            let deactivated = try await api.send(.post, "/lifecycle/tokens/T1/deactivate", as: .issuer)
            #expect(try deactivated.decode(TokenResource.self).status == .deactivated)
            let again = try await api.send(.post, "/lifecycle/tokens/T1/deactivate", as: .issuer)
            #expect(again.status == .conflict)
            #expect(again.error?.message.contains("DEACTIVATED") == true)
            #expect(try await api.send(.post, "/lifecycle/tokens/NOPE/suspend", as: .issuer).status == .notFound)
        }
    }

    @Test func tokenActionFailsCleanlyWhenTheTokenServiceIsDown() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            platform.connector.failing.withValue { $0 = true }
            let reply = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(reply.status == .serviceUnavailable)
            #expect(reply.error?.code == "token_service_unavailable")
            #expect(try await api.tokenStatus("T1") == .active)
        }
    }

    @Test func listsACardsTokens() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", device: .phone, token: "T1")
            try await api.provision("c1", user: "alice", device: .watch, token: "T2")
            let tokens = try await api.send(.get, "/lifecycle/cards/c1/tokens", as: .issuer).decode(TokenListResponse.self).tokens
            #expect(tokens.map(\.tokenUniqueReference) == ["T1", "T2"])
            #expect(tokens.map(\.deviceType) == [.phone, .watch])
            #expect(tokens.first?.tokenLast4 == "9876")
            #expect(try await api.send(.get, "/lifecycle/cards/nope/tokens", as: .issuer).status == .notFound)
        }
    }

    @Test func cardArtMustBeUnderFourMillionBytes() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let largest = try await api.send(.put, "/lifecycle/card-art/a1", as: .issuer, raw: TestPDF.onePage(exactSize: 3_999_999).data, contentType: "application/pdf")
            #expect(largest.status == .ok, "\(largest.text)")
            let limit = try await api.send(.put, "/lifecycle/card-art/a2", as: .issuer, raw: TestPDF.onePage(exactSize: 4_000_000).data, contentType: "application/pdf")
            #expect(limit.status == .badRequest)
            #expect(limit.error?.code == "invalid_card_art")
            #expect(limit.error?.message.hasPrefix("too_large: file is 4.0 MB (4,000,000 bytes); Apple requires under 4 MB") == true)
            let overBody = try await api.send(.put, "/lifecycle/card-art/a3", as: .issuer, raw: TestPDF.onePage(exactSize: 4_000_002).data, contentType: "application/pdf")
            #expect(overBody.status == .contentTooLarge)
            #expect(overBody.error?.code == "payload_too_large")
            #expect(try await platform.store.cardArt(id: "a1") != nil)
            #expect(try await platform.store.cardArt(id: "a2") == nil)
        }
    }

    @Test func cardArtIsServedWithNoSniffingAndAPDFSandboxed() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let png = TestPNG.file(width: 1536, height: 969)
            let pdf = TestPDF.onePage().data
            #expect(try await api.send(.put, "/lifecycle/card-art/art-png", as: .issuer, raw: png, contentType: "image/png").status == .ok)
            #expect(try await api.send(.put, "/lifecycle/card-art/art-pdf", as: .issuer, raw: pdf, contentType: "application/pdf").status == .ok)
            for (card, artId, pan) in [("c1", "art-png", "4111111111111111"), ("c2", "art-pdf", "5555555555554444")] {
                let body = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold", artId: artId)
                #expect(try await api.send(.put, "/lifecycle/cards/\(card)", as: .issuer, json: body).status == .created)
            }
            let pngArt = try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice"))
            #expect(pngArt.body == png)
            #expect(pngArt.headers[.contentType] == "image/png")
            #expect(pngArt.headers[.xContentTypeOptions] == "nosniff")
            #expect(pngArt.headers[.contentSecurityPolicy] == nil)
            // Each user's own card's art: no shared cache may keep it.
            #expect(pngArt.headers[.cacheControl] == "private, max-age=3600")

            let pdfArt = try await api.send(.get, "/issuer/push-provisioning/cards/c2/art", as: .cardholder("alice"))
            #expect(pdfArt.body == pdf)
            #expect(pdfArt.headers[.contentType] == "application/pdf")
            #expect(pdfArt.headers[.xContentTypeOptions] == "nosniff")
            #expect(pdfArt.headers[.contentSecurityPolicy] == "sandbox")
            #expect(pdfArt.headers[.cacheControl] == "private, max-age=3600")
        }
    }

    /// Art stored under looser rules (here written to the store directly) that the current
    /// rules refuse is not served: the card answers as one without art, and a warning names the
    /// art and the rule. Before the check the file was served.
    @Test func storedArtThatTheCurrentRulesRefuseIsNotServed() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let launching = TestPDF.launching.data
            let good = TestPNG.file(width: 1536, height: 969)
            try await platform.putAliceCard(showing: good, contentType: "image/png", as: "old-art", through: api)
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice")).body == good)

            // An earlier version stored this file.
            try await platform.storeArtDirectly("old-art", contentType: "application/pdf", data: launching)
            let art = try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice"))
            #expect(art.status == .notFound)
            #expect(art.error?.code == "card_art_not_found")
            #expect(art.body != launching)
            let warning = platform.logs.current.first { $0.contains("stored card art fails the current card-art rules") }
            #expect(warning?.contains("\"art\": old-art") == true, "\(platform.logs.current)")
            #expect(warning?.contains("\"reason\": pdf_active_content") == true, "\(platform.logs.current)")

            // Uploaded again (valid), it is served.
            #expect(try await api.send(.put, "/lifecycle/card-art/old-art", as: .issuer, raw: good, contentType: "image/png").status == .ok)
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice")).body == good)
        }
    }

    @Test func cardArtIsValidatedStoredAndServedToTheOwner() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let png = TestPNG.file(width: 1536, height: 969)
            let upload = try await api.send(.put, "/lifecycle/card-art/art-1", as: .issuer, raw: png, contentType: "image/png")
            #expect(upload.status == .ok, "\(upload.text)")
            let wrong = try await api.send(.put, "/lifecycle/card-art/art-2", as: .issuer, raw: TestPNG.file(width: 1024, height: 768), contentType: "image/png")
            #expect(wrong.status == .badRequest)
            #expect(wrong.error?.code == "invalid_card_art")
            #expect(wrong.error?.message.contains("1024") == true)
            let body = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold", artId: "art-1")
            #expect(try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, json: body).status == .created)
            let missingArt = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("5555555555554444"), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold", artId: "art-404")
            let refused = try await api.send(.put, "/lifecycle/cards/c2", as: .issuer, json: missingArt)
            #expect(refused.error?.code == "unknown_art")
            let art = try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice"))
            #expect(art.status == .ok)
            #expect(art.body == png)
            #expect(art.headers[.contentType] == "image/png")
            let cards = try await api.send(.get, "/issuer/push-provisioning/cards", as: .cardholder("alice")).decode(CardListResponse.self)
            #expect(cards.cards.first?.artURL == "/issuer/push-provisioning/cards/c1/art")
        }
    }
}
