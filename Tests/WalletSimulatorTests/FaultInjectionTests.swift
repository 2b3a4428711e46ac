import Foundation
import ProvisioningModels
import Testing
import TMPTestSupport
import TokenPlatform
@testable import WalletSimulator

@Suite("Token service simulator: injected failures")
struct FaultInjectionTests {
    @Test func anInjectedDeclineCreatesNothingAndTMPHearsNothing() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            let card = try await session.putCard("c1")
            await session.simulator.setFaults(TokenServiceFaults(declineTokenization: "network_risk_declined"))
            let outcome = try await session.simulator.tokenize(try await session.addPaymentPass("c1").tokenization)
            #expect(outcome.decline == TokenizationDecline(reason: "network_risk_declined", source: .tokenService))
            #expect(try await tmp.store.latestTokenizationDecision(panUniqueReference: card.panUniqueReference, deviceType: .phone) == nil)
            #expect(await session.simulator.allTokens.isEmpty)

            await session.simulator.setFaults(.none)
            #expect(try await session.simulator.tokenize(try await session.addPaymentPass("c1").tokenization).token != nil)
        }
    }

    /// The network turns TMP's green into yellow (its own risk check): TMP records the token
    /// INACTIVE, as the network holds it, and the issuer app's activation makes it ACTIVE.
    @Test func anApprovalTheNetworkTurnsYellowWaitsForTheAppsActivation() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            let card = try await session.putCard("c1")
            await session.simulator.setFaults(TokenServiceFaults(downgradeApprovalToYellow: true))
            let outcome = try await session.simulator.tokenize(try await session.addPaymentPass("c1").tokenization)
            let token = try #require(outcome.token)
            #expect(token.status == .inactive && token.authorizationPath == .yellow)
            #expect(try await tmp.store.latestTokenizationDecision(panUniqueReference: card.panUniqueReference, deviceType: .phone)?.decision == .approved)
            await session.simulator.drainEvents()
            #expect(try await session.tmpToken(token.tokenUniqueReference)?.status == .inactive)

            await session.simulator.setFaults(.none)
            #expect(try await session.activate(token.tokenUniqueReference).issuerMobileAppAuthResponse == .approved)
            await session.simulator.drainEvents()
            #expect(await session.simulator.token(token.tokenUniqueReference)?.status == .active)
            #expect(try await session.tmpToken(token.tokenUniqueReference)?.status == .active)
        }
    }

    @Test func aDecisionThatComesTooLateIsDeclinedAndCreatesNoToken() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            let card = try await session.putCard("c1")
            await session.simulator.setFaults(TokenServiceFaults(timeOut: [.tokenizationDecision], hangDuration: .seconds(25)))
            let pass = try await session.addPaymentPass("c1")
            #expect(try await session.simulator.tokenize(pass.tokenization).decline == TokenizationDecline(reason: "issuer_timeout", source: .tokenService))
            #expect(tmp.hangs.current == [.seconds(25)])
            // TMP did decide (and used the activation data) but no token exists anywhere.
            #expect(try await tmp.store.latestTokenizationDecision(panUniqueReference: card.panUniqueReference, deviceType: .phone)?.decision == .approved)
            #expect(await session.simulator.allTokens.isEmpty)
            #expect(try await tmp.store.tokens(externalCardId: "c1").isEmpty)
        }
    }

    @Test func aDecisionAskedAgainWithTheSameRequestIdGetsTheSameAnswerAndOneToken() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            let card = try await session.putCard("c1")
            // TMP decides (using the activation data up), the answer is lost, the network asks
            // again with the same request id: TMP answers from its record, not as a replay.
            await session.simulator.setFaults(TokenServiceFaults(timeOut: [.tokenizationDecision], retryTimedOutDecision: true, hangDuration: .seconds(25)))
            let pass = try await session.addPaymentPass("c1")
            let outcome = try await session.simulator.tokenize(pass.tokenization)
            let token = try #require(outcome.token, "\(outcome)")
            #expect(token.status == .active)
            let decision = try #require(try await tmp.store.latestTokenizationDecision(panUniqueReference: card.panUniqueReference, deviceType: .phone))
            #expect(decision.decision == .approved && decision.reason != "activation_data_replayed")
            await session.simulator.drainEvents()
            #expect(try await tmp.store.tokens(externalCardId: "c1").map(\.tokenUniqueReference) == [token.tokenUniqueReference])
        }
    }

    @Test func anActivationThatTimesOutAnswersFailedAndChangesNothingUntilRetried() async throws {
        let tmp = try await LiveTMP(policy: .inApp)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.setFaults(TokenServiceFaults(timeOut: [.activate], hangDuration: .seconds(30)))
            let failed = try await session.activate(reference)
            #expect(failed.issuerMobileAppAuthResponse == .failed)
            #expect(tmp.hangs.current == [.seconds(30)])
            await session.simulator.drainEvents()
            #expect(await session.simulator.token(reference)?.status == .inactive)
            #expect(try await session.tmpToken(reference)?.status == .inactive)
            #expect(tmp.observer.changes.current.isEmpty)

            await session.simulator.setFaults(.none)
            #expect(try await session.activate(reference).issuerMobileAppAuthResponse == .approved)
            await session.simulator.drainEvents()
            #expect(try await session.tmpToken(reference)?.status == .active)
        }
    }

    @Test func aBlockThatTimesOutIsReportedFailedAndTheSamePatchRetriesIt() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.setFaults(TokenServiceFaults(timeOut: [.suspend]))
            #expect(try await session.setCardStatus("c1", .blocked).tokens.map(\.result) == ["FAILED"])
            #expect(await session.simulator.token(reference)?.status == .active)
            #expect(try await session.tmpToken(reference)?.status == .active)

            await session.simulator.setFaults(.none)
            #expect(try await session.setCardStatus("c1", .blocked).tokens.map(\.result) == ["SUSPENDED"])
            await session.simulator.drainEvents()
            #expect(try await session.tmpToken(reference)?.status == .suspended)
        }
    }

    @Test func aBlockWhoseAnswerIsLostIsReportedFailedAndTheEchoBringsTMPInLine() async throws {
        let tmp = try await LiveTMP(policy: .immediate, delivery: .manual)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.drainEvents()
            // The network suspends the token, then its answer is lost.
            await session.simulator.setFaults(TokenServiceFaults(applyThenTimeOut: [.suspend], hangDuration: .seconds(30)))
            #expect(try await session.setCardStatus("c1", .blocked).tokens.map(\.result) == ["FAILED"])
            #expect(await session.simulator.token(reference)?.status == .suspended)
            #expect(tmp.observer.changes.current.last == "\(reference) SUSPENDED")
            #expect(try await session.tmpToken(reference)?.status == .active, "TMP does not know yet")
            // The network's echo tells TMP what happened: both agree, the card still blocked.
            await session.simulator.setFaults(.none)
            await session.simulator.drainEvents()
            #expect(await session.simulator.pendingEvents.isEmpty)
            #expect(try await session.tmpToken(reference)?.status == .suspended)
            #expect(try await tmp.store.card(externalCardId: "c1")?.status == .blocked)
            // Unblocking resumes it, as a block's suspension.
            let unblocked = try await session.setCardStatus("c1", .active)
            #expect(unblocked.tokens.map(\.result) == ["RESUMED"], "\(unblocked)")
            await session.simulator.drainEvents()
            #expect(await session.simulator.token(reference)?.status == .active)
            #expect(try await session.tmpToken(reference)?.status == .active)
        }
    }

    @Test func aDroppedCreatedEventLeavesTMPUnawareOfTheToken() async throws {
        let tmp = try await LiveTMP(policy: .inApp)
        try await tmp.run { session in
            try await session.putCard("c1")
            await session.simulator.setFaults(TokenServiceFaults(dropEvents: [.created]))
            let token = try await session.provision("c1")
            #expect(await session.simulator.deliveryLog.map(\.outcome) == [.dropped])
            #expect(try await session.search([token.tokenUniqueReference]).isEmpty)
            // TMP cannot activate what it never heard of.
            #expect(try await session.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: token.tokenUniqueReference)).status == .notFound)
        }
    }

    @Test func aDroppedEchoDoesNotMatterBecauseTMPRecordsItsOwnCommand() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.setFaults(TokenServiceFaults(dropEvents: [.suspended]))
            try await session.setCardStatus("c1", .blocked)
            await session.simulator.drainEvents()
            #expect(await session.simulator.deliveryLog.last?.outcome == .dropped)
            #expect(await session.simulator.token(reference)?.status == .suspended)
            #expect(try await session.tmpToken(reference)?.status == .suspended)
        }
    }

    @Test func anEventOlderThanWhatTMPKnowsIsLoggedStaleNotApplied() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            // The token service's clock an hour behind the ACTIVATED event TMP applied: the
            // echo of customer service's suspension is older than what TMP knows.
            tmp.advance(-3600)
            let suspended = try await session.send(.post, "/lifecycle/tokens/\(reference)/suspend", as: .issuer)
            #expect(suspended.status == .ok)
            await session.simulator.drainEvents()
            let last = try #require(await session.simulator.deliveryLog.last)
            #expect(last.event.event == .suspended)
            // The token's state in the answer is TMP's at that moment: the echo may arrive
            // before or after TMP records the suspension itself.
            guard case .stale = last.outcome else { Issue.record("expected stale, got \(last.outcome)"); return }
            #expect(try await session.tmpToken(reference)?.status == .suspended)
        }
    }

    @Test func aCommandSentAgainAfterItsAnswerWasLostSucceedsAsANoOp() async throws {
        // The answer of a command that took effect is lost; the same command sent again finds
        // the token in its target state and succeeds without changing or hanging.
        let tmp = try await LiveTMP(policy: .immediate, delivery: .manual)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.drainEvents()
            let token = try #require(try await session.tmpToken(reference))
            await session.simulator.setFaults(TokenServiceFaults(applyThenTimeOut: [.suspend], hangDuration: .seconds(30)))
            await #expect(throws: TokenServiceSimulatorError.self) { try await session.simulator.suspend(token) }
            #expect(await session.simulator.token(reference)?.status == .suspended)
            let hangs = tmp.hangs.current.count
            try await session.simulator.suspend(token)
            #expect(tmp.hangs.current.count == hangs, "the no-op waited out an injected hang")
            #expect(await session.simulator.pendingEvents.map(\.event) == [.suspended])
        }
    }

    /// Two changes of one token whose events arrive the later first.
    enum Reversal: String, CaseIterable, CustomTestStringConvertible {
        /// TMP's block and unblock of the card (their echoes).
        case blockThenUnblock
        /// The network's own: the device lost, then found.
        case lostThenFound
        var testDescription: String { rawValue }
    }

    @Test(arguments: Reversal.allCases)
    func eventsThatOvertakeEachOtherEndInTheNetworksState(_ reversal: Reversal) async throws {
        let tmp = try await LiveTMP(policy: .immediate, delivery: .manual)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.drainEvents()
            await session.simulator.setFaults(TokenServiceFaults(reorderEvents: true))
            tmp.advance(1)
            switch reversal {
            case .blockThenUnblock: _ = try await session.setCardStatus("c1", .blocked)
            case .lostThenFound: try await session.simulator.change(.deviceLost, tokenUniqueReference: reference)
            }
            tmp.advance(1)
            switch reversal {
            case .blockThenUnblock: _ = try await session.setCardStatus("c1", .active)
            case .lostThenFound: try await session.simulator.change(.deviceFound, tokenUniqueReference: reference)
            }
            #expect(await session.simulator.pendingEvents.map(\.event) == [.resumed, .suspended])
            await session.simulator.drainEvents()
            let log = await session.simulator.deliveryLog.suffix(2)
            #expect(log.map(\.event.event) == [.resumed, .suspended])
            // TMP judges by the events' times: the overtaken suspension is older than what it knows.
            guard case .stale? = log.last?.outcome else {
                Issue.record("the overtaken suspension was not stale: \(String(describing: log.last?.outcome))")
                return
            }
            #expect(await session.simulator.token(reference)?.status == .active)
            #expect(try await session.tmpToken(reference)?.status == .active)
            #expect(Array(tmp.observer.changes.current.suffix(2)) == ["\(reference) \(TokenStatus.suspended.rawValue)", "\(reference) \(TokenStatus.active.rawValue)"])
        }
    }

    @Test func duplicatedEventsAreAcknowledgedOnceAndChangeNothingTwice() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            await session.simulator.setFaults(TokenServiceFaults(duplicateEvents: [.created, .activated]))
            let reference = try await session.provision("c1").tokenUniqueReference
            let log = await session.simulator.deliveryLog
            #expect(log.map(\.event.event) == [.created, .created, .activated, .activated])
            #expect(log.map(\.outcome) == [.applied(.inactive), .duplicate(.inactive), .applied(.active), .duplicate(.active)])
            #expect(log[0].event.eventId == log[1].event.eventId && log[2].event.eventId == log[3].event.eventId)
            #expect(try await session.tmpToken(reference)?.status == .active)
            let audit = try await tmp.store.auditEntries(subject: "token:\(reference)").map(\.action)
            #expect(audit == ["token.event.created", "token.event.activated"])
        }
    }

    @Test func anEventTMPCouldNotReceiveIsSentAgainOnItsOwn() async throws {
        let tmp = try await LiveTMP(policy: .immediate)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            let port = try #require(session.client.port)
            // TMP out of reach when customer service's suspension is echoed.
            await session.simulator.connect(to: TSPAPIEndpoint(baseURL: URL(string: "http://127.0.0.1:1")!, apiKey: LiveTMP.tspKey))
            #expect(try await session.send(.post, "/lifecycle/tokens/\(reference)/suspend", as: .issuer).status == .ok)
            // Until the echo's delivery has failed (the echo is queued before it is tried).
            @Sendable func echoFailed() async -> Bool {
                guard let last = await session.simulator.deliveryLog.last, last.event.event == .suspended, case .failed = last.outcome else { return false }
                return true
            }
            var deadline = ContinuousClock.now + .seconds(10)
            while await !echoFailed(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            guard await echoFailed() else { throw TestFailure("expected the echo's delivery to fail") }
            // Reachable again; nobody drains: the retry sends it (500 ms, then doubling).
            await session.simulator.connect(to: LiveTMP.endpoint(port: port))
            deadline = ContinuousClock.now + .seconds(20)
            while await !session.simulator.pendingEvents.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(await session.simulator.pendingEvents.isEmpty)
            let last = try #require(await session.simulator.deliveryLog.last)
            #expect(last.event.event == .suspended)
            guard case .applied = last.outcome else { throw TestFailure("expected the echo applied, got \(last.outcome)") }
        }
    }

    /// A wrong (or rotated) TSP API key is refused 401: the events stay queued, as in an
    /// outage, and go once the right key is configured. (Before, each was dropped as rejected.)
    @Test func eventsRefusedForTheCredentialStayQueuedUntilTheRightKey() async throws {
        let tmp = try await LiveTMP(policy: .immediate, delivery: .manual)
        try await tmp.run { session in
            try await session.putCard("c1")
            let port = try #require(session.client.port)
            // Provisioned (the decision asked with the right key), its events not yet sent.
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.connect(to: TSPAPIEndpoint(baseURL: URL(string: "http://127.0.0.1:\(port)")!, apiKey: "a-key-TMP-does-not-know"))
            await session.simulator.drainEvents()
            let queued = await session.simulator.pendingEvents.map(\.event)
            #expect(queued.first == .created, "\(queued)")
            let refused = try #require(await session.simulator.deliveryLog.last)
            guard case .failed = refused.outcome else { throw TestFailure("expected a failed delivery, got \(refused.outcome)") }
            #expect(try await session.tmpToken(reference) == nil, "TMP has not heard of the token")
            await session.simulator.connect(to: LiveTMP.endpoint(port: port))
            await session.simulator.drainEvents()
            #expect(await session.simulator.pendingEvents.isEmpty)
            #expect(try await session.tmpToken(reference) != nil, "the queued CREATED reached TMP")
        }
    }

    /// Once shut down, the simulator sends nothing more: a retry waiting for an unreachable
    /// TMP is cancelled, and events stay queued whatever is connected or drained after.
    @Test func aShutDownSimulatorSendsNothingMore() async throws {
        let tmp = try await LiveTMP(policy: .immediate, delivery: .background)
        try await tmp.run { session in
            try await session.putCard("c1")
            let port = try #require(session.client.port)
            let reference = try await session.provision("c1").tokenUniqueReference
            await session.simulator.drainEvents()
            #expect(try await session.tmpToken(reference)?.status == .active)
            await session.simulator.connect(to: TSPAPIEndpoint(baseURL: URL(string: "http://127.0.0.1:1")!, apiKey: LiveTMP.tspKey))
            try await session.simulator.change(.deviceLost, tokenUniqueReference: reference)
            // The delivery fails and a retry waits.
            let deadline = ContinuousClock.now + .seconds(20)
            while await session.simulator.retryTask == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            try #require(await session.simulator.retryTask != nil, "a retry was scheduled")
            await session.simulator.shutDown()
            #expect(await session.simulator.retryTask == nil)
            #expect(await session.simulator.deliveryTask == nil)
            await session.simulator.connect(to: LiveTMP.endpoint(port: port))
            await session.simulator.drainEvents()
            try await Task.sleep(for: .seconds(1))  // past the first retry's 0.5 s
            #expect(await session.simulator.pendingEvents.map(\.event) == [.suspended])
            #expect(try await session.tmpToken(reference)?.status == .active, "the suspension never reached TMP")
        }
    }

    @Test func theTSPAPIKeyGoesOverPlainHTTPOnlyToThisMachine() async throws {
        let tmp = try await LiveTMP(policy: .immediate, delivery: .manual)
        try await tmp.run { session in
            try await session.putCard("c1")
            _ = try await session.provision("c1")
            // Another host over plain http: nothing is sent (the key would travel in clear).
            await session.simulator.connect(to: TSPAPIEndpoint(baseURL: URL(string: "http://192.0.2.1:8080")!, apiKey: LiveTMP.tspKey, requestTimeout: .seconds(30)))
            let start = ContinuousClock.now
            await session.simulator.drainEvents()
            guard case .failed(let reason) = await session.simulator.deliveryLog.last?.outcome else { throw TestFailure("expected a failed delivery") }
            #expect(reason.contains("http://192.0.2.1:8080 is not https, and only this machine may be reached over plain http"), "\(reason)")
            #expect(ContinuousClock.now - start < .seconds(20), "refused before any connection attempt")
            #expect(await session.simulator.pendingEvents.map(\.event) == [.created, .activated])
        }
    }

    @Test func eventsTMPCannotReceiveStayQueuedInOrderUntilItCan() async throws {
        let tmp = try await LiveTMP(policy: .immediate, delivery: .manual)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            #expect(await session.simulator.pendingEvents.map(\.event) == [.created, .activated])
            // Each event says when it happened (the shared clock), so TMP can order them.
            #expect(await session.simulator.pendingEvents.map(\.occurredAt) == [EventTime(tmp.clock.current), EventTime(tmp.clock.current)])
            #expect(try await session.tmpToken(reference) == nil)

            let port = try #require(session.client.port)
            await session.simulator.connect(to: TSPAPIEndpoint(baseURL: URL(string: "http://127.0.0.1:1")!, apiKey: LiveTMP.tspKey))
            await session.simulator.drainEvents()
            #expect(await session.simulator.pendingEvents.map(\.event) == [.created, .activated])
            guard case .failed = await session.simulator.deliveryLog.last?.outcome else { throw TestFailure("expected a failed delivery") }

            await session.simulator.connect(to: LiveTMP.endpoint(port: port))
            await session.simulator.drainEvents()
            #expect(await session.simulator.pendingEvents.isEmpty)
            #expect(try await session.tmpToken(reference)?.status == .active)
            #expect(try await session.tmpToken(reference)?.lastEventAt == EventTime(tmp.clock.current))
        }
    }
}
