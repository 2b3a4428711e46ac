import Foundation
import GRDB
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import TestSupport
import Testing
@testable import TokenPlatform

/// Card status changes racing customer service and the token service's own events.
@Suite("Lifecycle races")
struct LifecycleRaceTests {
    static func patch(_ api: APIClient, _ card: String, _ status: CardStatus) async throws -> APIClient.Reply {
        try await api.send(.patch, "/lifecycle/cards/\(card)", as: .issuer, json: CardStatusChangeRequest(status: status))
    }

    /// Card c1 of alice with token T1 provisioned on the yellow path (INACTIVE until activated).
    static func cardWithAnInactiveToken(_ api: APIClient) async throws {
        try await api.putCard("c1", user: "alice")
        _ = try await api.provision("c1", user: "alice", token: "T1")
        #expect(try await api.tokenStatus("T1") == .inactive)
    }

    /// Card c1 of alice with an active token T1, blocked; for the unblock to come, a hook that,
    /// while the unblock's resume of T1 is with the token service, delivers the token service's
    /// RESUMED echo, has customer service suspend T1, then runs `meanwhile`.
    static func blockThenSuspendDuringTheUnblocksResume(_ api: APIClient, _ platform: TestPlatform, meanwhile: @escaping @Sendable () -> Void = {}) async throws {
        let card = try await api.putCard("c1", user: "alice")
        _ = try await api.provision("c1", user: "alice", token: "T1")
        #expect(try await Self.patch(api, "c1", .blocked).status == .ok)
        let once = Locked(false)
        platform.connector.meanwhile.withValue { $0 = { command, token in
            guard command == "resume", token.tokenUniqueReference == "T1", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
            let echo = try await api.event("T1", pur: card.panUniqueReference, .resumed)
            #expect(echo.status == .ok)
            let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(suspended.status == .ok)
            meanwhile()
        } }
    }

