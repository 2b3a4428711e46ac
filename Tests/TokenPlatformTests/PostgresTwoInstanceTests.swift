import Foundation
import HummingbirdTesting
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import Testing
import TokenPlatform

/// Two TMP servers on loopback sharing one PostgreSQL database, driven concurrently. Whatever
/// the interleaving, the end state must be one a single instance reaches by handling the same
/// requests one after the other: the audit trail is that order, every entry in it was a legal
/// step from the state before, and replaying it gives exactly the stored token.
@Suite("Two TMP instances on one PostgreSQL database", .enabled(if: PostgresTestDatabase.isConfigured, PostgresTestDatabase.howToRun), .timeLimit(.minutes(3)))
struct PostgresTwoInstanceTests {
    /// Runs `body` with clients of two live servers (instances "A" and "B") on one fresh schema.
    static func withTwoInstances(policy: ActivationPolicy, _ body: @escaping @Sendable (APIClient, APIClient) async throws -> Void) async throws {
        try await PostgresTestDatabase.withStores(2) { stores in
            let secrets = try TestPlatform.Secrets()
            let first = try TestPlatform(policy: policy, store: stores[0], secrets: secrets, instance: "A")
            let second = try TestPlatform(policy: policy, store: stores[1], secrets: secrets, instance: "B")
            try await TestTMP.runLive(router: first.router(), logger: first.logger) { _, firstPort in
                try await TestTMP.runLive(router: second.router(), logger: second.logger) { _, secondPort in
                    try await body(APIClient(port: firstPort, platform: first), APIClient(port: secondPort, platform: second))
                }
            }
        }
    }

    /// Runs `round` once per PAN of the four networks, each time with a fresh card of alice's
    /// (`c0`…`c3`) created on the first instance, on two live instances of one database.
    static func forEachRaceRound(policy: ActivationPolicy, _ round: @escaping @Sendable (APIClient, APIClient, String, String) async throws -> Void) async throws {
        let pans = ["4111111111111111", "5555555555554444", "378282246310005", "6011111111111117"]
        try await withTwoInstances(policy: policy) { first, second in
            for (index, pan) in pans.enumerated() {
                let card = "c\(index)"
                try await first.putCard(card, user: "alice", pan: pan)
                try await round(first, second, card, pan)
            }
        }
    }

    /// Sends every request at once, alternating between the instances; returns the replies in
    /// request order.
    static func concurrently(_ requests: [@Sendable () async throws -> APIClient.Reply]) async throws -> [APIClient.Reply] {
        try await withThrowingTaskGroup(of: (Int, APIClient.Reply).self) { group in
            for (index, request) in requests.enumerated() {
                group.addTask { (index, try await request()) }
            }
            var replies = [APIClient.Reply?](repeating: nil, count: requests.count)
            for try await (index, reply) in group { replies[index] = reply }
            return replies.map { $0! }
        }
    }

    /// Replays audit entries of a token from `start`, checking each step is legal; returns the
    /// state it ends in and the steps that were not legal.
    static func replay(_ entries: [AuditEntry], from start: TokenRecord) -> (TokenStatus, [String]) {
        var status = start.status
        var illegal: [String] = []
        for entry in entries {
            // Entries of commands that left the token's state as it was.
            if entry.action == "token.command_not_recorded" || entry.action == "token.pending_command" { continue }
            let target: TokenStatus? = switch entry.action {
            case "token.activate", "token.event.activated", "token.event.resumed", "token.active": .active
            case "token.event.suspended", "token.suspended": .suspended
            case "token.event.deactivated", "token.deactivated": .deactivated
            default: nil
            }
            guard let target else { illegal.append("unknown action \(entry.action)"); continue }
            // Events may repeat the current state (echoes). A customer-service command may
            // repeat it only to record TMP's own command for a state the token service reported
            // first (its echo overtook TMP); a suspension is recorded once per reason.
            let repeatAllowed = entry.action.hasPrefix("token.event.") || (["token.suspended", "token.active"].contains(entry.action) && status == target)
            guard status.canTransition(to: target) || (repeatAllowed && status == target) else {
                illegal.append("\(entry.action) from \(status.rawValue)")
                continue
            }
            status = target
        }
        return (status, illegal)
    }

    static func event(_ api: APIClient, _ reference: String, pur: String, _ type: TokenEventType, id: String) -> @Sendable () async throws -> APIClient.Reply {
        { try await api.event(reference, pur: pur, type, id: id) }
    }

