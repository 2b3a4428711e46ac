import Foundation
import ProvisioningModels
import SDKTestSupport
import Testing
import TokenPlatform

/// A token service that answers each command after `answerAfter` on `clock`, or never (it
/// then waits on a clock nobody moves until it is cancelled), and records what happened.
struct SlowConnector: TokenServiceConnector {
    let clock: ManualClock
    let answerAfter: Duration?
    /// Where a command that never answers waits; tests wait for its sleepers to know the
    /// commands are under way.
    let never = ManualClock()
    let started = Locked<[String]>([])
    let cancelled = Locked<[String]>([])
    let answered = Locked<[String]>([])

    private func answer(_ command: String, _ token: TokenRecord) async throws {
        let name = "\(command) \(token.tokenUniqueReference)"
        started.withValue { $0.append(name) }
        do {
            if let answerAfter {
                try await clock.sleep(for: answerAfter)
            } else {
                try await never.sleep(for: .seconds(86_400))
            }
        } catch {
            cancelled.withValue { $0.append(name) }
            throw error
        }
        answered.withValue { $0.append(name) }
    }

    func activate(_ token: TokenRecord) async throws { try await answer("activate", token) }
    func suspend(_ token: TokenRecord) async throws { try await answer("suspend", token) }
    func resume(_ token: TokenRecord) async throws { try await answer("resume", token) }
    func deactivate(_ token: TokenRecord) async throws { try await answer("deactivate", token) }
}

/// A token service that counts its calls and answers each at once.
struct CountingConnector: TokenServiceConnector {
    let calls: Locked<Int>
    func activate(_ token: TokenRecord) async throws { calls.withValue { $0 += 1 } }
    func suspend(_ token: TokenRecord) async throws { calls.withValue { $0 += 1 } }
    func resume(_ token: TokenRecord) async throws { calls.withValue { $0 += 1 } }
    func deactivate(_ token: TokenRecord) async throws { calls.withValue { $0 += 1 } }
}

/// A token service whose `activate` ignores cancellation and succeeds when the test says so.
struct StubbornConnector: TokenServiceConnector {
    let gate = Locked<CheckedContinuation<Void, Never>?>(nil)
    let cancelled = Locked(false)

    func activate(_ token: TokenRecord) async throws {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in gate.withValue { $0 = continuation } }
        } onCancel: {
            cancelled.withValue { $0 = true }
        }
    }
    func suspend(_ token: TokenRecord) async throws {}
    func resume(_ token: TokenRecord) async throws {}
    func deactivate(_ token: TokenRecord) async throws {}

    /// Waits until the command is under way and has been cancelled, then lets it succeed.
    func succeedAfterCancellation() async {
        while true {
            let continuation = gate.withValue { gate -> CheckedContinuation<Void, Never>? in
                guard cancelled.current, let waiting = gate else { return nil }
                gate = nil
                return waiting
            }
            if let continuation {
                continuation.resume()
                return
            }
            await Task.yield()
        }
    }
}

@Suite("Token service time limit")
struct ConnectorTimeoutTests {
    static let limit: Duration = .seconds(10)