    /// Customer service suspends a token while the block's suspension of it is with the token
    /// service: the suspension stays customer service's, and unblocking leaves it suspended.
    @Test func aCustomerServiceSuspensionMadeWhileABlockWasUnderwayOutlivesTheUnblock() async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.tokenStatus("T1") == .active)
            let once = Locked(false)
            platform.connector.meanwhile.withValue { $0 = { command, token in
                guard command == "suspend", token.tokenUniqueReference == "T1", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
                #expect(suspended.status == .ok)
            } }
            let blocked = try await Self.patch(api, "c1", .blocked)
            #expect(blocked.status == .ok && blocked.text.contains("\"UNCHANGED\""), "\(blocked.text)")
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .customerService)

            let unblocked = try await Self.patch(api, "c1", .active)
            #expect(unblocked.status == .ok)
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .customerService)
            #expect(platform.connector.commands.current.filter { $0.hasSuffix("T1") }.map { String($0.split(separator: " ")[0]) }.contains("resume") == false)
            // Its audit trail: the customer-service suspension, once; the block changed nothing.
            let trail = try await platform.store.auditEntries(subject: "token:T1").map(\.action)
            #expect(trail.filter { $0 == "token.suspended" }.count == 1, "\(trail)")
        }
    }

    /// An in-app activation lands while the card is blocked; its correction (a suspension) is
    /// confirmed after the card was unblocked, by a PATCH that found the token INACTIVE and sent
    /// nothing. TMP records what the token service holds (suspended by the block), at odds with
    /// the active card, so the realignment resumes it; before, the confirmed suspension was
    /// dropped and the token stayed INACTIVE in TMP and SUSPENDED at the token service for good.
    @Test func aCorrectionConfirmedAfterTheCardFlippedBackIsRecordedAndRealigned() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            try await Self.cardWithAnInactiveToken(api)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                let status: CardStatus = command == "activate" ? .blocked : .active
                guard command == "activate" || command == "suspend" else { return }
                let changed = try await Self.patch(api, "c1", status)
                #expect(changed.status == .ok)
            } }
            let activation = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "T1"))
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(try activation.decode(TokenActivationResponse.self).issuerMobileAppAuthResponse == .declined, "\(activation.text)")
            #expect(platform.connector.commands.current == ["activate T1", "suspend T1"])
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.suspendedBy == .cardBlocked)
            #expect(try await platform.store.card(externalCardId: "c1")?.status == .active)
            // At odds with the active card: the realignment resumes it once the grace has passed.
            platform.advance(61)
            let realigned = await TokenRealigner(environment: platform.environment, interval: .seconds(30), grace: .seconds(60)).realignOnce()
            #expect(realigned.map(\.result) == ["RESUMED"])
            #expect(try await api.tokenStatus("T1") == .active)
            #expect(platform.connector.commands.current.last == "resume T1")
        }
    }

    /// A token event activates a blocked card's token; TMP's suspension of it is confirmed after
    /// the card was unblocked by a PATCH that found the token ACTIVE and sent nothing. TMP records
    /// the suspension (the token service holds it), at odds with the active card, to be resumed.
    @Test func anEnforcedSuspensionConfirmedAfterAnUnblockIsRecorded() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.event("T1", pur: card.panUniqueReference, .created)
            #expect(try await Self.patch(api, "c1", .blocked).status == .ok)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "suspend" else { return }
                let unblocked = try await Self.patch(api, "c1", .active)
                #expect(unblocked.status == .ok)
            } }
            _ = try await api.event("T1", pur: card.panUniqueReference, .activated)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(platform.connector.commands.current == ["suspend T1"])
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.suspendedBy == .cardBlocked)
            platform.advance(61)
            #expect(try await platform.store.tokensAtOddsWithTheirCard(since: platform.clock.current.addingTimeInterval(-60), limit: 10).map(\.tokenUniqueReference) == ["T1"])
        }
    }

    /// Customer service resumes a token it had suspended; the card is blocked while the resume
    /// is with the token service, and the token service does not confirm suspending it again.
    /// TMP records the token as the token service holds it (ACTIVE, at odds with the blocked
    /// card), so the realignment suspends it; before, TMP kept customer service's suspension,
    /// which is never at odds, and the token paid on a blocked card with nothing to retry it.
    @Test(arguments: [false, true])
    func aCustomerServiceResumeOvertakenByABlockLeavesNoTokenPayingOnTheBlockedCard(correctionConfirmed: Bool) async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "resume" else { return }
                let blocked = try await Self.patch(api, "c1", .blocked)
                #expect(blocked.status == .ok)
                if !correctionConfirmed { platform.connector.failing.withValue { $0 = true } }
            } }
            let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
            platform.connector.meanwhile.withValue { $0 = nil }
            platform.connector.failing.withValue { $0 = false }
            #expect(resumed.status == .conflict && resumed.error?.code == "card_not_active", "\(resumed.text)")
            #expect(resumed.error?.message.contains("unblock the card to resume its tokens") == true)
            // The resume the token service carried out is in the trail, though not recorded.
            let unrecorded = try await platform.store.auditEntries(subject: "token:T1").filter { $0.action == "token.command_not_recorded" }.map { "\($0.actor): \($0.detail)" }
            #expect(unrecorded == ["issuer: resume confirmed by the token service; TMP's record not changed: card is BLOCKED"])
            let token = try #require(try await platform.store.token(reference: "T1"))
            if correctionConfirmed {
                // Suspended again at the token service, now by the block: unblocking resumes it,
                // as customer service wanted.
                #expect(token.status == .suspended && token.suspendedBy == .cardBlocked)
                #expect(try await Self.patch(api, "c1", .active).status == .ok)
                #expect(try await api.tokenStatus("T1") == .active)
            } else {
                #expect(token.status == .active)
                #expect(try await platform.store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).map(\.tokenUniqueReference) == ["T1"])
                let realigned = try await LifecycleService(environment: platform.environment).realignTokens(atOddsSince: Date.distantFuture, limit: 10)
                #expect(realigned.map(\.result) == ["SUSPENDED"])
                let after = try await platform.store.token(reference: "T1")
                #expect(after?.status == .suspended && after?.suspendedBy == .cardBlocked)
            }
        }
    }

    /// A late RESUMED echo for a blocked card's token is corrected (suspended again at the token
    /// service); customer service suspends the token while that correction is with the token
    /// service. The correction is not recorded (the suspension is customer service's now), but
    /// the suspension the token service carried out for it is in the trail.
    @Test func aCorrectionTheTokenServiceCarriedOutButTMPDidNotRecordIsInTheTrail() async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await Self.patch(api, "c1", .blocked).status == .ok)
            let once = Locked(false)
            platform.connector.meanwhile.withValue { $0 = { command, token in
                guard command == "suspend", token.tokenUniqueReference == "T1", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
                #expect(suspended.status == .ok)
            } }
            let echo = try await api.event("T1", pur: card.panUniqueReference, .resumed)
            #expect(echo.status == .ok, "\(echo.text)")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .customerService)
            let unrecorded = try await platform.store.auditEntries(subject: "token:T1").filter { $0.action == "token.command_not_recorded" }.map { "\($0.actor): \($0.detail)" }
            #expect(unrecorded == ["tmp: suspend confirmed by the token service; TMP's record not changed: card is BLOCKED; customer service suspended the token"], "\(unrecorded)")
        }
    }

    /// The card is unblocked; the token service's echo of the resume reaches TMP first, and
    /// customer service, seeing the token active, suspends it, all before the unblock's own
    /// resume is recorded. That resume must not lift customer service's suspension: the token
    /// stays suspended by customer service, in TMP and at the token service.
    @Test func anUnblocksResumeDoesNotLiftACustomerServiceSuspensionMadeMeanwhile() async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await Self.blockThenSuspendDuringTheUnblocksResume(api, platform)
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .cardBlocked)
            let unblocked = try await Self.patch(api, "c1", .active)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(unblocked.status == .ok && unblocked.text.contains("\"UNCHANGED\""), "\(unblocked.text)")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .customerService)
            // The token service's last word on T1 is a suspension.
            let last = platform.connector.commands.current.filter { $0.hasSuffix(" T1") }.last
            #expect(last == "suspend T1", "\(platform.connector.commands.current)")
            // The re-sent suspension is in the trail, though TMP's record did not change.
            let trail = try await platform.store.auditEntries(subject: "token:T1")
            #expect(trail.last?.action == "token.suspended" && trail.last?.detail.contains("suspension sent again") == true, "\(trail)")
        }
    }

    /// As above, and customer service resumes the token while the suspension sent again is on
    /// its way, reaching the token service first: the token service would end holding the token
    /// suspended while TMP records it active, with nothing at odds to correct it. The resume is
    /// sent again after the suspension, so the token service's last word matches TMP's record.
    @Test func aCustomerServiceResumeOvertakingTheSuspensionSentAgainIsSentAgainAfterIt() async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await Self.blockThenSuspendDuringTheUnblocksResume(api, platform)
            // Suspensions from here: customer service's, then the one sent again.
            let suspensions = Locked(0)
            platform.connector.before.withValue { $0 = { command, _ in
                guard command == "suspend", suspensions.withValue({ $0 += 1; return $0 }) == 2 else { return }
                let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
                #expect(resumed.status == .ok, "\(resumed.text)")
            } }
            let unblocked = try await Self.patch(api, "c1", .active)
            platform.connector.meanwhile.withValue { $0 = nil }
            platform.connector.before.withValue { $0 = nil }
            #expect(unblocked.status == .ok, "\(unblocked.text)")
            #expect(suspensions.current == 2)
            #expect(try await platform.store.token(reference: "T1")?.status == .active)
            let sent = platform.connector.commands.current.filter { $0.hasSuffix(" T1") }
            #expect(sent.suffix(3) == ["resume T1", "suspend T1", "resume T1"], "\(sent)")
        }
    }

    /// As above, but the card is blocked (the token service missing the block's suspension, so
    /// TMP keeps the token ACTIVE, at odds) before the suspension sent again returns: the resume
    /// is not sent again, since it could land after the block's suspension and leave the token
    /// paying on a blocked card; the realignment suspends it instead.
    @Test func noResumeIsSentAgainOnceTheCardIsBlocked() async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await Self.blockThenSuspendDuringTheUnblocksResume(api, platform)
            let suspensions = Locked(0)
            platform.connector.before.withValue { $0 = { command, _ in
                guard command == "suspend", suspensions.withValue({ $0 += 1; return $0 }) == 2 else { return }
                let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
                #expect(resumed.status == .ok, "\(resumed.text)")
                platform.connector.failing.withValue { $0 = true }
                let blocked = try await Self.patch(api, "c1", .blocked)
                #expect(blocked.status == .ok && blocked.text.contains("\"FAILED\""), "\(blocked.text)")
                platform.connector.failing.withValue { $0 = false }
            } }
            _ = try await Self.patch(api, "c1", .active)
            platform.connector.meanwhile.withValue { $0 = nil }
            platform.connector.before.withValue { $0 = nil }
            #expect(try await platform.store.card(externalCardId: "c1")?.status == .blocked)
            #expect(try await platform.store.token(reference: "T1")?.status == .active)
            let sent = platform.connector.commands.current.filter { $0.hasSuffix(" T1") }
            #expect(sent.last == "suspend T1", "\(sent)")
            // At odds with the blocked card: the realignment suspends it.
            platform.advance(61)
            let realigned = await TokenRealigner(environment: platform.environment, interval: .seconds(30), grace: .seconds(60)).realignOnce()
            #expect(realigned.map(\.result) == ["SUSPENDED"])
            #expect(try await platform.store.token(reference: "T1")?.status == .suspended)
        }
    }

    /// As below, until the suspension is pending; then customer service suspends the token
    /// again itself: sent and settled, not refused as a suspension of a suspended token.
    @Test func customerServiceCanSendItsUnconfirmedSuspensionAgain() async throws {
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await Self.blockThenSuspendDuringTheUnblocksResume(api, platform) { platform.connector.failing.withValue { $0 = true } }
            _ = try await Self.patch(api, "c1", .active)
            platform.connector.meanwhile.withValue { $0 = nil }
            platform.connector.failing.withValue { $0 = false }
            #expect(try await platform.store.token(reference: "T1")?.pendingCommand == .suspend)
            let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(suspended.status == .ok, "\(suspended.text)")
            #expect(suspended.text.contains("\"SUSPENDED\""), "\(suspended.text)")
            #expect(platform.connector.commands.current.last == "suspend T1", "\(platform.connector.commands.current)")
            let after = try #require(try await platform.store.token(reference: "T1"))
            #expect(after.status == .suspended && after.suspendedBy == .customerService && after.pendingCommand == nil)
            #expect(try await platform.store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).isEmpty)
            // A suspension confirmed already is still not sent twice.
            let again = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(again.status == .conflict && again.error?.code == "illegal_token_transition", "\(again.text)")
        }
    }

    /// As above, but the token service does not confirm suspending the token again: it may
    /// still let the token pay although TMP records customer service's suspension, and nothing
    /// in that state is at odds with the active card. The suspension is recorded as pending,
    /// shown to the issuer, and the realignment sends it until the token service confirms.
    @Test func aSuspensionTheTokenServiceDidNotConfirmSendingAgainIsPendingUntilTheRealignmentSendsIt() async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await Self.blockThenSuspendDuringTheUnblocksResume(api, platform) { platform.connector.failing.withValue { $0 = true } }
            let unblocked = try await Self.patch(api, "c1", .active)
            platform.connector.meanwhile.withValue { $0 = nil }
            platform.connector.failing.withValue { $0 = false }
            #expect(unblocked.status == .ok && unblocked.text.contains("\"FAILED\""), "\(unblocked.text)")
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.suspendedBy == .customerService && token.pendingCommand == .suspend)
            let listed = try await api.send(.get, "/lifecycle/cards/c1/tokens", as: .issuer)
            #expect(listed.text.contains("\"pendingCommand\":\"SUSPEND\""), "\(listed.text)")
            let trail = try await platform.store.auditEntries(subject: "token:T1")
            #expect(trail.last?.action == "token.pending_command" && trail.last?.detail.hasPrefix("suspension not confirmed") == true, "\(trail)")
            #expect(try await platform.store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).map(\.tokenUniqueReference) == ["T1"])

            // Still unconfirmed: still pending.
            platform.connector.failing.withValue { $0 = true }
            let failed = try await LifecycleService(environment: platform.environment).realignTokens(atOddsSince: Date.distantFuture, limit: 1)
            platform.connector.failing.withValue { $0 = false }
            #expect(failed.map(\.result) == ["FAILED"])
            #expect(try await platform.store.token(reference: "T1")?.pendingCommand == .suspend)

            let realigned = try await LifecycleService(environment: platform.environment).realignTokens(atOddsSince: Date.distantFuture, limit: 10)
            #expect(realigned.map(\.result) == ["SUSPENDED"])
            #expect(platform.connector.commands.current.last == "suspend T1", "\(platform.connector.commands.current)")
            let after = try #require(try await platform.store.token(reference: "T1"))
            #expect(after.status == .suspended && after.suspendedBy == .customerService && after.pendingCommand == nil)
            #expect(try await platform.store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).isEmpty)
            let settled = try await platform.store.auditEntries(subject: "token:T1").last
            #expect(settled?.action == "token.suspended" && settled?.actor == "tmp" && settled?.detail.contains("a suspension the token service had not confirmed") == true, "\(String(describing: settled))")
        }
    }

    /// Customer service resumes the token while the realignment sends its pending suspension
    /// again, and the resume is recorded first: the token service may have run the two in
    /// either order, so the token is resumed there again and stays ACTIVE as TMP records it.
    @Test func aResumeRecordedWhileAPendingSuspensionIsSentAgainIsSentAgainAfterIt() async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            _ = try await platform.store.updateToken(reference: "T1", audit: AuditEntry(at: Date(), actor: "test", action: "test", subject: "token:T1", detail: "")) { _, _ in .setPending(.suspend) }
            let once = Locked(false)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "suspend", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
                #expect(resumed.status == .ok, "\(resumed.text)")
            } }
            let realigned = try await LifecycleService(environment: platform.environment).realignTokens(atOddsSince: Date.distantFuture, limit: 1)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(realigned.map(\.result) == ["UNCHANGED"])
            #expect(platform.connector.commands.current.suffix(3) == ["suspend T1", "resume T1", "resume T1"], "\(platform.connector.commands.current)")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .active && token?.pendingCommand == nil)
            #expect(try await platform.store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).isEmpty)
            // Every command the token service carried out is in the trail, the resume sent again too.
            let trail = try await platform.store.auditEntries(subject: "token:T1")
            #expect(trail.last?.action == "token.active" && trail.last?.detail.hasPrefix("resume sent again") == true, "\(trail.map(\.detail))")
        }
    }

    /// The card's number is replaced while customer service's resume of a token of the old
    /// one is with the token service (the replacement missed the token: made meanwhile, or by
    /// an instance without the lease): the answer is the conflict it is, not "try again".
    @Test func aResumeOvertakenByANewCardNumberIsAConflict() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            let environment = platform.environment
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "resume", var card = try await environment.store.card(externalCardId: "c1") else { return }
                let pan = try PrimaryAccountNumber("5555555555554444")
                card.encryptedPAN = try environment.vault.encrypt(pan, cardID: "c1").serialized
                card.panLookupHash = environment.vault.lookupHash(pan)
                card.panLast4 = pan.last4
                card.panUniqueReference = "PUR-new"
                _ = try await environment.store.putCard(card, audit: AuditEntry(at: Date(), actor: "test", action: "test", subject: "card:c1", detail: ""))
            } }
            let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(resumed.status == .conflict && resumed.error?.code == "pan_replaced", "\(resumed.text)")
        }
    }

    /// As above, but the card is blocked after customer service's resume, and the block's
    /// suspension is not confirmed: TMP records the token ACTIVE, at odds with the blocked card.
    /// The pending suspension, confirmed next, is not followed by a resume (it could land after
    /// the block's suspension is sent again and leave the token paying on the blocked card);
    /// the token stays at odds, for the realignment to suspend.
    @Test func noResumeFollowsAPendingSuspensionSentAgainOnceTheCardIsBlocked() async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            _ = try await platform.store.updateToken(reference: "T1", audit: AuditEntry(at: Date(), actor: "test", action: "test", subject: "token:T1", detail: "")) { _, _ in .setPending(.suspend) }
            let once = Locked(false)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "suspend", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
                #expect(resumed.status == .ok, "\(resumed.text)")
                platform.connector.failing.withValue { $0 = true }
                let blocked = try await Self.patch(api, "c1", .blocked)
                platform.connector.failing.withValue { $0 = false }
                #expect(blocked.status == .ok && blocked.text.contains("\"FAILED\""), "\(blocked.text)")
            } }
            let realigned = try await LifecycleService(environment: platform.environment).realignTokens(atOddsSince: Date.distantFuture, limit: 1)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(realigned.map(\.result) == ["UNCHANGED"])
            #expect(platform.connector.commands.current.suffix(2) == ["suspend T1", "resume T1"], "\(platform.connector.commands.current)")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .active)
            #expect(try await platform.store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).map(\.tokenUniqueReference) == ["T1"])
        }
    }

    /// A token whose deactivation is pending is never resumed by customer service.
    @Test func customerServiceCannotResumeATokenWhoseDeactivationIsPending() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            _ = try await platform.store.updateToken(reference: "T1", audit: AuditEntry(at: Date(), actor: "test", action: "test", subject: "token:T1", detail: "")) { _, _ in .setPending(.deactivate) }
            let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
            #expect(resumed.status == .conflict && resumed.error?.code == "deactivation_pending", "\(resumed.text)")
            #expect(platform.connector.commands.current.last == "suspend T1")
            #expect(try await api.tokenStatus("T1") == .suspended)
        }
    }

    /// A pending suspension goes out with the card's next status change too: blocking the card
    /// sends it (TMP records the token suspended, so the block has nothing else for it).
    @Test func aPendingSuspensionIsSentWithTheCardsNextStatusChange() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            _ = try await platform.store.updateToken(reference: "T1", audit: AuditEntry(at: Date(), actor: "test", action: "test", subject: "token:T1", detail: "")) { _, _ in .setPending(.suspend) }
            let blocked = try await Self.patch(api, "c1", .blocked)
            #expect(blocked.status == .ok && blocked.text.contains("\"SUSPENDED\""), "\(blocked.text)")
            #expect(platform.connector.commands.current.last == "suspend T1")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.pendingCommand == nil && token?.suspendedBy == .customerService)
        }
    }

    /// The block's suspension is carried out at the token service but not confirmed (a time-out);
    /// its echo arrives while the card is blocked. The suspension is the block's, so unblocking
    /// resumes the token.
    @Test func aSuspensionReportedWhileTheCardIsBlockedIsTheBlocksAndUnblockingResumesIt() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "suspend" else { return }
                _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
                throw URLError(.timedOut)
            } }
            let blocked = try await Self.patch(api, "c1", .blocked)
            #expect(blocked.text.contains("\"FAILED\""), "\(blocked.text)")
            platform.connector.meanwhile.withValue { $0 = nil }
            let after = try await platform.store.token(reference: "T1")
            #expect(after?.status == .suspended && after?.suspendedBy == .cardBlocked)

            let unblocked = try await Self.patch(api, "c1", .active)
            #expect(unblocked.text.contains("\"RESUMED\""), "\(unblocked.text)")
            #expect(try await api.tokenStatus("T1") == .active)
        }
    }

    /// Card c1 of alice with token T1: ACTIVE with the `immediate` policy, INACTIVE with `inApp`.
    static func cardWithAToken(_ api: APIClient) async throws -> CardResource {
        let card = try await api.putCard("c1", user: "alice")
        _ = try await api.provision("c1", user: "alice", token: "T1")
        return card
    }

    /// Makes every suspension sent from now on time out after it was carried out (`true`), or
    /// go through again (`false`).
    static func suspensionsTimeOut(_ platform: TestPlatform, _ timeOut: Bool = true) {
        let timingOut: @Sendable (String, TokenRecord) async throws -> Void = { command, _ in if command == "suspend" { throw URLError(.timedOut) } }
        platform.connector.meanwhile.withValue { $0 = timeOut ? timingOut : nil }
    }

    /// One realignment of at most `limit` tokens at odds with their card, whenever since: the results.
    static func realign(_ platform: TestPlatform, limit: Int = 10) async throws -> [String] {
        try await LifecycleService(environment: platform.environment).realignTokens(atOddsSince: Date.distantFuture, limit: limit).map(\.result)
    }

    /// The block's suspension is carried out at the token service but not confirmed (a
    /// time-out), and the card is unblocked before the echo arrives: unblocking finds the token
    /// ACTIVE and sends nothing. The echo is still the block's, so the realignment resumes the
    /// token, instead of it staying suspended as the token service's own suspension.
    @Test func aBlocksSuspensionEchoedOnlyAfterTheUnblockIsTheBlocksAndIsResumed() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await Self.cardWithAToken(api)
            Self.suspensionsTimeOut(platform)
            let blocked = try await Self.patch(api, "c1", .blocked)
            #expect(blocked.text.contains("\"FAILED\""), "\(blocked.text)")
            platform.connector.meanwhile.withValue { $0 = nil }
            let noted = try #require(try await platform.store.token(reference: "T1"))
            let blockedAt = EventTime(platform.clock.current)
            #expect(noted.status == .active && noted.blockSuspensionsSent == blockedAt...blockedAt)

            let unblocked = try await Self.patch(api, "c1", .active)
            #expect(unblocked.status == .ok && unblocked.text.contains("\"tokens\":[]"), "\(unblocked.text)")
            #expect(platform.connector.commands.current.last == "suspend T1", "\(platform.connector.commands.current)")
            platform.advance(30)
            let echo = try await api.event("T1", pur: card.panUniqueReference, .suspended)
            #expect(echo.status == .ok, "\(echo.text)")
            let suspended = try #require(try await platform.store.token(reference: "T1"))
            #expect(suspended.status == .suspended && suspended.suspendedBy == .cardBlocked && suspended.blockSuspensionsSent == nil)
            #expect(try await platform.store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).map(\.tokenUniqueReference) == ["T1"])

            #expect(try await Self.realign(platform) == ["RESUMED"])
            #expect(platform.connector.commands.current.suffix(2) == ["suspend T1", "resume T1"], "\(platform.connector.commands.current)")
            #expect(try await api.tokenStatus("T1") == .active)
        }
    }

    /// The same for a correction: the token service reports a blocked card's token activated,
    /// TMP's suspension of it is carried out but not confirmed, and the card is unblocked before
    /// the echo. The echo is the block's, and the realignment resumes the token.
    @Test func aCorrectionsSuspensionEchoedOnlyAfterTheUnblockIsTheBlocksAndIsResumed() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            let card = try await Self.cardWithAToken(api)
            #expect(try await api.tokenStatus("T1") == .inactive)
            #expect(try await Self.patch(api, "c1", .blocked).status == .ok)
            Self.suspensionsTimeOut(platform)
            let activated = try await api.event("T1", pur: card.panUniqueReference, .activated)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(activated.status == .ok && activated.text.contains("\"ACTIVE\""), "\(activated.text)")
            #expect(platform.connector.commands.current.last == "suspend T1", "\(platform.connector.commands.current)")
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent != nil)

            _ = try await Self.patch(api, "c1", .active)
            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.suspendedBy == .cardBlocked)
            #expect(try await Self.realign(platform) == ["RESUMED"])
            #expect(try await api.tokenStatus("T1") == .active)
        }
    }

    /// And for the undo of an activation the card's block overtook: its suspension is not
    /// confirmed, so TMP records the token ACTIVE, as the token service held it, noting when the
    /// suspension was sent (not when it gave up on it, 2 minutes later here), and takes the
    /// echo after an unblocking as the block's.
    @Test func anUndoneActivationsSuspensionEchoedOnlyAfterTheUnblockIsTheBlocks() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            try await Self.cardWithAnInactiveToken(api)
            let card = try #require(try await platform.store.card(externalCardId: "c1"))
            let suspensionSent = Locked<Date?>(nil)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                if command == "activate" { #expect(try await Self.patch(api, "c1", .blocked).status == .ok) }
                if command == "suspend" {
                    suspensionSent.withValue { $0 = platform.clock.current }
                    platform.advance(120)
                    throw URLError(.timedOut)
                }
            } }
            let activation = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "T1"))
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(activation.status == .ok, "\(activation.text)")
            #expect(platform.connector.commands.current.suffix(2) == ["activate T1", "suspend T1"], "\(platform.connector.commands.current)")
            let noted = try #require(try await platform.store.token(reference: "T1"))
            let sentAt = EventTime(try #require(suspensionSent.current))
            #expect(noted.status == .active && noted.blockSuspensionsSent == sentAt...sentAt)

            _ = try await Self.patch(api, "c1", .active)
            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended, occurredAt: EventTime(millisecondsSince1970: sentAt.millisecondsSince1970 + 1_000))
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.suspendedBy == .cardBlocked)
        }
    }

    /// Only a suspension reported around the time the block's unconfirmed suspension was sent
    /// is taken as its echo: by its `occurredAt` when it has one (however late it is
    /// delivered), by when it arrives otherwise. One from before, or from well after, is the
    /// token service's own, and stays.
    @Test(arguments: [
        // (seconds after the block the event arrives, its occurredAt relative to the block, the block's?)
        (30.0, nil, true),
        (599.0, nil, true),
        (600.0, nil, true),
        (601.0, nil, false),
        (3_600.0, 20.0, true),
        (3_600.0, 601.0, false),
        (30.0, -59.0, true),
        (30.0, -60.0, true),
        (30.0, -61.0, false),
    ] as [(Double, Double?, Bool)])
    func aSuspensionIsTheBlocksEchoOnlyAroundTheTimeItWasSent(arrivesAfter: Double, occurredAfter: Double?, isTheBlocks: Bool) async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await Self.cardWithAToken(api)
            Self.suspensionsTimeOut(platform)
            let blockedAt = platform.clock.current
            #expect(try await Self.patch(api, "c1", .blocked).text.contains("\"FAILED\""))
            platform.connector.meanwhile.withValue { $0 = nil }
            _ = try await Self.patch(api, "c1", .active)
            platform.advance(arrivesAfter)
            let occurredAt = occurredAfter.map { EventTime(blockedAt.addingTimeInterval($0)) }
            let echo = try await api.event("T1", pur: card.panUniqueReference, .suspended, occurredAt: occurredAt)
            #expect(echo.status == .ok, "\(echo.text)")
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.suspendedBy == (isTheBlocks ? .cardBlocked : .tokenService))
            #expect(token.blockSuspensionsSent == nil)
        }
    }

    /// A suspension for the block that failed without reaching the token service (the
    /// connector says so: it could not connect) leaves no note, or puts back the note an
    /// earlier one left: a suspension the token service reports after the unblocking is its
    /// own, unless it falls within that earlier one's window.
    @Test func aBlockSuspensionThatNeverReachedTheTokenServiceLeavesNoNote() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await Self.cardWithAToken(api)
            platform.connector.failing.withValue { $0 = true }
            #expect(try await Self.patch(api, "c1", .blocked).text.contains("\"FAILED\""))
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent == nil)

            // An earlier suspension timed out: its note stays through a later one that failed.
            platform.connector.failing.withValue { $0 = false }
            Self.suspensionsTimeOut(platform)
            let first = EventTime(platform.clock.current)
            let realigned = try await Self.realign(platform, limit: 1)
            #expect(realigned == ["FAILED"])
            platform.connector.meanwhile.withValue { $0 = nil }
            platform.advance(90)
            platform.connector.failing.withValue { $0 = true }
            let realignedAgain = try await Self.realign(platform, limit: 1)
            #expect(realignedAgain == ["FAILED"])
            platform.connector.failing.withValue { $0 = false }
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent == first...first)

            _ = try await Self.patch(api, "c1", .active)
            platform.advance(600)
            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .tokenService)
        }
    }

    /// Suspensions for the block sent again, each timing out: the note keeps the first and the
    /// last, so the echo of the first (by its `occurredAt`) is the block's, and one ten minutes
    /// after the last still is.
    @Test(arguments: [1.0, 90.0 + 599])
    func theNoteSpansEverySuspensionSentForTheBlock(occurredAfterTheFirst: Double) async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await Self.cardWithAToken(api)
            Self.suspensionsTimeOut(platform)
            let first = platform.clock.current
            #expect(try await Self.patch(api, "c1", .blocked).text.contains("\"FAILED\""))
            platform.advance(90)
            let realigned = try await Self.realign(platform, limit: 1)
            #expect(realigned == ["FAILED"])
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent == EventTime(first)...EventTime(first.addingTimeInterval(90)))

            _ = try await Self.patch(api, "c1", .active)
            platform.advance(1_200)
            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended, occurredAt: EventTime(first.addingTimeInterval(occurredAfterTheFirst)))
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .cardBlocked)
        }
    }

    /// Customer service suspends a token whose block's suspension went unconfirmed, and that
    /// suspension times out too: its echo is not the block's, so it stays — the note was
    /// cleared before customer service's suspension was sent.
    @Test func aCustomerServiceSuspensionAfterAnUnconfirmedBlockSuspensionIsNeverTakenAsTheBlocks() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await Self.cardWithAToken(api)
            Self.suspensionsTimeOut(platform)
            #expect(try await Self.patch(api, "c1", .blocked).text.contains("\"FAILED\""))
            _ = try await Self.patch(api, "c1", .active)
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent != nil)
            platform.advance(120)
            let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(suspended.status == .serviceUnavailable, "\(suspended.text)")
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent == nil)

            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.suspendedBy == .tokenService)
            #expect(try await Self.realign(platform).isEmpty)
        }
    }

    /// Customer service's suspension of such a token never reaches the token service (the
    /// connection cannot be made): the note it cleared is put back, so the late echo of the
    /// block's suspension is still the block's, and the realignment resumes the token on its
    /// unblocked card. (Before, the note was gone, and the token stayed suspended.)
    @Test func aCustomerServiceSuspensionThatNeverLeftPutsTheBlocksNoteBack() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await Self.cardWithAToken(api)
            Self.suspensionsTimeOut(platform)
            #expect(try await Self.patch(api, "c1", .blocked).text.contains("\"FAILED\""))
            let noted = try #require(try await platform.store.token(reference: "T1")?.blockSuspensionsSent)
            platform.connector.meanwhile.withValue { $0 = nil }
            platform.connector.failing.withValue { $0 = true }
            let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(suspended.status == .serviceUnavailable, "\(suspended.text)")
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent == noted)
            platform.connector.failing.withValue { $0 = false }

            _ = try await Self.patch(api, "c1", .active)
            platform.advance(120)
            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .cardBlocked)
            #expect(try await Self.realign(platform) == ["RESUMED"])
        }
    }

    /// But not over an event that changed the token meanwhile: it cleared the note too, and
    /// says what the token service holds now.
    @Test func aNoteIsNotPutBackOverAnEventThatChangedTheToken() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await Self.cardWithAToken(api)
            Self.suspensionsTimeOut(platform)
            #expect(try await Self.patch(api, "c1", .blocked).text.contains("\"FAILED\""))
            _ = try await Self.patch(api, "c1", .active)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent != nil)
            platform.connector.before.withValue { $0 = { command, _ in
                guard command == "suspend" else { return }
                // The token service's report of a suspension lands, then the connection fails.
                _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
                throw URLError(.cannotConnectToHost)
            } }
            _ = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            platform.connector.before.withValue { $0 = nil }
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.blockSuspensionsSent == nil, "\(token)")
        }
    }

    /// TMP's own time limit leaves the note, as any outcome the connector cannot know; what
    /// says the command never left withdraws it.
    @Test func whichFailuresLeaveTheNote() {
        #expect(!TokenServiceCommandOutcome.neverSent(TimeLimitedTokenServiceConnector.TimedOut(command: "suspend", limit: .seconds(10))))
        #expect(!TokenServiceCommandOutcome.neverSent(CancellationError()))
        #expect(!TokenServiceCommandOutcome.neverSent(URLError(.timedOut)))
        #expect(!TokenServiceCommandOutcome.neverSent(URLError(.networkConnectionLost)))
        #expect(!TokenServiceCommandOutcome.neverSent(URLError(.badServerResponse)))
        #expect(!TokenServiceCommandOutcome.neverSent(TestFailure("anything else")))
        #expect(TokenServiceCommandOutcome.neverSent(TimeLimitedTokenServiceConnector.EarlierCommandUnfinished(command: "suspend")))
        #expect(TokenServiceCommandOutcome.neverSent(UnconfiguredTokenServiceConnector.NotConfigured()))
        #expect(TokenServiceCommandOutcome.neverSent(TimeLimitedTokenServiceConnector.CancelledBeforeSending(command: "suspend")))
        #expect(TokenServiceCommandOutcome.neverSent(TimeLimitedTokenServiceConnector.TimedOutBeforeSending(command: "suspend", limit: .seconds(10))))
        #expect(TokenServiceCommandOutcome.neverSent(URLError(.cannotConnectToHost)))
        #expect(TokenServiceCommandOutcome.neverSent(URLError(.cannotFindHost)))
    }

    /// A block whose caller is cancelled before its suspension is handed to the token service
    /// (a shutdown, say) leaves no note: TMP's time-limited connector says nothing was sent.
    @Test func aBlockSuspensionCancelledBeforeItWasSentLeavesNoNote() async throws {
        let store = FaultyStore(base: try await TestTMP.memoryStore())
        let platform = try TestPlatform(policy: .immediate, store: store, secrets: .init())
        try await platform.run { api in
            _ = try await Self.cardWithAToken(api)
            let sent = platform.connector.commands.current
            // The block's caller is cancelled once the note is written, before the suspension
            // is handed to the token service.
            store.afterNote.withValue { $0 = { withUnsafeCurrentTask { $0?.cancel() } } }
            let change = try await Task {
                try await LifecycleService(environment: platform.environment).setStatus(externalCardId: "c1", status: .blocked)
            }.value
            store.afterNote.withValue { $0 = nil }
            #expect(change.tokens.map(\.result) == ["FAILED"], "\(change.tokens)")
            #expect(platform.connector.commands.current == sent, "nothing reached the token service")
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent == nil)
            #expect(platform.logs.current.contains { $0.contains("suspend not sent: its caller was cancelled first") })
        }
    }

    /// A caller cancelled once the token service confirmed its command (a shutdown past its
    /// grace) still records the outcome and its audit entry: the token service holds it now.
    @Test func aConfirmedCommandIsRecordedThoughItsCallerWasCancelled() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            _ = try await Self.cardWithAToken(api)
            // Confirmed; the caller is cancelled when it next reads the time (for the record's audit entry).
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                if command == "suspend" { platform.cancelAtNextNow.withValue { $0 = true } }
            } }
            let suspended = try await Task {
                try await LifecycleService(environment: platform.environment).perform(.suspend, tokenUniqueReference: "T1")
            }.value
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(!platform.cancelAtNextNow.current, "the caller was cancelled")
            #expect(suspended.status == .suspended)
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.suspendedBy == .customerService)
            #expect(try await platform.store.auditEntries(subject: "token:T1").contains { $0.action == "token.suspended" && $0.actor == "issuer" })
        }
    }

    /// TMP's own time limit, end to end: the block's suspension it gave up on is noted.
    @Test func aBlockSuspensionGivenUpAtTheTimeLimitIsNoted() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            _ = try await Self.cardWithAToken(api)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                if command == "suspend" { throw TimeLimitedTokenServiceConnector.TimedOut(command: command, limit: .seconds(10)) }
            } }
            #expect(try await Self.patch(api, "c1", .blocked).text.contains("\"FAILED\""))
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent != nil)
        }
    }

    /// The undo of an activation the block overtook times out, and the card is unblocked while
    /// it is with the token service: TMP still records the token ACTIVE, as the token service
    /// held it, with the note, so the undo's echo is the block's.
    @Test func anUndoOverTakenByTheUnblockIsNotedAllTheSame() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            try await Self.cardWithAnInactiveToken(api)
            let card = try #require(try await platform.store.card(externalCardId: "c1"))
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                if command == "activate" { #expect(try await Self.patch(api, "c1", .blocked).status == .ok) }
                if command == "suspend" {
                    #expect(try await Self.patch(api, "c1", .active).status == .ok)
                    throw URLError(.timedOut)
                }
            } }
            _ = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "T1"))
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(platform.connector.commands.current.suffix(2) == ["activate T1", "suspend T1"], "\(platform.connector.commands.current)")
            let noted = try #require(try await platform.store.token(reference: "T1"))
            #expect(noted.status == .active && noted.blockSuspensionsSent != nil)
            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .cardBlocked)
        }
    }

    /// Customer service's suspension is not sent while the note cannot be cleared: its echo
    /// could be taken as the block's and resumed. The request fails, and nothing is sent.
    @Test func noCustomerServiceSuspensionIsSentWhileTheNoteCannotBeCleared() async throws {
        let store = FaultyStore(base: try await TestTMP.memoryStore())
        let platform = try TestPlatform(policy: .immediate, store: store, secrets: .init())
        try await platform.run { api in
            _ = try await Self.cardWithAToken(api)
            Self.suspensionsTimeOut(platform)
            #expect(try await Self.patch(api, "c1", .blocked).text.contains("\"FAILED\""))
            Self.suspensionsTimeOut(platform, false)
            _ = try await Self.patch(api, "c1", .active)
            let sent = platform.connector.commands.current
            store.noteFailure.withValue { $0 = DatabaseError(resultCode: .SQLITE_IOERR, message: "disk I/O error") }
            let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            store.noteFailure.withValue { $0 = nil }
            #expect(suspended.status == .serviceUnavailable && suspended.error?.code == "database_unavailable", "\(suspended.text)")
            #expect(platform.connector.commands.current == sent)
            #expect(try await platform.store.token(reference: "T1")?.status == .active)
        }
    }

    /// The block's suspension is confirmed but the card was unblocked meanwhile, so it is undone
    /// with a resume the token service confirms, which TMP finds recorded already (ACTIVE): the
    /// token service holds what TMP records, and the note goes.
    @Test func aConfirmedUndoFoundRecordedAlreadyClearsTheNote() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            _ = try await Self.cardWithAToken(api)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "suspend" else { return }
                let unblocked = try await Self.patch(api, "c1", .active)
                #expect(unblocked.status == .ok)
            } }
            let blocked = try await Self.patch(api, "c1", .blocked)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(blocked.text.contains("\"UNCHANGED\""), "\(blocked.text)")
            #expect(platform.connector.commands.current.suffix(2) == ["suspend T1", "resume T1"], "\(platform.connector.commands.current)")
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .active && token.blockSuspensionsSent == nil)
        }
    }

    /// A note that cannot be written leaves the command to be sent all the same.
    @Test func aBlockSuspensionIsSentWhenItsNoteCannotBeWritten() async throws {
        let store = FaultyStore(base: try await TestTMP.memoryStore())
        let platform = try TestPlatform(policy: .immediate, store: store, secrets: .init())
        try await platform.run { api in
            _ = try await Self.cardWithAToken(api)
            store.noteFailure.withValue { $0 = URLError(.cannotConnectToHost) }
            let blocked = try await Self.patch(api, "c1", .blocked)
            #expect(blocked.text.contains("\"SUSPENDED\""), "\(blocked.text)")
            #expect(platform.connector.commands.current.last == "suspend T1")
            #expect(platform.logs.current.contains { $0.contains("could not note a suspension for a card's block") })
        }
    }

    /// A suspension for the block the token service confirms leaves no note behind: a later
    /// suspension it reports for the unblocked card's token is its own.
    @Test func aConfirmedBlockSuspensionLeavesNoNote() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await Self.cardWithAToken(api)
            #expect(try await Self.patch(api, "c1", .blocked).text.contains("\"SUSPENDED\""))
            #expect(try await platform.store.token(reference: "T1")?.blockSuspensionsSent == nil)
            #expect(try await Self.patch(api, "c1", .active).text.contains("\"RESUMED\""))
            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .tokenService)
        }
    }

    /// A suspension the token service reports for a token of an active card stays its own.
    @Test func aSuspensionReportedWhileTheCardIsActiveStaysTheTokenServices() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .tokenService)
        }
    }

    /// A deactivation is final at the token service: delivered late, it still applies, and the
    /// token keeps the newest event time.
    @Test func aLateDeactivationIsNeverStale() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            let suspended = try await api.event("T1", pur: card.panUniqueReference, .suspended, occurredAt: EventTime(millisecondsSince1970: 5_000))
            #expect(suspended.text.contains("\"APPLIED\""))
            let late = try await api.event("T1", pur: card.panUniqueReference, .deactivated, occurredAt: EventTime(millisecondsSince1970: 4_000))
            #expect(late.text.contains("\"APPLIED\""), "\(late.text)")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .deactivated)
            #expect(token?.lastEventAt == EventTime(millisecondsSince1970: 5_000))
            // Other events older than the newest are still stale.
            let older = try await api.event("T1", pur: card.panUniqueReference, .resumed, occurredAt: EventTime(millisecondsSince1970: 4_500))
            #expect(older.text.contains("\"STALE\""), "\(older.text)")
        }
    }

    /// Deactivating a token that is already deactivated writes nothing and audits nothing.
    @Test func aCommandForTheStateATokenAlreadyHasIsNotAuditedTwice() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            // The token service's echo of the deactivation overtakes TMP's own record of it.
            let card = try await platform.store.card(externalCardId: "c1")
            let echo = Locked<APIClient.Reply?>(nil)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "deactivate" else { return }
                let reply = try await api.event("T1", pur: card!.panUniqueReference, .deactivated)
                echo.withValue { $0 = reply }
            } }
            let deactivated = try await api.send(.post, "/lifecycle/tokens/T1/deactivate", as: .issuer)
            #expect(deactivated.status == .ok, "\(deactivated.text)")
            platform.connector.meanwhile.withValue { $0 = nil }
            // The race happened: the echo was applied before TMP recorded its own command.
            let reply = try #require(echo.current)
            #expect(reply.status == .ok, "\(reply.text)")
            #expect(try reply.decode(TokenEventResponse.self).result == "APPLIED")
            let trail = try await platform.store.auditEntries(subject: "token:T1")
            let deactivations = trail.filter { $0.action.contains("deactivat") }
            #expect(deactivations.map(\.actor) == ["tsp"], "\(trail.map { "\($0.actor) \($0.action)" })")
            // Customer service's request is in the trail too, as a command the change had
            // been recorded for already.
            let requested = trail.filter { $0.action == "token.command_not_recorded" }
            #expect(requested.map(\.actor) == ["issuer"], "\(trail.map { "\($0.actor) \($0.action)" })")
            #expect(requested.first?.detail.hasPrefix("deactivate confirmed by the token service; TMP's record not changed: recorded already") == true, "\(requested.map(\.detail))")
        }
    }

    /// Customer service resumes a token it suspended; while the resume is with the token
    /// service, its echo and then a suspension of the token service's own arrive. The token
    /// service holds the token suspended, so TMP must not record it ACTIVE.
    @Test func aSuspensionTheTokenServiceReportsWhileCustomerServiceResumesStays() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            let card = try #require(try await platform.store.card(externalCardId: "c1"))
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "resume" else { return }
                let echo = try await api.event("T1", pur: card.panUniqueReference, .resumed)
                let own = try await api.event("T1", pur: card.panUniqueReference, .suspended)
                #expect(echo.status == .ok && own.status == .ok, "\(echo.text) \(own.text)")
            } }
            let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(resumed.status == .conflict, "\(resumed.text)")
            #expect(resumed.error?.code == "suspended_meanwhile", "\(resumed.text)")
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended)
            #expect(token.suspendedBy == .tokenService)
            // Asserted at the token service again after the resume, in case it ran the resume last.
            #expect(platform.connector.commands.current.suffix(2) == ["resume T1", "suspend T1"])
        }
    }

    /// As above, with a suspension of the same source as the one customer service lifts: the
    /// token service suspended the token, customer service resumes it, and the token service
    /// echoes the resume and then suspends the token again. The second suspension stays.
    @Test func aSecondSuspensionOfTheSameSourceWhileCustomerServiceResumesStays() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            let card = try #require(try await platform.store.card(externalCardId: "c1"))
            platform.advance(1)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .suspended).status == .ok)
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .tokenService)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "resume" else { return }
                platform.advance(1)
                let echo = try await api.event("T1", pur: card.panUniqueReference, .resumed)
                platform.advance(1)
                let own = try await api.event("T1", pur: card.panUniqueReference, .suspended)
                #expect(echo.status == .ok && own.status == .ok, "\(echo.text) \(own.text)")
            } }
            let resumed = try await api.send(.post, "/lifecycle/tokens/T1/resume", as: .issuer)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(resumed.status == .conflict && resumed.error?.code == "suspended_meanwhile", "\(resumed.text)")
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .suspended && token.suspendedBy == .tokenService)
            #expect(platform.connector.commands.current.suffix(2) == ["resume T1", "suspend T1"])
        }
    }

    /// A tokenization of the old PAN approved while a PUT replaces the card's PAN (the known
    /// tokens' deactivations are with the token service): its token is deactivated at the token
    /// service too, not only in TMP's records.
    @Test func aTokenOfTheOldPANMadeWhileThePANWasBeingReplacedIsDeactivatedAtTheTokenService() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            platform.connector.meanwhile.withValue { $0 = { command, token in
                guard command == "deactivate", token.tokenUniqueReference == "T1" else { return }
                let decision = try await api.provision("c1", user: "alice", pan: "4111111111111111", device: .watch, token: "T2")
                #expect(decision.decision == .approved, "the card still has the old PAN")
            } }
            let replaced = try await api.putCard("c1", user: "alice", pan: "5555555555554444")
            platform.connector.meanwhile.withValue { $0 = nil }
            let commands = platform.connector.commands.current
            #expect(commands.contains("deactivate T1") && commands.contains("deactivate T2"), "\(commands)")
            #expect(try await api.tokenStatus("T1") == .deactivated)
            #expect(try await api.tokenStatus("T2") == .deactivated)
            #expect(try await platform.store.token(reference: "T2")?.panUniqueReference != replaced.panUniqueReference)
            let trail = try await platform.store.auditEntries(subject: "token:T2").map { "\($0.actor) \($0.action) \($0.detail)" }
            #expect(trail.last == "issuer token.deactivated card PAN replaced", "\(trail)")
        }
    }

    /// A token the token service reports for a PAN the card no longer has (its tokenization was
    /// approved before the PAN changed) is recorded for the card and deactivated at once; if
    /// the token service does not confirm, the realignment deactivates it.
    @Test(arguments: [true, false])
    func aTokenReportedForARetiredPANIsRecordedAndDeactivated(confirmed: Bool) async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let old = try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            let new = try await api.putCard("c1", user: "alice", pan: "5555555555554444")
            #expect(old.panUniqueReference != new.panUniqueReference)
            platform.connector.failing.withValue { $0 = !confirmed }
            let created = try await api.event("T9", pur: old.panUniqueReference, .created, device: .watch)
            #expect(created.status == .ok && created.text.contains("\"APPLIED\""), "\(created.text)")
            let token = try #require(try await platform.store.token(reference: "T9"))
            #expect(token.externalCardId == "c1" && token.userId == "alice" && token.panUniqueReference == old.panUniqueReference)
            if confirmed {
                #expect(platform.connector.commands.current.contains("deactivate T9"))
                #expect(created.text.contains("\"tokenStatus\":\"DEACTIVATED\""))
                #expect(token.status == .deactivated)
            } else {
                #expect(token.status == .inactive)
                platform.connector.failing.withValue { $0 = false }
                platform.advance(600)
                let outcomes = await TokenRealigner(environment: platform.environment, interval: .seconds(30), grace: .seconds(60)).realignOnce()
                #expect(outcomes.map(\.result) == ["DEACTIVATED"])
                #expect(platform.connector.commands.current.contains("deactivate T9"))
                #expect(try await api.tokenStatus("T9") == .deactivated)
            }
            // A reference no card ever had is still unknown.
            let unknown = try await api.event("T10", pur: "PURnever", .created)
            #expect(unknown.status == .notFound)
        }
    }

    /// A token of a retired PAN whose deactivation the token service has not confirmed yet is
    /// never activated or resumed through TMP, and is no proof of the cardholder for a new
    /// device's tokenization.
    @Test func aTokenOfARetiredPANIsNeverActivatedAndProvesNothing() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            let old = try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            _ = try await api.putCard("c1", user: "alice", pan: "5555555555554444")
            platform.connector.failing.withValue { $0 = true }
            _ = try await api.event("T9", pur: old.panUniqueReference, .created)
            #expect(try await api.tokenStatus("T9") == .inactive)
            platform.connector.failing.withValue { $0 = false }
            let activation = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "T9"))
                .decode(TokenActivationResponse.self)
            #expect(activation.issuerMobileAppAuthResponse == .declined, "\(activation.comment)")
            #expect(!platform.connector.commands.current.contains("activate T9"))
            #expect(try await api.tokenStatus("T9") == .inactive)

            // The token service activates and suspends it on its own; customer service cannot resume it.
            platform.connector.failing.withValue { $0 = true }
            _ = try await api.event("T9", pur: old.panUniqueReference, .activated)
            #expect(try await api.tokenStatus("T9") == .active)
            platform.connector.failing.withValue { $0 = false }

            // Still live and active on the phone: no proof for the Watch's tokenization.
            let signed = try await api.signCard("c1", user: "alice", device: .watch).decode(SignedCardResponse.self)
            let decision = try await api.send(.post, "/tsp/tokenization-decisions", as: .tsp, json: TokenizationDecisionRequest(
                requestId: "r-watch", primaryAccountNumber: try PrimaryAccountNumber("5555555555554444"), expiration: try CardExpiration("12/29"),
                activationData: String(decoding: signed.activationData.data, as: UTF8.self), deviceType: .watch
            )).decode(TokenizationDecisionResponse.self)
            #expect(decision.reason == "in_app_activation_required")

            platform.connector.failing.withValue { $0 = true }
            _ = try await api.event("T9", pur: old.panUniqueReference, .suspended)
            platform.connector.failing.withValue { $0 = false }
            #expect(try await api.tokenStatus("T9") == .suspended)
            let resumed = try await api.send(.post, "/lifecycle/tokens/T9/resume", as: .issuer)
            #expect(resumed.status == .conflict && resumed.text.contains("pan_replaced"), "\(resumed.text)")
            #expect(!platform.connector.commands.current.contains("resume T9"))
        }
    }

    /// Alice activates her token while the issuer gives the card (same PAN) to Bob, so the token
    /// follows the card to him: the token service activates it, TMP declines the activation and
    /// ends the token there, since its new owner never activated it.
    @Test func anActivationOverlappingAHandOverOfTheCardIsDeclinedAndTheTokenEnded() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            try await Self.cardWithAnInactiveToken(api)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "activate" else { return }
                _ = try await api.putCard("c1", user: "bob")
            } }
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "T1"))
            platform.connector.meanwhile.withValue { $0 = nil }
            let answer = try reply.decode(TokenActivationResponse.self)
            #expect(answer.issuerMobileAppAuthResponse == .declined)
            #expect(answer.comment == "the card was given to another user during activation")
            #expect(platform.connector.commands.current.suffix(2) == ["activate T1", "deactivate T1"])
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .deactivated && token?.userId == "bob")
            let trail = try await platform.store.auditEntries(subject: "token:T1")
            #expect(trail.last?.action == "token.deactivated" && trail.last?.actor == "tmp" && trail.last?.detail.hasPrefix("activated by the card's previous owner") == true, "\(trail)")
            // Without a hand-over the same activation goes through.
            try await api.putCard("c2", user: "alice", pan: "5555555555554444", network: .mastercard)
            _ = try await api.provision("c2", user: "alice", pan: "5555555555554444", token: "T2")
            let approved = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "T2")).decode(TokenActivationResponse.self)
            #expect(approved.issuerMobileAppAuthResponse == .approved)
        }
    }

    /// As above, but the token service does not confirm ending the token: TMP keeps it as it
    /// was (INACTIVE, while the token service holds it active on the previous owner's device)
    /// with its deactivation pending, declines any activation of it, and the realignment ends
    /// it once the token service answers.
    @Test func aPreviousOwnersTokenTheTokenServiceDidNotConfirmEndingIsEndedByTheRealignment() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "activate" else { return }
                _ = try await api.putCard("c1", user: "bob")
                platform.connector.failing.withValue { $0 = true }
            } }
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "T1"))
            platform.connector.meanwhile.withValue { $0 = nil }
            platform.connector.failing.withValue { $0 = false }
            #expect(try reply.decode(TokenActivationResponse.self).issuerMobileAppAuthResponse == .declined)
            let token = try #require(try await platform.store.token(reference: "T1"))
            #expect(token.status == .inactive && token.pendingCommand == .deactivate && token.userId == "bob")
            let trail = try await platform.store.auditEntries(subject: "token:T1")
            #expect(trail.last?.action == "token.pending_command" && trail.last?.detail.hasPrefix("deactivation not confirmed") == true, "\(trail)")
            // Nobody activates it meanwhile, not even the card's new owner.
            let bobs = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("bob"), json: TokenActivationRequest(tokenUniqueReference: "T1")).decode(TokenActivationResponse.self)
            #expect(bobs.issuerMobileAppAuthResponse == .declined && bobs.comment == "the token is being deactivated")
            #expect(platform.connector.commands.current.last == "activate T1")
            // The token service's echo of Alice's activation makes it ACTIVE, now Bob's: the
            // deactivation it owes is sent at once, and (the token service still failing) stays
            // pending. The token is still no proof of Bob for his watch, which must activate in
            // the app.
            let card = try #require(try await platform.store.card(externalCardId: "c1"))
            platform.connector.failing.withValue { $0 = true }
            #expect(try await api.event("T1", pur: card.panUniqueReference, .activated).status == .ok)
            platform.connector.failing.withValue { $0 = false }
            let echoed = try await platform.store.token(reference: "T1")
            #expect(echoed?.status == .active && echoed?.pendingCommand == .deactivate)
            let watch = try await api.provision("c1", user: "bob", device: .watch, token: "T2")
            #expect(watch.decision == .requireAdditionalAuthentication && watch.reason == "in_app_activation_required", "\(watch)")

            let realigned = try await LifecycleService(environment: platform.environment).realignTokens(atOddsSince: Date.distantFuture, limit: 10)
            #expect(realigned.map(\.result) == ["DEACTIVATED"])
            #expect(platform.connector.commands.current.last == "deactivate T1")
            let after = try await platform.store.token(reference: "T1")
            #expect(after?.status == .deactivated && after?.pendingCommand == nil)
            #expect(try await platform.store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).isEmpty)
        }
    }

    /// As above, and the card is blocked while the token service deactivates the previous
    /// owner's token: the confirmed deactivation is recorded all the same (it is final at the
    /// token service), not dropped because the card's status changed.
    @Test func aDeactivationConfirmedWhileTheCardChangedStatusIsRecorded() async throws {
        let platform = try await TestPlatform(policy: .inApp)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                switch command {
                case "activate": _ = try await api.putCard("c1", user: "bob")
                case "deactivate":
                    let blocked = try await LifecycleRaceTests.patch(api, "c1", .blocked)
                    #expect(blocked.status == .ok, "\(blocked.text)")
                default: break
                }
            } }
            let reply = try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "T1"))
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(try await platform.store.card(externalCardId: "c1")?.status == .blocked)
            #expect(try reply.decode(TokenActivationResponse.self).issuerMobileAppAuthResponse == .declined)
            #expect(platform.connector.commands.current.suffix(2) == ["activate T1", "deactivate T1"])
            #expect(try await api.tokenStatus("T1") == .deactivated)
        }
    }

    /// The same PAN replacement sent twice (a retry reaching another instance): the first
    /// completes, and a token is made for the new PAN, while the second is deactivating the old
    /// PAN's tokens. The second keeps the new PAN's reference and spares the new token.
    @Test func aRepeatedReplacementKeepsTheNewPANsReferenceAndItsToken() async throws {
        // Two instances' commands: one's hook sends a command for the token the other's holds.
        let platform = try await TestPlatform(policy: .immediate, serializingTokenCommands: false)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            let once = Locked(false)
            let firstReference = Locked<String?>(nil)
            platform.connector.meanwhile.withValue { $0 = { command, token in
                guard command == "deactivate", token.tokenUniqueReference == "T1", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                let first = try await api.putCard("c1", user: "alice", pan: "5555555555554444", network: .mastercard)
                firstReference.withValue { $0 = first.panUniqueReference }
                _ = try await api.provision("c1", user: "alice", pan: "5555555555554444", token: "T2")
            } }
            let second = try await api.putCard("c1", user: "alice", pan: "5555555555554444", network: .mastercard)
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(second.panUniqueReference == firstReference.current)
            #expect(try await platform.store.card(externalCardId: "c1")?.panUniqueReference == firstReference.current)
            #expect(try await api.tokenStatus("T2") == .active)
            #expect(try await api.tokenStatus("T1") == .deactivated)
            #expect(!platform.connector.commands.current.contains("deactivate T2"), "\(platform.connector.commands.current)")
        }
    }
}