    /// Customer service suspends a token on one instance; while the suspension is with the
    /// token service, the card is blocked and unblocked on the other. The other instance's
    /// commands for the token wait for the first's lease in the database and are decided once
    /// the suspension is recorded: the token is customer service's suspension, so nothing
    /// resumes it. Before, the other instance suspended and resumed it at the token service,
    /// and customer service's suspension was recorded last: TMP recorded SUSPENDED while the
    /// token paid, with nothing at odds.
    @Test func aSuspensionOnOneInstanceIsNotUndoneByABlockAndUnblockOnTheOther() async throws {
        try await Self.withTwoInstances(policy: .immediate) { first, second in
            try await first.putCard("c1", user: "alice")
            _ = try await first.provision("c1", user: "alice", token: "T1")
            let flips = Locked<Task<[APIClient.Reply], any Error>?>(nil)
            let once = Locked(false)
            first.platform.connector.meanwhile.withValue { $0 = { command, token in
                guard command == "suspend", token.tokenUniqueReference == "T1", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                flips.withValue { $0 = Task {
                    [try await LifecycleRaceTests.patch(second, "c1", .blocked), try await LifecycleRaceTests.patch(second, "c1", .active)]
                } }
                try await TokenCommandOrderTests.eventually("the other instance's command waits for the lease") { second.platform.environment.tokenServiceCommandsWaiting > 0 }
            } }
            let suspended = try await first.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
            #expect(suspended.status == .ok, "\(suspended.text)")
            let replies = try #require(try await flips.current?.value)
            #expect(replies.map(\.status) == [.ok, .ok], "\(replies.map(\.text))")
            let token = try await first.platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .customerService)
            #expect(first.platform.connector.commands.current == ["suspend T1"])
            // The other instance found customer service's suspension: nothing to send.
            #expect(second.platform.connector.commands.current.isEmpty, "\(second.platform.connector.commands.current)")
        }
    }

    @Test func concurrentTokenEventsForOneTokenEndAsOneInstanceWould() async throws {
        try await Self.withTwoInstances(policy: .immediate) { first, second in
            let card = try await first.putCard("c1", user: "alice")
            try await first.provision("c1", user: "alice", token: "T1")
            let start = try #require(try await first.platform.store.token(reference: "T1"))
            #expect(start.status == .active)
            let before = try await first.platform.store.auditEntries(subject: "token:T1").count
            let kinds: [TokenEventType] = [.suspended, .resumed, .suspended, .resumed, .suspended, .resumed, .deactivated, .suspended]
            let requests = kinds.enumerated().map { index, kind in
                Self.event(index.isMultiple(of: 2) ? first : second, "T1", pur: card.panUniqueReference, kind, id: "race-\(index)")
            }
            let replies = try await Self.concurrently(requests)
            #expect(replies.allSatisfy { $0.status == .ok || $0.status == .conflict }, "\(replies.map(\.status))")

            let trail = Array(try await second.platform.store.auditEntries(subject: "token:T1").dropFirst(before))
            let applied = replies.enumerated().filter { $0.element.status == .ok }.map { "event race-\($0.offset)" }
            #expect(Set(trail.map(\.detail)) == Set(applied), "every APPLIED event, and only those, is audited")
            #expect(trail.count == applied.count)
            let (replayed, illegal) = Self.replay(trail, from: start)
            #expect(illegal.isEmpty, "\(illegal)")
            let stored = try #require(try await first.platform.store.token(reference: "T1"))
            #expect(stored.status == replayed)
            // DEACTIVATED is final and always applies, whenever it came.
            #expect(stored.status == .deactivated)
        }
    }

    /// Events that say when they happened, sent at once in shuffled order to both instances:
    /// whatever order they are applied in, the token ends as the newest event left it.
    @Test func timedEventsRacingOnTwoInstancesEndOnTheNewest() async throws {
        try await Self.withTwoInstances(policy: .immediate) { first, second in
            let card = try await first.putCard("c1", user: "alice")
            try await first.provision("c1", user: "alice", token: "T1")
            for round in 0..<5 {
                // Before the test clock (TestTMP.start): an event may not be ahead of the server's clock.
                let base = 1_789_000_000_000 + Int64(round) * 100_000
                let events = (1...8).map { step in (step, step.isMultiple(of: 2) ? TokenEventType.resumed : .suspended) }.shuffled()
                let replies = try await Self.concurrently(events.enumerated().map { index, event in
                    let api = index.isMultiple(of: 2) ? first : second
                    return { try await api.event("T1", pur: card.panUniqueReference, event.1, id: "r\(round)-e\(event.0)", occurredAt: EventTime(millisecondsSince1970: base + Int64(event.0))) }
                })
                #expect(replies.allSatisfy { $0.status == .ok }, "\(replies.map(\.status))")
                let results = try replies.map { try $0.decode(TokenEventResponse.self).result }
                #expect(results.allSatisfy { ["APPLIED", "STALE"].contains($0) }, "\(results)")
                let stored = try #require(try await second.platform.store.token(reference: "T1"))
                #expect(stored.status == .active, "the newest event (8) resumed the token; round \(round): \(events.map(\.0)) → \(results)")
                #expect(stored.lastEventAt == EventTime(millisecondsSince1970: base + 8))
            }
        }
    }

    @Test func duplicateEventIdsAcrossInstancesApplyOnce() async throws {
        try await Self.withTwoInstances(policy: .inApp) { first, second in
            let card = try await first.putCard("c1", user: "alice")
            var requests: [@Sendable () async throws -> APIClient.Reply] = []
            for copy in 0..<6 {
                requests.append(Self.event(copy.isMultiple(of: 2) ? first : second, "T1", pur: card.panUniqueReference, .created, id: "evt-created"))
            }
            let created = try await Self.concurrently(requests)
            #expect(created.allSatisfy { $0.status == .ok })
            let results = try created.map { try $0.decode(TokenEventResponse.self).result }
            #expect(results.filter { $0 == "APPLIED" }.count == 1 && results.filter { $0 == "DUPLICATE" }.count == 5, "\(results)")

            let activations = try await Self.concurrently((0..<6).map { copy in
                Self.event(copy.isMultiple(of: 2) ? second : first, "T1", pur: card.panUniqueReference, .activated, id: "evt-activated")
            })
            let activationResults = try activations.map { try $0.decode(TokenEventResponse.self).result }
            #expect(activationResults.filter { $0 == "APPLIED" }.count == 1, "\(activationResults)")
            #expect(try await first.tokenStatus("T1") == .active)
            #expect(try await second.platform.store.auditEntries(subject: "token:T1").map(\.action) == ["token.event.created", "token.event.activated"])
        }
    }

    @Test func concurrentActivationAndSuspensionsSerialize() async throws {
        try await Self.withTwoInstances(policy: .inApp) { first, second in
            let card = try await first.putCard("c1", user: "alice")
            let references = (0..<4).map { "T\($0)" }
            for reference in references {
                try await first.provision("c1", user: "alice", token: reference)
                #expect(try await first.tokenStatus(reference) == .inactive)
            }
            let starts = try await references.asyncMap { try #require(try await first.platform.store.token(reference: $0)) }
            let befores = try await references.asyncMap { try await first.platform.store.auditEntries(subject: "token:\($0)").count }
            var requests: [@Sendable () async throws -> APIClient.Reply] = []
            for reference in references {
                requests.append { try await first.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: reference)) }
                requests.append(Self.event(second, reference, pur: card.panUniqueReference, .suspended, id: "suspend-\(reference)"))
                requests.append { try await second.send(.post, "/lifecycle/tokens/\(reference)/suspend", as: .issuer) }
                requests.append { try await first.send(.post, "/lifecycle/tokens/\(reference)/suspend", as: .issuer) }
            }
            let replies = try await Self.concurrently(requests)
            for (index, reference) in references.enumerated() {
                let activation = replies[index * 4]
                #expect(activation.status == .ok)
                #expect(try activation.decode(TokenActivationResponse.self).issuerMobileAppAuthResponse == .approved)
                let trail = Array(try await second.platform.store.auditEntries(subject: "token:\(reference)").dropFirst(befores[index]))
                #expect(trail.first?.action == "token.activate", "activation is the only way out of INACTIVE")
                #expect(trail.filter { $0.action == "token.suspended" }.count <= 1, "customer service suspends an ACTIVE token once")
                let (replayed, illegal) = Self.replay(trail, from: starts[index])
                #expect(illegal.isEmpty, "\(illegal)")
                let stored = try #require(try await first.platform.store.token(reference: reference))
                #expect(stored.status == replayed)
                if stored.status == .suspended {
                    // Customer service's suspension is TMP's own record: once it committed, it
                    // says who suspended the token, whether or not the network's came first.
                    let customerServiceSuspended = trail.contains { $0.action == "token.suspended" }
                    #expect(stored.suspendedBy == (customerServiceSuspended ? .customerService : .tokenService))
                } else {
                    #expect(stored.status == .active && trail.count == 1)
                }
            }
        }
    }
}

