import Foundation
import Logging
import ProvisioningModels
import SDKTestSupport
import ServiceLifecycle
import Testing
import TokenPlatform

/// Commands a card's status still owes its tokens are sent again (``TokenRealigner``).
@Suite("Token realignment")
struct TokenRealignmentTests {
    static func realigner(_ platform: TestPlatform, grace: Duration = .seconds(60), metrics: PlatformMetrics? = nil) -> TokenRealigner {
        TokenRealigner(environment: platform.environment, interval: .seconds(30), grace: grace, metrics: metrics)
    }

    static func block(_ api: APIClient, _ card: String, _ status: CardStatus = .blocked) async throws -> LifecycleService.StatusChange {
        try await api.send(.patch, "/lifecycle/cards/\(card)", as: .issuer, json: CardStatusChangeRequest(status: status)).decode(LifecycleService.StatusChange.self)
    }

    /// Card c1 of alice, provisioned on the devices of `tokens`, then blocked while the token
    /// service does not answer (it answers again afterwards unless `stillDown`): what the
    /// block reported for each token.
    static func blockMissedByTheTokenService(_ api: APIClient, _ platform: TestPlatform, tokens: [(String, DeviceType)], stillDown: Bool = false) async throws -> [String] {
        try await api.putCard("c1", user: "alice")
        for (reference, device) in tokens {
            try await api.provision("c1", user: "alice", device: device, token: reference)
        }
        platform.connector.failing.withValue { $0 = true }
        let results = try await block(api, "c1").tokens.map(\.result)
        platform.connector.failing.withValue { $0 = stillDown }
        return results
    }

