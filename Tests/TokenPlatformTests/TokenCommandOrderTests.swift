import Foundation
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import Testing
@testable import TokenPlatform

/// One token's token service commands run one at a time in a process, from decision to record.
@Suite("Token command order", .timeLimit(.minutes(1)))
struct TokenCommandOrderTests {
    /// Waits (up to `limit`) until `condition` holds; an issue if it never does.
    static func eventually(_ what: String, within limit: Duration = .seconds(30), _ condition: @Sendable () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + limit
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("never happened: \(what)", sourceLocation: sourceLocation)
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// What the token service holds for `reference` after the commands it carried out.
    static func held(_ reference: String, after commands: [String]) -> TokenStatus? {
        commands.reduce(nil as TokenStatus?) { status, entry in
            let parts = entry.split(separator: " ")
            guard parts.count == 2, parts[1] == reference else { return status }
            return switch parts[0] {
            case "activate", "resume": .active
            case "suspend": .suspended
            case "deactivate": .deactivated
            default: status
            }
        }
    }

    /// A long patience on a clock that never moves unless a test moves it.
    static let clock = ManualClock()
    static let patience: Duration = .seconds(30)

    /// Runs `body` in `reference`'s place with the long patience.
    static func run<T>(_ order: TokenCommandOrder, _ reference: String, clock: ManualClock = Self.clock, _ body: () async throws -> T) async throws -> T {
        try await order.run(reference, patience: patience, clock: clock, body)
    }

    /// Holds `reference`'s place until `gate` opens (in a task of its own); returns once the
    /// place is taken.
    static func hold(_ order: TokenCommandOrder, _ reference: String, until gate: AsyncGate) async throws -> Task<Void, any Error> {
        let taken = AsyncGate()
        let holder = Task {
            try await Self.run(order, reference) {
                taken.open()
                await gate.wait()
            }
        }
        await taken.wait()
        return holder
    }

    @Test func commandsForOneTokenRunOneAtATimeInTheOrderTheyCame() async throws {
        let order = TokenCommandOrder()
        let log = Locked<[String]>([])
        let gate = AsyncGate()
        let first = try await Self.hold(order, "T1", until: gate)
        let second = Task { try await Self.run(order, "T1") { log.withValue { $0.append("second") } } }
        try await Self.eventually("the second command waits") { order.waiting == 1 }
        let third = Task { try await Self.run(order, "T1") { log.withValue { $0.append("third") } } }
        try await Self.eventually("the third command waits") { order.waiting == 2 }
        // Another token does not wait.
        try await Self.run(order, "T2") { log.withValue { $0.append("other token") } }
        #expect(log.current == ["other token"])
        gate.open()
        try await first.value
        try await second.value
        try await third.value
        #expect(log.current == ["other token", "second", "third"])
        #expect(order.waiting == 0)
    }

    @Test func aCommandRunWhileItsTokensPlaceIsHeldGoesAheadInThatPlace() async throws {
        let order = TokenCommandOrder()
        let ran = try await Self.run(order, "T1") {
            // A correction the first command's outcome calls for, in the same task.
            try await Self.run(order, "T1") { "nested" }
        }
        #expect(ran == "nested")
        // Its place was given back: the next command does not wait.
        #expect(try await order.runIfFree("T1") { 1 } == 1)
    }

    @Test func aPlaceHeldInOneOrderIsNotHeldInAnother() async throws {
        let (one, other) = (TokenCommandOrder(), TokenCommandOrder())
        let gate = AsyncGate()
        let holder = try await Self.hold(other, "T1", until: gate)
        // Holding T1 in `one` does not let this task past `other`'s T1.
        let passed = try await Self.run(one, "T1") { try await other.runIfFree("T1") { true } }
        #expect(passed == nil)
        gate.open()
        try await holder.value
    }

    @Test func workStartedOutsideAnyPlaceWaitsLikeAnyOtherCommand() async throws {
        let order = TokenCommandOrder()
        let nested = try await Self.run(order, "T1") {
            await TokenCommandOrder.outsideAnyPlace { try? await order.runIfFree("T1") { "ran" } }
        }
        #expect(nested == nil)
    }

    @Test func runIfFreeRunsNothingWhileTheTokenHasACommandInProgress() async throws {
        let order = TokenCommandOrder()
        let gate = AsyncGate()
        let holder = try await Self.hold(order, "T1", until: gate)
        #expect(try await order.runIfFree("T1") { "ran" } == nil)
        #expect(try await order.runIfFree("T2") { "ran" } == "ran")
        gate.open()
        try await holder.value
        #expect(try await order.runIfFree("T1") { "ran" } == "ran")
    }

    @Test func referencesAreTheSameTokenOnlyByteForByte() async throws {
        let order = TokenCommandOrder()
        let gate = AsyncGate()
        let holder = try await Self.hold(order, "T\u{E9}", until: gate)
        // The same bytes wait; "é" decomposed, an equal Swift string, is another token to the store.
        #expect(try await order.runIfFree("T\u{E9}") { "ran" } == nil)
        #expect(try await order.runIfFree("Te\u{301}") { "ran" } == "ran")
        gate.open()
        try await holder.value
    }

    @Test func anErrorGivesThePlaceToTheNextCommand() async throws {
        let order = TokenCommandOrder()
        let (gate, taken) = (AsyncGate(), AsyncGate())
        let failing = Task {
            try await Self.run(order, "T1") {
                taken.open()
                await gate.wait()
                throw URLError(.timedOut)
            }
        }
        await taken.wait()
        let next = Task { try await Self.run(order, "T1") { "next" } }
        try await Self.eventually("the next command waits") { order.waiting == 1 }
        gate.open()
        await #expect(throws: URLError.self) { try await failing.value }
        #expect(try await next.value == "next")
        #expect(try await order.runIfFree("T1") { true } == true)
    }

    @Test func aCommandWaitsAtMostItsPatienceAndSendsNothingThen() async throws {
        let order = TokenCommandOrder()
        let clock = ManualClock()
        let gate = AsyncGate()
        let holder = try await Self.hold(order, "T1", until: gate)
        let ran = Locked(false)
        let late = Task { try await Self.run(order, "T1", clock: clock) { ran.withValue { $0 = true } } }
        await clock.waitForSleepers(1)
        #expect(order.waiting == 1)
        clock.advance(by: Self.patience)
        await #expect(throws: TokenCommandOrder.TurnNotReached.self) { try await late.value }
        #expect(order.waiting == 0)
        gate.open()
        try await holder.value
        #expect(!ran.current)
        // The place is free again (the patience's end left nothing behind in the line).
        #expect(try await order.runIfFree("T1") { true } == true)
    }

    @Test func aCancelledCommandLeavesTheLineAtOnce() async throws {
        let order = TokenCommandOrder()
        let gate = AsyncGate()
        let holder = try await Self.hold(order, "T1", until: gate)
        let ran = Locked(false)
        let cancelled = Task { try await Self.run(order, "T1") { ran.withValue { $0 = true } } }
        try await Self.eventually("the command waits") { order.waiting == 1 }
        let after = Task { try await Self.run(order, "T1") { "after" } }
        try await Self.eventually("the next command waits") { order.waiting == 2 }
        cancelled.cancel()
        await #expect(throws: TokenCommandOrder.TurnNotReached.self) { try await cancelled.value }
        #expect(order.waiting == 1)
        gate.open()
        try await holder.value
        #expect(try await after.value == "after")
        #expect(!ran.current)
    }

    /// Customer service suspends a token, and while the suspension is with the token service
    /// the card is blocked and unblocked. The block's and the unblock's commands for the token
    /// wait for the suspension to be recorded and are decided then: the token is customer
    /// service's suspension, so neither sends anything that resumes it. Before, the block
    /// suspended and the unblock resumed it at the token service, and customer service's
    /// suspension was recorded last: TMP recorded SUSPENDED while the token paid.
    @Test func aCustomerServiceSuspensionOvertakenByABlockAndAnUnblockEndsSuspendedAtBothEnds() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            let flips = Locked<Task<[APIClient.Reply], any Error>?>(nil)
            let gauge = Locked<String?>(nil)
            let once = Locked(false)
            platform.connector.meanwhile.withValue { $0 = { command, token in
                guard command == "suspend", token.tokenUniqueReference == "T1", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                let task = Task {
                    [try await LifecycleRaceTests.patch(api, "c1", .blocked), try await LifecycleRaceTests.patch(api, "c1", .active)]
                }
                flips.withValue { $0 = task }
                // The block's command for T1 waits for this one (with the order off, both
                // changes would finish first).
                try await Self.eventually("the block's command waits") { platform.environment.tokenServiceCommandsWaiting > 0 }
                let metrics = try await api.send(.get, "/metrics").text
                gauge.withValue { $0 = metrics.split(separator: "\n").first { $0.hasPrefix("pushprov_lifecycle_token_service_commands_waiting ") }.map(String.init) }
            } }
            let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(suspended.status == .ok, "\(suspended.text)")
            let replies = try #require(try await flips.current?.value)
            #expect(replies.map(\.status) == [.ok, .ok], "\(replies.map(\.text))")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .customerService)
            let commands = platform.connector.commands.current
            #expect(Self.held("T1", after: commands) == .suspended, "\(commands)")
            #expect(!commands.contains("resume T1"), "\(commands)")
            // The block found the token suspended by customer service: nothing to send.
            #expect(replies[0].text.contains("\"UNCHANGED\""), "\(replies[0].text)")
            #expect(platform.environment.tokenServiceCommandsWaiting == 0)
            #expect(gauge.current == "pushprov_lifecycle_token_service_commands_waiting 1.0")
        }
    }

    // MARK: Leases (instances sharing a database)

    /// Two instances' orders on one database: each its own order and lease holder.
    static func instances(_ store: any TMPStore, duration: Duration = .seconds(60), abandoned: @escaping @Sendable (String) -> Bool = { _ in false }) -> [(TokenCommandOrder, TokenCommandOrder.Lease)] {
        ["A", "B"].map { (TokenCommandOrder(), TokenCommandOrder.Lease(store: store, holder: $0, duration: duration, abandoned: abandoned)) }
    }

    /// Runs `body` in `reference`'s place of `instance`, with a real-time patience.
    static func run<T>(_ instance: (TokenCommandOrder, TokenCommandOrder.Lease), _ reference: String, patience: Duration = .seconds(30), _ body: () async throws -> T) async throws -> T {
        try await instance.0.run(reference, patience: patience, clock: ContinuousClock(), lease: instance.1, body)
    }

    @Test func anotherInstancesCommandWaitsForTheLeaseAndRunsOnceItIsGivenBack() async throws {
        let store = try await TestTMP.memoryStore()
        let (a, b) = { let both = Self.instances(store); return (both[0], both[1]) }()
        let log = Locked<[String]>([])
        let (gate, taken) = (AsyncGate(), AsyncGate())
        let first = Task { try await Self.run(a, "T1") { taken.open(); await gate.wait(); log.withValue { $0.append("A") } } }
        await taken.wait()
        let second = Task { try await Self.run(b, "T1") { log.withValue { $0.append("B") } } }
        try await Self.eventually("B waits for A's lease") { b.0.waiting == 1 }
        // Another token's lease is free.
        #expect(try await b.0.runIfFree("T2", lease: b.1) { "ran" } == "ran")
        #expect(try await b.0.runIfFree("T1", lease: b.1) { "ran" } == nil)
        gate.open()
        try await first.value
        try await second.value
        #expect(log.current == ["A", "B"])
        #expect(b.0.waiting == 0)
        #expect(try await store.takeTokenCommandLease(reference: "T1", holder: "C", for: .seconds(1)), "B gave it back")
    }

    @Test func aCommandWaitingForAnotherInstancesLeaseGivesUpAfterItsPatience() async throws {
        let store = try await TestTMP.memoryStore()
        let (a, b) = { let both = Self.instances(store); return (both[0], both[1]) }()
        let (gate, taken) = (AsyncGate(), AsyncGate())
        let first = Task { try await Self.run(a, "T1") { taken.open(); await gate.wait() } }
        await taken.wait()
        let ran = Locked(false)
        await #expect(throws: TokenCommandOrder.TurnNotReached.self) {
            try await Self.run(b, "T1", patience: .milliseconds(100)) { ran.withValue { $0 = true } }
        }
        #expect(!ran.current && b.0.waiting == 0)
        gate.open()
        try await first.value
    }

    @Test func theLeaseIsGivenBackWhenTheCommandFailsOrItsCallerIsCancelled() async throws {
        let store = try await TestTMP.memoryStore()
        let (a, b) = { let both = Self.instances(store); return (both[0], both[1]) }()
        await #expect(throws: URLError.self) { try await Self.run(a, "T1") { throw URLError(.timedOut) } }
        #expect(try await b.0.runIfFree("T1", lease: b.1) { true } == true)
        let (gate, taken) = (AsyncGate(), AsyncGate())
        let cancelled = Task { try await Self.run(a, "T1") { taken.open(); await gate.wait(); try Task.checkCancellation() } }
        await taken.wait()
        cancelled.cancel()
        gate.open()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        // Given back from a cancelled task all the same (the database refuses a cancelled task's writes).
        #expect(try await b.0.runIfFree("T1", lease: b.1) { true } == true)
    }

    @Test func aLeaseIsKeptWhileATokensCommandGivenUpAtItsTimeLimitStillRuns() async throws {
        let store = try await TestTMP.memoryStore()
        let abandoned = Locked(true)
        let both = Self.instances(store, abandoned: { _ in abandoned.current })
        try await Self.run(both[0], "T1") {}
        // Not given back: the other instance is held off until it expires.
        #expect(try await both[1].0.runIfFree("T1", lease: both[1].1) { true } == nil)
    }

    @Test func aLeaseIsRenewedWhileItsCommandRunsAndNoLongerOnceItIsGivenBack() async throws {
        let store = FaultyStore(base: try await TestTMP.memoryStore())
        // A lease of 3 s, renewed every second.
        let both = Self.instances(store, duration: .seconds(3))
        let takes = { @Sendable in store.leaseTakes.current.filter { $0 == "A T1" }.count }
        try await Self.run(both[0], "T1") {
            // Taken, then renewed while the command runs (however late the renewal comes on a
            // loaded machine: waited for, not timed).
            try await Self.eventually("a renewal", within: .seconds(30)) { takes() >= 2 }
            // Still A's: another instance is refused.
            #expect(try await both[1].0.runIfFree("T1", lease: both[1].1) { true } == nil)
        }
        let after = takes()
        try await Task.sleep(for: .milliseconds(1500))
        #expect(takes() == after, "renewed after it was given back")
        #expect(try await both[1].0.runIfFree("T1", lease: both[1].1) { true } == true)
    }

    /// The single-process counterpart of the races between instances in `LifecycleRouteTests`
    /// (aCustomerServiceCommandOvertakenByTheCardIsAConflict): the card's status changes while
    /// a customer-service command is with the token service.
    /// - A close: its deactivation of the token waits for customer service's suspension to be
    ///   recorded (200), then deactivates the token.
    /// - A block: the token is still suspended by customer service when the block reads it, so
    ///   the block owes it nothing and does not wait; customer service's resume, recorded after
    ///   the block, is undone at the token service and is `409 card_not_active`, the token
    ///   suspended by the block.
    @Test(arguments: [
        (LifecycleService.TokenAction.suspend, CardStatus.closed, 200, TokenStatus.deactivated, nil as SuspensionSource?, ["suspend T1", "deactivate T1"]),
        (.resume, .blocked, 409, .suspended, .cardBlocked, ["suspend T1", "resume T1", "suspend T1"]),
    ])
    func aCustomerServiceCommandRacingTheCardsStatusEndsAsTheCardAsks(
        action: LifecycleService.TokenAction, cardBecomes: CardStatus, answered: Int, ends: TokenStatus, suspendedBy: SuspensionSource?, commands: [String]
    ) async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            if action == .resume {
                #expect(try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer).status == .ok)
            }
            let change = Locked<Task<APIClient.Reply, any Error>?>(nil)
            let changed = Locked(false)
            let once = Locked(false)
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == action.rawValue, !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                change.withValue { $0 = Task {
                    defer { changed.withValue { $0 = true } }
                    return try await LifecycleRaceTests.patch(api, "c1", cardBecomes)
                } }
                // The change is either waiting for this command or done.
                try await Self.eventually("the card's change waits or is done") { platform.environment.tokenServiceCommandsWaiting > 0 || changed.current }
                #expect(changed.current == (cardBecomes == .blocked))
            } }
            let reply = try await api.send(.post, "/lifecycle/tokens/T1/\(action.rawValue)", as: .issuer)
            #expect(reply.status.code == answered, "\(reply.text)")
            let changeReply = try #require(try await change.current?.value)
            #expect(changeReply.status == .ok, "\(changeReply.text)")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == ends && token?.suspendedBy == suspendedBy)
            #expect(platform.connector.commands.current == commands)
            #expect(Self.held("T1", after: commands) == ends)
        }
    }

    /// A card status change's command whose token cannot be read again in its turn (the
    /// database failing for that read) is sent as it was decided, not dropped: the block's
    /// suspension reaches the token service and is recorded, and the failed read is logged.
    @Test func aCardsCommandIsSentAsDecidedWhenItsTokenCannotBeReadAgain() async throws {
        let store = FaultyStore(base: try await TestTMP.memoryStore())
        let platform = try TestPlatform(policy: .immediate, store: store, secrets: .init())
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            store.tokenReadFailure.withValue { $0 = URLError(.cannotConnectToHost) }
            let blocked = try await LifecycleRaceTests.patch(api, "c1", .blocked)
            store.tokenReadFailure.withValue { $0 = nil }
            #expect(blocked.status == .ok)
            #expect(blocked.text.contains("\"SUSPENDED\""), "\(blocked.text)")
            #expect(platform.connector.commands.current.last == "suspend T1")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .cardBlocked)
            #expect(platform.logs.current.contains { $0.contains("could not read a token again before its command") })
        }
    }

    /// The token service's event for a token whose command is in progress is recorded and
    /// answered without waiting for that command (the token service may be waiting for the
    /// answer), and its correction runs at once: the event can say something newer than the
    /// command's outcome. Here the token service resumes the token on its own while the block's
    /// suspension is in progress, and reports it: the token is suspended again there, and not
    /// left paying once the block's suspension is recorded.
    @Test func anEventArrivingWhileItsTokensCommandIsInProgressIsCorrectedWithoutWaitingForIt() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            let echo = Locked<APIClient.Reply?>(nil)
            let once = Locked(false)
            platform.connector.meanwhile.withValue { $0 = { command, token in
                guard command == "suspend", token.tokenUniqueReference == "T1", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                let reply = try await api.event("T1", pur: card.panUniqueReference, .resumed)
                echo.withValue { $0 = reply }
            } }
            let blocked = try await LifecycleRaceTests.patch(api, "c1", .blocked)
            #expect(blocked.status == .ok)
            #expect(echo.current?.status == .ok, "\(echo.current?.text ?? "no reply")")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .cardBlocked)
            // The block's suspension, then the correction of the token service's own resume.
            #expect(platform.connector.commands.current.filter { $0.hasSuffix(" T1") }.suffix(2) == ["suspend T1", "suspend T1"], "\(platform.connector.commands.current)")
        }
    }
}