extension PostgresTwoInstanceTests {
    @Test func blockingACardWhileItsTokensAreActivatedLeavesNoActiveTokenOnTheBlockedCard() async throws {
        try await Self.forEachRaceRound(policy: .inApp) { first, second, card, pan in
            let references = (0..<3).map { "\(card)-T\($0)" }
            for reference in references {
                try await first.provision(card, user: "alice", pan: pan, token: reference)
            }
            var requests: [@Sendable () async throws -> APIClient.Reply] = references.enumerated().map { index, reference in
                let api = index.isMultiple(of: 2) ? first : second
                return { try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: reference)) }
            }
            requests.insert({ try await second.send(.patch, "/lifecycle/cards/\(card)", as: .issuer, json: CardStatusChangeRequest(status: .blocked)) }, at: 1)
            let replies = try await Self.concurrently(requests)
            #expect(replies[1].status == .ok, "\(replies[1].text)")
            #expect(try await first.platform.store.card(externalCardId: card)?.status == .blocked)
            for (index, reference) in references.enumerated() {
                let reply = replies[index == 0 ? 0 : index + 1]
                let outcome = try reply.decode(TokenActivationResponse.self).issuerMobileAppAuthResponse
                let token = try #require(try await second.platform.store.token(reference: reference))
                let actions = try await first.platform.store.auditEntries(subject: "token:\(reference)").map(\.action)
                // Serially: activated before the block, then suspended by it; or declined after it.
                if outcome == .approved {
                    #expect(token.status == .suspended && token.suspendedBy == .cardBlocked, "\(reference): \(token.status) \(actions)")
                    #expect(Array(actions.suffix(2)) == ["token.activate", "token.suspended"])
                } else {
                    #expect(outcome == .declined)
                    #expect(!actions.contains("token.activate"))
                    let commands = first.platform.connector.commands.current + second.platform.connector.commands.current
                    if commands.contains("activate \(reference)") {
                        // The token service had activated it when the block landed: it was
                        // suspended there for the block, and TMP records that.
                        #expect(token.status == .suspended && token.suspendedBy == .cardBlocked, "\(reference): \(token.status) \(actions)")
                        #expect(actions.last == "token.suspended")
                        #expect(commands.contains("suspend \(reference)"))
                    } else {
                        // Declined before the token service was asked.
                        #expect(token.status == .inactive, "\(reference): \(token.status) \(actions)")
                    }
                }
            }
        }
    }
}

