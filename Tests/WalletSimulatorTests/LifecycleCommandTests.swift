import Foundation
import ProvisioningModels
import Testing
import TokenPlatform
import WalletSimulator

/// Passes TMP's commands to the simulator and makes its echo reach TMP before the command
/// returns: the order a fast network produces, forced for a deterministic test.
struct EchoFirstConnector: TokenServiceConnector {
    let simulator: TokenServiceSimulator

    private func run(_ command: (TokenServiceSimulator) async throws -> Void) async throws {
        try await command(simulator)
        await simulator.drainEvents()
    }

    func activate(_ token: TokenRecord) async throws { try await run { try await $0.activate(token) } }
    func suspend(_ token: TokenRecord) async throws { try await run { try await $0.suspend(token) } }
    func resume(_ token: TokenRecord) async throws { try await run { try await $0.resume(token) } }
    func deactivate(_ token: TokenRecord) async throws { try await run { try await $0.deactivate(token) } }
}

@Suite("Token service simulator: TMP's lifecycle commands")
struct LifecycleCommandTests {
    @Test func appActivationOfAYellowTokenGoesThroughTheSimulatorAndEndsActiveOnBothSides() async throws {
        let tmp = try await LiveTMP(policy: .inApp)
        try await tmp.run { session in
            try await session.putCard("c1")
            let token = try await session.provision("c1")
            let reference = token.tokenUniqueReference
            #expect(try await session.tmpToken(reference)?.status == .inactive)

            let stranger = try await session.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("mallory"), json: TokenActivationRequest(tokenUniqueReference: reference))
            #expect(stranger.status == .notFound)
            #expect(await session.simulator.token(reference)?.status == .inactive)

            let response = try await session.activate(reference)
            #expect(response.issuerMobileAppAuthResponse == .approved)
            #expect(response.cardLast4Digits == "1111")
            #expect(await session.simulator.token(reference)?.status == .active)
            #expect(tmp.observer.changes.current == ["\(reference) ACTIVE"])
            await session.simulator.drainEvents()
            #expect(try await session.tmpToken(reference)?.status == .active)
            #expect(try await session.search([reference]).first?.tokenStatus == .active)
            #expect(await session.simulator.deliveryLog.map(\.outcome) == [.applied(.inactive), .applied(.active)])
            await #expect(throws: TokenServiceSimulatorError.notAwaitingActivation(tokenUniqueReference: reference, status: .active)) {
                try await session.simulator.activationLink(forToken: reference, serialNumber: "S1")
            }
        }
    }

    /// The token service's final refusal of an activation (here: the pass was removed there,
    /// and TMP has not heard yet) is DECLINED with its reason, not FAILED "try again later",
    /// which no retry would change.
    @Test func anActivationTheTokenServiceRefusesForGoodIsDeclinedWithoutItsWords() async throws {
        let tmp = try await LiveTMP(policy: .inApp, delivery: .manual)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.drainEvents()
            #expect(try await session.tmpToken(reference)?.status == .inactive)
            // Removed at the token service; its DEACTIVATED event not yet sent.
            try await session.simulator.change(.passRemoved, tokenUniqueReference: reference)
            let response = try await session.activate(reference)
            #expect(response.issuerMobileAppAuthResponse == .declined)
            #expect(response.comment == "the token service refused the activation; the token cannot be activated as it stands there", "\(response.comment)")
            // Its words go to the log only (a real token service's may carry internal details).
            #expect(!response.comment.contains(reference))
            #expect(try await session.tmpToken(reference)?.status == .inactive, "TMP's record waits for the token service's event")
            await session.simulator.drainEvents()
            #expect(try await session.tmpToken(reference)?.status == .deactivated)
        }
    }

    @Test func blockUnblockAndCloseReachTheSimulatorAndTheObserverAndTMPEndsRight() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            let phone = try await session.provision("c1", device: .phone).tokenUniqueReference
            let watch = try await session.provision("c1", device: .watch).tokenUniqueReference
            func states() async throws -> [String] {
                var result: [String] = []
                for reference in [phone, watch] {
                    let simulated = await session.simulator.token(reference)?.status.rawValue ?? "-"
                    let recorded = try await session.tmpToken(reference)?.status.rawValue ?? "-"
                    result.append("\(simulated)/\(recorded)")
                }
                return result
            }

            let block = try await session.setCardStatus("c1", .blocked)
            #expect(block.tokens.map(\.result) == ["SUSPENDED", "SUSPENDED"])
            await session.simulator.drainEvents()
            #expect(try await states() == ["SUSPENDED/SUSPENDED", "SUSPENDED/SUSPENDED"])
            #expect(try await session.tmpToken(phone)?.suspendedBy == .cardBlocked)

            let unblock = try await session.setCardStatus("c1", .active)
            #expect(unblock.tokens.map(\.result) == ["RESUMED", "RESUMED"])
            await session.simulator.drainEvents()
            #expect(try await states() == ["ACTIVE/ACTIVE", "ACTIVE/ACTIVE"])

            try await session.setCardStatus("c1", .closed)
            await session.simulator.drainEvents()
            #expect(try await states() == ["DEACTIVATED/DEACTIVATED", "DEACTIVATED/DEACTIVATED"])

            #expect(Set(tmp.observer.changes.current) == ["\(phone) SUSPENDED", "\(watch) SUSPENDED", "\(phone) ACTIVE", "\(watch) ACTIVE", "\(phone) DEACTIVATED", "\(watch) DEACTIVATED"])
            #expect(tmp.observer.changes.current.count == 6)
            let echoes = await session.simulator.deliveryLog.filter { $0.event.event != .created && $0.event.event != .activated }
            #expect(echoes.map(\.event.event) == [.suspended, .suspended, .resumed, .resumed, .deactivated, .deactivated])
            #expect(echoes.allSatisfy { if case .applied = $0.outcome { true } else { false } })
        }
    }

    @Test func customerServiceSuspendAndResumeOfOneToken() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            #expect(try await session.send(.post, "/lifecycle/tokens/\(reference)/suspend", as: .issuer).status == .ok)
            await session.simulator.drainEvents()
            #expect(await session.simulator.token(reference)?.status == .suspended)
            #expect(try await session.tmpToken(reference)?.suspendedBy == .customerService)
            #expect(try await session.send(.post, "/lifecycle/tokens/\(reference)/resume", as: .issuer).status == .ok)
            await session.simulator.drainEvents()
            #expect(await session.simulator.token(reference)?.status == .active)
            #expect(try await session.tmpToken(reference)?.status == .active)
        }
    }

    /// Manual delivery makes every echo arrive after TMP recorded the change itself;
    /// background delivery lets it race TMP. Either way TMP ends right.
    @Test(arguments: [TokenEventDeliveryMode.manual, .background])
    func echoesLeaveTMPRightWhetherLateOrRacing(_ mode: TokenEventDeliveryMode) async throws {
        let tmp = try await LiveTMP(policy: .immediate, delivery: mode)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.drainEvents()
            try await session.setCardStatus("c1", .blocked)
            #expect(try await session.tmpToken(reference)?.status == .suspended)
            await session.simulator.drainEvents()
            let echo = try #require(await session.simulator.deliveryLog.last)
            #expect(echo.event.event == .suspended && echo.outcome == .applied(.suspended))
            #expect(try await session.tmpToken(reference)?.suspendedBy == .cardBlocked)
            try await session.setCardStatus("c1", .active)
            await session.simulator.drainEvents()
            #expect(try await session.tmpToken(reference)?.status == .active)
        }
    }

    @Test func echoesOvertakingTMPsOwnUpdateLeaveTheRightStateAndReason() async throws {
        let tmp = try await LiveTMP(policy: .inApp, connector: { EchoFirstConnector(simulator: $0) })
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            #expect(try await session.activate(reference).issuerMobileAppAuthResponse == .approved)
            #expect(try await session.tmpToken(reference)?.status == .active)

            let block = try await session.setCardStatus("c1", .blocked)
            #expect(block.tokens.map(\.result) == ["SUSPENDED"])
            #expect(try await session.tmpToken(reference)?.suspendedBy == .cardBlocked)
            let unblock = try await session.setCardStatus("c1", .active)
            #expect(unblock.tokens.map(\.result) == ["RESUMED"])
            #expect(await session.simulator.token(reference)?.status == .active)
            #expect(try await session.tmpToken(reference)?.status == .active)
            let outcomes = await session.simulator.deliveryLog.map(\.outcome)
            #expect(outcomes == [.applied(.inactive), .applied(.active), .applied(.suspended), .applied(.active)])
        }
    }

    /// The token service approved and created a token; the issuer blocks the card before TMP
    /// hears of it. When the events arrive, TMP suspends the token at the token service (the
    /// block never saw it), and unblocking resumes it on both sides.
    @Test func aTokenCreatedActiveForACardBlockedMeanwhileIsSuspendedOnBothSides() async throws {
        let tmp = try await LiveTMP(policy: .immediate, delivery: .manual)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            #expect(await session.simulator.token(reference)?.status == .active)
            #expect(try await session.tmpToken(reference) == nil)
            let block = try await session.setCardStatus("c1", .blocked)
            #expect(block.tokens.isEmpty, "TMP does not know the token yet")

            await session.simulator.drainEvents()
            #expect(await session.simulator.token(reference)?.status == .suspended)
            let token = try await session.tmpToken(reference)
            #expect(token?.status == .suspended && token?.suspendedBy == .cardBlocked)
            // CREATED, ACTIVATED (answered with the corrected status), then the echo of TMP's suspension.
            #expect(await session.simulator.deliveryLog.map(\.outcome) == [.applied(.inactive), .applied(.suspended), .applied(.suspended)])

            let unblock = try await session.setCardStatus("c1", .active)
            #expect(unblock.tokens.map(\.result) == ["RESUMED"])
            await session.simulator.drainEvents()
            #expect(await session.simulator.token(reference)?.status == .active)
            #expect(try await session.tmpToken(reference)?.status == .active)
        }
    }

    @Test func commandsForUnknownTokensOrIllegalTransitionsFailWithoutChange() async throws {
        let tmp = try await LiveTMP(policy: .inApp)
        try await tmp.run { session in
            try await session.putCard("c1")
            let token = try #require(try await session.tmpToken(try await session.provision("c1").tokenUniqueReference))
            await #expect(throws: TokenServiceSimulatorError.illegalTransition(tokenUniqueReference: token.tokenUniqueReference, from: .inactive, to: .suspended)) {
                try await session.simulator.suspend(token)
            }
            var stranger = token
            stranger.tokenUniqueReference = "DAPL-NOT-MINE"
            await #expect(throws: TokenServiceSimulatorError.unknownToken("DAPL-NOT-MINE")) { try await session.simulator.activate(stranger) }
            #expect(await session.simulator.token(token.tokenUniqueReference)?.status == .inactive)
            #expect(tmp.observer.changes.current.isEmpty)
            #expect(await session.simulator.deliveryLog.count == 1)
        }
    }
}