    static func activate(_ api: APIClient, _ reference: String) async throws -> TokenActivationResponse {
        try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: reference)).decode(TokenActivationResponse.self)
    }

    /// An INACTIVE token of card c1.
    static let inactiveToken = TokenRecord(
        tokenUniqueReference: "T1", externalCardId: "c1", panUniqueReference: "PUR-c1", userId: "alice", deviceType: .phone, status: .inactive,
        authorizationPath: .yellow, suspendedBy: nil, tokenLast4: nil, createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0)
    )

    /// Activates `token` through `connector` on a task of its own; its error, once it ends, in `outcome`.
    static func activation(_ token: TokenRecord, through connector: some TokenServiceConnector) -> (call: Task<Void, Never>, outcome: Locked<(any Error)?>) {
        let outcome = Locked<(any Error)?>(nil)
        let call = Task {
            do { try await connector.activate(token) } catch { outcome.withValue { $0 = error } }
        }
        return (call, outcome)
    }

    /// Polls `condition` until it holds or 20 s have passed.
    static func waitUntil(_ condition: () -> Bool) async throws {
        let started = ContinuousClock.now
        while !condition(), ContinuousClock.now - started < .seconds(20) { try await Task.sleep(for: .milliseconds(2)) }
    }

    static func patch(_ api: APIClient, _ id: String, _ status: CardStatus) async throws -> LifecycleService.StatusChange {
        try await api.send(.patch, "/lifecycle/cards/\(id)", as: .issuer, json: CardStatusChangeRequest(status: status)).decode(LifecycleService.StatusChange.self)
    }

    @Test func anActivationTheTokenServiceNeverAnswersFailsAtTheLimitAndCancelsTheCall() async throws {
        let clock = ManualClock()
        let tsp = SlowConnector(clock: clock, answerAfter: nil)
        let platform = try await TestPlatform(policy: .inApp, tokenService: tsp, connectorClock: clock)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice", pan: "4111111111111111")
            try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.tokenStatus("T1") == .inactive)
            async let reply = Self.activate(api, "T1")
            await clock.waitForSleepers(1)
            await tsp.never.waitForSleepers(1)
            clock.advance(by: Self.limit)
            let answer = try await reply
            #expect(answer.issuerMobileAppAuthResponse == .failed)
            #expect(try await api.tokenStatus("T1") == .inactive)
            // The caller is answered at the limit; the cancelled command ends in its own time.
            try await Self.waitUntil { tsp.cancelled.current == ["activate T1"] }
            #expect(tsp.cancelled.current == ["activate T1"])
            #expect(tsp.answered.current.isEmpty)
            #expect(clock.requestedSleeps == [Self.limit])
            let logs = platform.logs.current
            #expect(logs.contains { $0.contains("the token service did not answer activate within 10 s") })
            #expect(!logs.contains { $0.contains("4111111111111111") })
        }
    }

    @Test func anAnswerJustInsideTheLimitSucceeds() async throws {
        let clock = ManualClock()
        let tsp = SlowConnector(clock: clock, answerAfter: Self.limit - .milliseconds(1))
        let platform = try await TestPlatform(policy: .inApp, tokenService: tsp, connectorClock: clock)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            async let reply = Self.activate(api, "T1")
            await clock.waitForSleepers(2)
            clock.advance(by: Self.limit - .milliseconds(1))
            #expect(try await reply.issuerMobileAppAuthResponse == .approved)
            #expect(try await api.tokenStatus("T1") == .active)
            #expect(tsp.answered.current == ["activate T1"])
            #expect(tsp.cancelled.current.isEmpty)
        }
    }

    @Test func aBlockOnAHungTokenServiceFinishesAtTheLimitAndReportsEveryTokenFailed() async throws {
        let clock = ManualClock()
        let tsp = SlowConnector(clock: clock, answerAfter: nil)
        let platform = try await TestPlatform(policy: .immediate, tokenService: tsp, connectorClock: clock)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            for (reference, device) in [("T1", DeviceType.phone), ("T2", .watch), ("T3", .phone)] {
                try await api.provision("c1", user: "alice", device: device, token: reference)
            }
            async let block = Self.patch(api, "c1", .blocked)
            // All three commands are under way at once: the change takes one limit, not three.
            await clock.waitForSleepers(3)
            await tsp.never.waitForSleepers(3)
            clock.advance(by: Self.limit)
            let change = try await block
            #expect(change.card.status == .blocked)
            #expect(change.tokens.map(\.tokenUniqueReference) == ["T1", "T2", "T3"])
            #expect(change.tokens.map(\.result) == ["FAILED", "FAILED", "FAILED"])
            #expect(change.tokens.map(\.status) == [.active, .active, .active])
            for reference in ["T1", "T2", "T3"] {
                #expect(try await api.tokenStatus(reference) == .active)
            }
            #expect(Set(tsp.cancelled.current) == ["suspend T1", "suspend T2", "suspend T3"])
        }
    }

    @Test func aStatusChangeRunsAtMostEightCommandsAtOnceAndKeepsTheTokensOrder() async throws {
        let clock = ManualClock()
        let tsp = SlowConnector(clock: clock, answerAfter: nil)
        let platform = try await TestPlatform(policy: .immediate, tokenService: tsp, connectorClock: clock)
        let references = (1...10).map { String(format: "T%02d", $0) }
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            for reference in references {
                try await api.provision("c1", user: "alice", token: reference)
            }
            async let close = Self.patch(api, "c1", .closed)
            await clock.waitForSleepers(8)
            await tsp.never.waitForSleepers(8)
            #expect(tsp.started.current.count == 8)
            clock.advance(by: Self.limit)
            // The two left start as the first ones end.
            await clock.waitForSleepers(2)
            clock.advance(by: Self.limit)
            let change = try await close
            #expect(change.card.status == .closed)
            #expect(change.tokens.map(\.tokenUniqueReference) == references)
            #expect(Set(change.tokens.map(\.result)) == ["FAILED"])
            #expect(tsp.cancelled.current.count == 10)
        }
    }

    @Test func aCustomerServiceCommandOnAHungTokenServiceAnswers503AndChangesNothing() async throws {
        let clock = ManualClock()
        let tsp = SlowConnector(clock: clock, answerAfter: nil)
        let platform = try await TestPlatform(policy: .immediate, tokenService: tsp, connectorClock: clock)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            async let reply = api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            await clock.waitForSleepers(1)
            clock.advance(by: Self.limit)
            let answer = try await reply
            #expect(answer.status == .serviceUnavailable)
            #expect(answer.error?.code == "token_service_unavailable")
            #expect(try await api.tokenStatus("T1") == .active)
            // The caller is answered at the limit; the cancelled command ends in its own time.
            try await Self.waitUntil { tsp.cancelled.current == ["suspend T1"] }
            #expect(tsp.cancelled.current == ["suspend T1"])
        }
    }

    @Test func aLateAnswerOfACommandThatIgnoresCancellationIsIgnored() async throws {
        let clock = ManualClock()
        let stubborn = StubbornConnector()
        let connector = TimeLimitedTokenServiceConnector(stubborn, limit: Self.limit, clock: clock)
        let token = Self.inactiveToken
        let call = Task { try await connector.activate(token) }
        await clock.waitForSleepers(1)
        clock.advance(by: Self.limit)
        await stubborn.succeedAfterCancellation()
        let error = await #expect(throws: TimeLimitedTokenServiceConnector.TimedOut.self) { try await call.value }
        #expect(error?.command == "activate" && error?.limit == Self.limit)
    }

    @Test func aCommandThatIgnoresCancellationDoesNotHoldItsCallerPastTheLimit() async throws {
        let clock = ManualClock()
        let stubborn = StubbornConnector()
        let connector = TimeLimitedTokenServiceConnector(stubborn, limit: Self.limit, clock: clock)
        let token = Self.inactiveToken
        let (call, outcome) = Self.activation(token, through: connector)
        await clock.waitForSleepers(1)
        clock.advance(by: Self.limit)
        // The command is still stuck (it ignores its cancellation); its caller is answered anyway.
        try await Self.waitUntil { outcome.current != nil }
        #expect(outcome.current is TimeLimitedTokenServiceConnector.TimedOut, "\(String(describing: outcome.current))")
        #expect(stubborn.cancelled.current, "the command was cancelled")
        await stubborn.succeedAfterCancellation()
        await call.value
    }

    @Test func aCallerCancelledWhileItsCommandIsStuckIsAnsweredAtOnce() async throws {
        let stubborn = StubbornConnector()
        let connector = TimeLimitedTokenServiceConnector(stubborn, limit: Self.limit, clock: ManualClock())
        let token = Self.inactiveToken
        let (call, outcome) = Self.activation(token, through: connector)
        while stubborn.gate.current == nil { try await Task.sleep(for: .milliseconds(1)) }
        call.cancel()
        try await Self.waitUntil { outcome.current != nil }
        #expect(outcome.current is CancellationError, "\(String(describing: outcome.current))")
        await stubborn.succeedAfterCancellation()
        await call.value
    }

    @Test func noCommandOvertakesOneGivenUpThatHasNotReturned() async throws {
        let clock = ManualClock()
        let stubborn = StubbornConnector()
        let connector = TimeLimitedTokenServiceConnector(stubborn, limit: Self.limit, clock: clock)
        let (call, outcome) = Self.activation(Self.inactiveToken, through: connector)
        await clock.waitForSleepers(1)
        clock.advance(by: Self.limit)
        try await Self.waitUntil { outcome.current != nil }
        #expect(outcome.current is TimeLimitedTokenServiceConnector.TimedOut)
        #expect(connector.unfinishedCommands == 1)
        // The stuck activation may still reach the token service: nothing for its token is sent
        // meanwhile (a suspend would succeed at once if it were).
        let refused = await #expect(throws: TimeLimitedTokenServiceConnector.EarlierCommandUnfinished.self) { try await connector.suspend(Self.inactiveToken) }
        #expect(refused?.description == "suspend not sent: the token service has not yet answered an earlier command for this token, given up at its time limit")
        // Another token's commands go on.
        var other = Self.inactiveToken
        other.tokenUniqueReference = "T2"
        try await connector.suspend(other)
        // Once the stuck command returns, its token's commands are sent again.
        await stubborn.succeedAfterCancellation()
        await call.value
        try await Self.waitUntil { connector.unfinishedCommands == 0 }
        #expect(connector.unfinishedCommands == 0)
        try await connector.suspend(Self.inactiveToken)
    }

    /// Through the server, the hold-back spans requests: an activation given up at the limit
    /// holds back customer service's deactivation of its token until the activation returns.
    @Test func noRequestSendsACommandThatWouldOvertakeOneGivenUp() async throws {
        let clock = ManualClock()
        let stubborn = StubbornConnector()
        let platform = try await TestPlatform(policy: .inApp, tokenService: stubborn, connectorClock: clock)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            async let reply = Self.activate(api, "T1")
            await clock.waitForSleepers(1)
            clock.advance(by: Self.limit)
            #expect(try await reply.issuerMobileAppAuthResponse == .failed)
            #expect(platform.environment.unfinishedTokenServiceCommands == 1)
            let gauge = try await api.send(.get, "/metrics").text.split(separator: "\n").first { $0.hasPrefix("pushprov_lifecycle_token_service_commands_unfinished ") }
            #expect(gauge.map { Double($0.split(separator: " ")[1]) } == 1, "\(gauge ?? "no gauge")")
            let held = try await api.send(.post, "/lifecycle/tokens/T1/deactivate", as: .issuer)
            #expect(held.status == .serviceUnavailable && held.error?.code == "token_service_unavailable", "\(held.text)")
            #expect(try await api.tokenStatus("T1") == .inactive)
            #expect(platform.logs.current.contains { $0.contains("deactivate not sent: the token service has not yet answered an earlier command for this token") })
            // Once the activation returns, the deactivation goes out.
            await stubborn.succeedAfterCancellation()
            try await Self.waitUntil { platform.environment.unfinishedTokenServiceCommands == 0 }
            let deactivated = try await api.send(.post, "/lifecycle/tokens/T1/deactivate", as: .issuer)
            #expect(try deactivated.decode(TokenResource.self).status == .deactivated)
        }
    }

    @Test func aCallerCancelledBeforeItsCommandSendsNothing() async throws {
        let stubborn = StubbornConnector()
        let connector = TimeLimitedTokenServiceConnector(stubborn, limit: Self.limit, clock: ManualClock())
        let call = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await connector.activate(Self.inactiveToken)
        }
        let refused = await #expect(throws: TimeLimitedTokenServiceConnector.CancelledBeforeSending.self) { try await call.value }
        #expect(refused?.description == "activate not sent: its caller was cancelled first")
        #expect(TokenServiceCommandOutcome.neverSent(try #require(refused)))
        try await Task.sleep(for: .milliseconds(50))
        #expect(stubborn.gate.current == nil, "the connector was not called")
        #expect(connector.unfinishedCommands == 0)
    }

    /// With no time at all, the limit often passes before the command is handed over: only
    /// then is it "not sent", and then the connector was never called.
    @Test func aCommandTimedOutBeforeItWasHandedOverWasNeverSent() async throws {
        let calls = Locked(0)
        let connector = TimeLimitedTokenServiceConnector(CountingConnector(calls: calls), limit: .zero)
        for _ in 0..<200 {
            let before = calls.current
            do {
                try await connector.suspend(Self.inactiveToken)
            } catch let error as TimeLimitedTokenServiceConnector.TimedOutBeforeSending {
                #expect(error.description == "suspend not sent: its limit of 0 s passed before it could be handed to the token service")
                // The command task may still be starting: give it time to call, were it going to.
                try await Task.sleep(for: .milliseconds(1))
                #expect(calls.current == before, "a command reported not sent reached the connector")
            } catch is TimeLimitedTokenServiceConnector.TimedOut {
                // Handed over, then given up at the limit.
            } catch is TimeLimitedTokenServiceConnector.EarlierCommandUnfinished {
                // The command given up before this one had not returned yet: this one is held
                // back, never handed over (a loaded machine lets that happen now and then). The
                // earlier one may still reach the connector meanwhile, so no count is checked.
            }
        }
    }

    @Test func aCommandThatFailsInTimeFailsWithItsOwnError() async throws {
        let connector = TimeLimitedTokenServiceConnector(UnconfiguredTokenServiceConnector(), limit: Self.limit, clock: ManualClock())
        let token = TokenRecord(
            tokenUniqueReference: "T1", externalCardId: "c1", panUniqueReference: "PUR-c1", userId: "alice", deviceType: .phone, status: .active,
            authorizationPath: .green, suspendedBy: nil, tokenLast4: nil, createdAt: Date(timeIntervalSince1970: 0), updatedAt: Date(timeIntervalSince1970: 0)
        )
        await #expect(throws: UnconfiguredTokenServiceConnector.NotConfigured.self) { try await connector.suspend(token) }
    }
}