    /// Card c1 of alice with an active token per reference (created by token events), then
    /// blocked while the token service does not answer: every suspension is owed.
    static func activeTokensOfABlockTheTokenServiceMissed(_ references: [String], on platform: TestPlatform) async throws {
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            for reference in references {
                _ = try await api.event(reference, pur: card.panUniqueReference, .created)
                _ = try await api.event(reference, pur: card.panUniqueReference, .activated)
            }
            platform.connector.failing.withValue { $0 = true }
            #expect(Set(try await block(api, "c1").tokens.map(\.result)) == ["FAILED"])
            platform.connector.failing.withValue { $0 = false }
        }
    }

    @Test func aBlockTheTokenServiceMissedIsSentAgainOnceTheGraceHasPassed() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        let metrics = PlatformMetrics()
        let realigner = Self.realigner(platform, metrics: metrics)
        try await platform.run { api in
            let blocked = try await Self.blockMissedByTheTokenService(api, platform, tokens: [("PHONE-1", .phone), ("WATCH-1", .watch)])
            #expect(blocked == ["FAILED", "FAILED"])

            // Within the grace, a status change may still be sending its commands: left alone.
            platform.advance(59)
            #expect(await realigner.realignOnce().isEmpty)
            #expect(platform.connector.commands.current.isEmpty)

            platform.advance(1)
            let outcomes = await realigner.realignOnce()
            #expect(Set(outcomes.map(\.tokenUniqueReference)) == ["PHONE-1", "WATCH-1"])
            #expect(outcomes.map(\.result) == ["SUSPENDED", "SUSPENDED"])
            #expect(Set(platform.connector.commands.current) == ["suspend PHONE-1", "suspend WATCH-1"])
            for reference in ["PHONE-1", "WATCH-1"] {
                let token = try await platform.store.token(reference: reference)
                #expect(token?.status == .suspended && token?.suspendedBy == .cardBlocked)
                let audit = try #require(try await platform.store.auditEntries(subject: "token:\(reference)").last)
                #expect(audit.actor == "tmp" && audit.action == "token.suspended")
                #expect(audit.detail.hasPrefix("card BLOCKED; sent again"))
            }
            #expect(metrics.render().contains(#"pushprov_lifecycle_realignments_total{outcome="SUSPENDED"} 2"#))
            #expect(platform.logs.current.filter { $0.contains("token realigned with its card") }.count == 2)

            // Nothing is owed any more, and unblocking resumes what the block suspended.
            platform.advance(3_600)
            #expect(await realigner.realignOnce().isEmpty)
            #expect(try await Self.block(api, "c1", .active).tokens.map(\.result) == ["RESUMED", "RESUMED"])
            platform.advance(3_600)
            #expect(await realigner.realignOnce().isEmpty)
        }
    }

    @Test func aTokenTheTokenServiceStillDoesNotConfirmIsTriedAgainAfterAnotherGrace() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        let metrics = PlatformMetrics()
        let realigner = Self.realigner(platform, metrics: metrics)
        try await platform.run { api in
            let blocked = try await Self.blockMissedByTheTokenService(api, platform, tokens: [("T1", .phone)], stillDown: true)
            #expect(blocked == ["FAILED"])
            platform.advance(61)
            #expect(await realigner.realignOnce().map(\.result) == ["FAILED"])
            #expect(try await api.tokenStatus("T1") == .active)
            #expect(platform.logs.current.filter { $0.contains("tokens still at odds with their card") && $0.contains("error") && $0.contains(#""tokens": 1"#) }.count == 1)
            #expect(metrics.render().contains(#"pushprov_lifecycle_realignments_total{outcome="FAILED"} 1"#))
            // The failure restarted the clock: not tried again before another grace.
            platform.connector.failing.withValue { $0 = false }
            platform.advance(59)
            #expect(await realigner.realignOnce().isEmpty)
            platform.advance(1)
            #expect(await realigner.realignOnce().map(\.result) == ["SUSPENDED"])
            #expect(platform.connector.commands.current == ["suspend T1"])
        }
    }

    /// The process stopped after a close committed and before it commanded the tokens: the
    /// store's record of what is owed survives, and the next round (of any instance) sends it.
    @Test(arguments: StoreFactory.all)
    func aCloseThatWasNeverSentToTheTokenServiceIsSentByTheNextRound(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let platform = try TestPlatform(policy: .immediate, store: store, secrets: TestPlatform.Secrets())
            try await platform.run { api in
                try await api.putCard("c1", user: "alice")
                try await api.provision("c1", user: "alice", device: .phone, token: "PHONE-1")
                try await api.provision("c1", user: "alice", device: .watch, token: "WATCH-1")
                _ = try await api.send(.post, "/lifecycle/tokens/WATCH-1/suspend", as: .issuer)
                let at = platform.clock.current
                _ = try await platform.store.setCardStatus(externalCardId: "c1", status: .closed, at: at) { previous in
                    AuditEntry(at: at, actor: "issuer", action: "card.status", subject: "card:c1", detail: "\(previous.rawValue) -> CLOSED")
                }
                platform.advance(120)
                let outcomes = await Self.realigner(platform).realignOnce()
                #expect(outcomes.map(\.result) == ["DEACTIVATED", "DEACTIVATED"])
                #expect(Set(platform.connector.commands.current) == ["suspend WATCH-1", "deactivate PHONE-1", "deactivate WATCH-1"])
                #expect(try await api.tokenStatus("PHONE-1") == .deactivated)
                #expect(try await api.tokenStatus("WATCH-1") == .deactivated)
            }
        }
    }

    @Test(arguments: StoreFactory.all)
    func twoInstancesRealigningTogetherSendEachOwedCommandOnce(factory: StoreFactory) async throws {
        try await factory.withTwoHandles { firstStore, secondStore in
            let secrets = try TestPlatform.Secrets()
            let first = try TestPlatform(policy: .immediate, store: firstStore, secrets: secrets, instance: "A")
            let second = try TestPlatform(policy: .immediate, store: secondStore, secrets: secrets, instance: "B")
            let references = (0..<12).map { "T\($0)" }
            try await Self.activeTokensOfABlockTheTokenServiceMissed(references, on: first)
            let sentByTheBlock = first.connector.commands.current.count
            for platform in [first, second] { platform.advance(120) }
            // Instance A's round claims its first tokens and waits at the token service while
            // instance B's rounds run to the end; then A's commands go through.
            let gate = AsyncGate()
            first.connector.meanwhile.withValue { $0 = { _, _ in await gate.wait() } }
            let a = TokenRealigner(environment: first.environment, interval: .seconds(30), grace: .seconds(60), roundLimit: 5)
            let b = TokenRealigner(environment: second.environment, interval: .seconds(30), grace: .seconds(60), roundLimit: 5)
            let aRound = Task { await a.realignOnce() }
            await gate.waitForArrivals(5)
            var outcomes: [LifecycleService.StatusChange.TokenOutcome] = []
            while true {
                let round = await b.realignOnce()
                if round.isEmpty { break }
                outcomes += round
            }
            #expect(outcomes.count == references.count - 5, "B took only what A had not claimed")
            gate.open()
            outcomes += await aRound.value
            #expect(outcomes.map(\.tokenUniqueReference).sorted() == references.sorted())
            #expect(outcomes.allSatisfy { $0.result == "SUSPENDED" })
            let sent = Array(first.connector.commands.current.dropFirst(sentByTheBlock)) + second.connector.commands.current
            #expect(sent.sorted() == references.map { "suspend \($0)" }.sorted(), "each token's suspension sent once, by one instance")
            for reference in references {
                #expect(try await firstStore.token(reference: reference)?.status == .suspended)
            }
        }
    }

    @Test func aRoundClaimsItsTokensABatchAtATimeJustBeforeSendingThem() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        let references = (0..<20).map { String(format: "T%02d", $0) }
        try await Self.activeTokensOfABlockTheTokenServiceMissed(references, on: platform)
        platform.advance(120)
        let gate = AsyncGate()
        platform.connector.meanwhile.withValue { $0 = { _, _ in await gate.wait() } }
        let round = Task { await Self.realigner(platform).realignOnce() }
        await gate.waitForArrivals(8)
        // The first eight are with the token service; the other twelve are not claimed yet, so
        // another instance's round could take them now.
        let due = try await platform.store.tokensAtOddsWithTheirCard(since: platform.clock.current.addingTimeInterval(-60), limit: 100)
        #expect(due.count == 12)
        #expect(Set(due.map(\.tokenUniqueReference)).isDisjoint(with: platform.connector.commands.current.map { String($0.dropFirst("suspend ".count)) }))
        gate.open()
        let outcomes = await round.value
        #expect(outcomes.map(\.tokenUniqueReference).sorted() == references)
        #expect(outcomes.allSatisfy { $0.result == "SUSPENDED" })
    }

    /// A token the token service created active for a card blocked meanwhile, whose correction
    /// it did not confirm, is suspended by a later round.
    @Test func aTokenEventsCorrectionTheTokenServiceMissedIsSentAgain() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await Self.block(api, "c1")
            platform.connector.failing.withValue { $0 = true }
            _ = try await api.event("T1", pur: card.panUniqueReference, .created)
            #expect(try await api.event("T1", pur: card.panUniqueReference, .activated).status == .ok)
            #expect(try await api.tokenStatus("T1") == .active)
            platform.connector.failing.withValue { $0 = false }
            platform.advance(61)
            #expect(await Self.realigner(platform).realignOnce().map(\.result) == ["SUSPENDED"])
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .cardBlocked)
        }
    }

    @Test func theServiceRunsRoundsUntilTheGroupShutsDownGracefully() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let blocked = try await Self.blockMissedByTheTokenService(api, platform, tokens: [("T1", .phone)])
            #expect(blocked == ["FAILED"])
        }
        let realigner = TokenRealigner(environment: platform.environment, interval: .milliseconds(20), grace: .zero)
        let group = ServiceGroup(configuration: .init(services: [realigner], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // Waits for a round to suspend the token (a few intervals; bounded so a broken loop fails).
            for _ in 0..<500 where try await platform.store.token(reference: "T1")?.status != .suspended {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(try await platform.store.token(reference: "T1")?.status == .suspended)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(platform.connector.commands.current == ["suspend T1"])
    }

    @Test func aGracefulShutdownEndsARoundAfterTheBatchInFlight() async throws {
        // Against a token service that takes its full time limit for each command, a round of
        // hundreds of tokens would hold a stopping process for minutes.
        let platform = try await TestPlatform(policy: .immediate)
        let references = (0..<20).map { String(format: "T%02d", $0) }
        try await Self.activeTokensOfABlockTheTokenServiceMissed(references, on: platform)
        let gate = AsyncGate()
        platform.connector.meanwhile.withValue { $0 = { _, _ in await gate.wait() } }
        let realigner = TokenRealigner(environment: platform.environment, interval: .milliseconds(20), grace: .zero)
        // The batch is answered only once the realigner's task knows of the shutdown (its
        // handler runs after that), so the next claim surely comes after it.
        let service = ShutdownNotifyingService(realigner) { gate.open() }
        let group = ServiceGroup(configuration: .init(services: [service], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            await gate.waitForArrivals(8)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(platform.connector.commands.current.count == 8, "only the batch in flight was sent")
        let suspended = try await platform.store.tokens(externalCardId: "c1").filter { $0.status == .suspended }
        #expect(suspended.count == 8)
        // The other twelve are still owed, for the next round.
        #expect(try await platform.store.tokensAtOddsWithTheirCard(since: platform.clock.current, limit: 100).count == 12)
    }

    @Test func theIntervalDefaultsToThirtySecondsZeroTurnsItOffAndBadValuesAreRefused() throws {
        var settings = ServerSettings()
        #expect(try settings.resolveRealignInterval(environment: [:]) == .seconds(30))
        #expect(try settings.resolveRealignInterval(environment: ["PUSHPROV_REALIGN_INTERVAL": "0"]) == nil)
        #expect(try settings.resolveRealignInterval(environment: ["PUSHPROV_REALIGN_INTERVAL": "2.5"]) == .milliseconds(2_500))
        settings.realignInterval = "3600"
        #expect(try settings.resolveRealignInterval(environment: ["PUSHPROV_REALIGN_INTERVAL": "0"]) == .seconds(3_600))
        for text in ["-1", "soon", "3601", "nan", "inf", "0.5", "1e-19"] {
            settings.realignInterval = text
            let error = #expect(throws: ConfigurationError.self) { try settings.resolveRealignInterval(environment: [:]) }
            #expect(error?.message == "realign interval must be 0 (off) or a number of seconds from 1 to 3600 (got \(text))")
        }
    }

    @Test func theGraceIsSixConnectorTimeLimitsAndAtLeastAMinute() {
        #expect(TokenRealigner.grace(connectorTimeout: .seconds(10)) == .seconds(60))
        #expect(TokenRealigner.grace(connectorTimeout: .seconds(2)) == .seconds(60))
        #expect(TokenRealigner.grace(connectorTimeout: .seconds(30)) == .seconds(180))
    }
}

/// Runs a service and calls `onShutdown` from its graceful-shutdown handler, which runs once
/// the service's task sees the shutdown.
struct ShutdownNotifyingService: Service {
    let base: any Service
    let onShutdown: @Sendable () -> Void

    init(_ base: any Service, onShutdown: @escaping @Sendable () -> Void) {
        self.base = base
        self.onShutdown = onShutdown
    }

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await base.run()
        } onGracefulShutdown: {
            onShutdown()
        }
    }
}
