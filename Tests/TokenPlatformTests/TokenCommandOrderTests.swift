import Foundation
import ProvisioningModels
import SDKTestSupport
import Testing
@testable import TokenPlatform

/// One token's token service commands run one at a time in a process, from decision to record.
@Suite("Token command order")
struct TokenCommandOrderTests {
    /// Waits (up to 5 s) until `condition` holds.
    static func eventually(_ condition: @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
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

    @Test func commandsForOneTokenRunOneAtATimeInTheOrderTheyCame() async throws {
        let order = TokenCommandOrder()
        let log = Locked<[String]>([])
        let gate = Locked(false)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await order.run("T1") {
                    log.withValue { $0.append("first starts") }
                    try await Self.eventually { gate.current }
                    log.withValue { $0.append("first ends") }
                }
            }
            try await Self.eventually { log.current.count == 1 }
            group.addTask { try await order.run("T1") { log.withValue { $0.append("second") } } }
            try await Self.eventually { order.waiting == 1 }
            group.addTask { try await order.run("T1") { log.withValue { $0.append("third") } } }
            try await Self.eventually { order.waiting == 2 }
            // Another token does not wait.
            try await order.run("T2") { log.withValue { $0.append("other token") } }
            #expect(log.current == ["first starts", "other token"])
            gate.withValue { $0 = true }
            try await group.waitForAll()
        }
        #expect(log.current == ["first starts", "other token", "first ends", "second", "third"])
        #expect(order.waiting == 0)
    }

    @Test func aCommandRunWhileItsTokensPlaceIsHeldGoesAheadInThatPlace() async throws {
        let order = TokenCommandOrder()
        let ran = try await order.run("T1") {
            // A correction the first command's outcome calls for, in the same task.
            try await order.run("T1") { "nested" }
        }
        #expect(ran == "nested")
        // Its place was given back: the next command does not wait.
        #expect(try await order.run("T1") { 1 } == 1)
    }

    @Test func runIfFreeRunsNothingWhileTheTokenHasACommandInProgress() async throws {
        let order = TokenCommandOrder()
        let gate = Locked(false)
        let started = Locked(false)
        async let first: Void = order.run("T1") {
            started.withValue { $0 = true }
            try await Self.eventually { gate.current }
        }
        try await Self.eventually { started.current }
        let busy = try await order.runIfFree("T1") { "ran" }
        #expect(busy == nil)
        #expect(try await order.runIfFree("T2") { "ran" } == "ran")
        gate.withValue { $0 = true }
        try await first
        #expect(try await order.runIfFree("T1") { "ran" } == "ran")
    }

    @Test func referencesAreTheSameTokenOnlyByteForByte() async throws {
        let order = TokenCommandOrder()
        let gate = Locked(false)
        let started = Locked(false)
        async let first: Void = order.run("T\u{E9}") {
            started.withValue { $0 = true }
            try await Self.eventually { gate.current }
        }
        try await Self.eventually { started.current }
        // "é" composed and decomposed are equal Swift strings, but two tokens to the store.
        #expect(try await order.runIfFree("Te\u{301}") { "ran" } == "ran")
        gate.withValue { $0 = true }
        try await first
    }

    @Test func anErrorGivesThePlaceBack() async throws {
        let order = TokenCommandOrder()
        await #expect(throws: URLError.self) { try await order.run("T1") { throw URLError(.timedOut) } }
        #expect(try await order.runIfFree("T1") { true } == true)
    }

    /// Customer service suspends a token, and while the suspension is with the token service
    /// the card is blocked and unblocked. The block's and the unblock's commands for the token
    /// wait for the suspension to be recorded and are decided then: the token is customer
    /// service's suspension, so neither sends anything that resumes it. Before, the block
    /// suspended and the unblock resumed it at the token service, and customer service's
    /// suspension was recorded last: TMP recorded SUSPENDED while the token paid.
    @Test(.timeLimit(.minutes(1))) func aCustomerServiceSuspensionOvertakenByABlockAndAnUnblockEndsSuspendedAtBothEnds() async throws {
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
                try await Self.eventually { platform.environment.tokenServiceCommandsWaiting > 0 }
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

    /// The token service's event for a token whose command is in progress is recorded and
    /// answered at once: its correction is left to the command (which may be waiting for the
    /// answer). Here a late RESUMED echo arrives while the block's suspension is with the
    /// token service; the suspension, recorded next, leaves the token suspended at both ends.
    @Test(.timeLimit(.minutes(1))) func anEventArrivingWhileItsTokensCommandIsInProgressIsAnsweredWithoutWaitingForIt() async throws {
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
            #expect(Self.held("T1", after: platform.connector.commands.current) == .suspended)
        }
    }
}
