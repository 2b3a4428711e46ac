import Foundation
import ProvisioningModels
import SDKTestSupport
import Testing
import TokenPlatform
import WalletSimulator

/// One ``TokenServiceConnector`` that carries out commands at a token service, made over the
/// simulated token service of a live TMP.
struct ConnectorFactory: CustomTestStringConvertible, Sendable {
    let name: String
    let make: @Sendable (TokenServiceSimulator) -> any TokenServiceConnector

    var testDescription: String { name }

    /// The in-process token service itself, TMP's time limit around it (what TMP calls), and
    /// the connector that makes the echo reach TMP before the command returns.
    static let all = [
        ConnectorFactory(name: "TokenServiceSimulator") { $0 },
        ConnectorFactory(name: "TimeLimitedTokenServiceConnector over the simulator") { TimeLimitedTokenServiceConnector($0, limit: .seconds(30)) },
        ConnectorFactory(name: "EchoFirstConnector over the simulator") { EchoFirstConnector(simulator: $0) },
    ]
}

/// What every connector that carries out commands does (``TokenServiceConnector``'s
/// contract), run against each (``ConnectorFactory/all``): commands follow the token state
/// machine, a command for the state the token has already is done and not an error (TMP
/// sends a command again when it could not confirm it), and a command that cannot apply throws
/// and changes nothing. The tokens are made through the whole tokenization flow.
@Suite("TokenServiceConnector contract")
struct TokenServiceConnectorContractTests {
    /// The command for each action, on `connector`.
    static func send(_ action: LifecycleService.TokenAction, _ token: TokenRecord, to connector: any TokenServiceConnector) async throws {
        switch action {
        case .suspend: try await connector.suspend(token)
        case .resume: try await connector.resume(token)
        case .deactivate: try await connector.deactivate(token)
        }
    }

    /// Runs `body` with `factory`'s connector and a token made through the whole tokenization
    /// flow under `policy` (active with `immediate`, inactive with `inApp`), as TMP records it,
    /// and a way to read its status at the token service.
    static func withToken(
        policy: ActivationPolicy, _ factory: ConnectorFactory,
        _ body: @escaping @Sendable (any TokenServiceConnector, TokenRecord, @escaping @Sendable () async -> TokenStatus?) async throws -> Void
    ) async throws {
        let tmp = try await LiveTMP(policy: policy)
        try await tmp.run { session in
            try await session.putCard("c1")
            let reference = try await session.provision("c1").tokenUniqueReference
            let token = try #require(try await session.tmpToken(reference))
            let simulator = session.simulator
            try await body(factory.make(simulator), token) { await simulator.token(reference)?.status }
        }
    }

    @Test(arguments: ConnectorFactory.all)
    func commandsFollowTheStateMachineAndARepeatedOneIsDone(factory: ConnectorFactory) async throws {
        try await Self.withToken(policy: .immediate, factory) { connector, token, status in
            #expect(await status() == .active)
            for (action, expected) in [(LifecycleService.TokenAction.suspend, TokenStatus.suspended), (.suspend, .suspended), (.resume, .active), (.resume, .active), (.deactivate, .deactivated), (.deactivate, .deactivated)] {
                try await Self.send(action, token, to: connector)
                #expect(await status() == expected, "\(action)")
            }
            // Nothing leaves DEACTIVATED: refused, and the token stays as it is.
            for action in [LifecycleService.TokenAction.resume, .suspend] {
                await #expect(throws: (any Error).self, "\(action)") { try await Self.send(action, token, to: connector) }
                #expect(await status() == .deactivated)
            }
            await #expect(throws: (any Error).self) { try await connector.activate(token) }
            #expect(await status() == .deactivated)
        }
    }

    @Test(arguments: ConnectorFactory.all)
    func activationTakesAnInactiveTokenAndIsDoneOnceActive(factory: ConnectorFactory) async throws {
        try await Self.withToken(policy: .inApp, factory) { connector, token, status in
            #expect(await status() == .inactive)
            // An inactive token cannot be suspended or resumed.
            await #expect(throws: (any Error).self) { try await connector.suspend(token) }
            await #expect(throws: (any Error).self) { try await connector.resume(token) }
            #expect(await status() == .inactive)
            try await connector.activate(token)
            #expect(await status() == .active)
            try await connector.activate(token)
            #expect(await status() == .active)
        }
    }

    @Test(arguments: ConnectorFactory.all)
    func aTokenTheServiceDoesNotHaveIsRefused(factory: ConnectorFactory) async throws {
        try await Self.withToken(policy: .immediate, factory) { connector, token, status in
            var unknown = token
            unknown.tokenUniqueReference = "DNITNOSUCHTOKEN"
            for action in [LifecycleService.TokenAction.suspend, .resume, .deactivate] {
                await #expect(throws: (any Error).self, "\(action)") { try await Self.send(action, unknown, to: connector) }
            }
            await #expect(throws: (any Error).self) { try await connector.activate(unknown) }
            #expect(await status() == .active)
        }
    }

    /// A server started without a token service refuses every command, so TMP changes nothing.
    @Test func theUnconfiguredConnectorRefusesEveryCommand() async throws {
        let connector = UnconfiguredTokenServiceConnector()
        let token = TokenRecord(
            tokenUniqueReference: "T1", externalCardId: "c1", panUniqueReference: "PUR", userId: "alice", deviceType: .phone, status: .active,
            authorizationPath: .green, suspendedBy: nil, tokenLast4: nil, createdAt: Date(), updatedAt: Date()
        )
        for action in [LifecycleService.TokenAction.suspend, .resume, .deactivate] {
            await #expect(throws: UnconfiguredTokenServiceConnector.NotConfigured.self) { try await Self.send(action, token, to: connector) }
        }
        await #expect(throws: UnconfiguredTokenServiceConnector.NotConfigured.self) { try await connector.activate(token) }
    }
}