extension PostgresTwoInstanceTests {
    @Test func aCloseRacingReopeningsOnTwoInstancesLeavesTheCardClosed() async throws {
        try await Self.forEachRaceRound(policy: .immediate) { first, second, card, pan in
            try await first.provision(card, user: "alice", pan: pan, token: "\(card)-T1")
            let statuses: [CardStatus] = [.active, .blocked, .closed, .active, .blocked, .active]
            let requests: [@Sendable () async throws -> APIClient.Reply] = statuses.enumerated().map { index, status in
                let api = index.isMultiple(of: 2) ? first : second
                return { try await api.send(.patch, "/lifecycle/cards/\(card)", as: .issuer, json: CardStatusChangeRequest(status: status)) }
            }
            let replies = try await Self.concurrently(requests)
            for (status, reply) in zip(statuses, replies) {
                #expect(reply.status == .ok || (status != .closed && reply.error?.code == "card_closed"), "\(status): \(reply.status) \(reply.text)")
            }
            #expect(try await second.platform.store.card(externalCardId: card)?.status == .closed)
            #expect(try await first.tokenStatus("\(card)-T1") == .deactivated)
            let steps = try await first.platform.store.auditEntries(subject: "card:\(card)").filter { $0.action == "card.status" }.map(\.detail)
            let (end, illegal) = TMPStoreContractTests.replayCardStatus(steps)
            #expect(illegal.isEmpty && end == CardStatus.closed.rawValue, "\(steps)")
            // One entry per change: a PATCH that found the card in its status already answers
            // 200 and records nothing.
            #expect(!steps.isEmpty && steps.count <= replies.filter { $0.status == .ok }.count, "\(steps)")
        }
    }
}

extension Array {
    /// `map` with an async transform, one element after the other.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
