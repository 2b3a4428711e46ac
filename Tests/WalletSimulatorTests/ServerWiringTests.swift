import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import ProvisioningCrypto
import ProvisioningModels
import TMPTestSupport
import Testing
import TokenPlatform
import WalletSimulator

@Suite("Token service simulator: wired into pushprov's server")
struct ServerWiringTests {
    /// The README's wiring: the simulator is TMP's connector from the start and learns TMP's
    /// address when the server listens.
    @Test func connectsWhenTheServerListensAndServesAsItsConnector() async throws {
        var settings = ServerSettings()
        settings.dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-tsp-\(UUID().uuidString)").path
        settings.port = 0
        let config = try settings.resolve(environment: [:])
        defer { try? FileManager.default.removeItem(atPath: config.dataDirectory) }
        let logger = Logger(label: "test.wiring") { _ in SwiftLogNoOpLogHandler() }

        let tsp = TokenServiceSimulator(logger: logger)
        let environment = try await TMPServer.makeEnvironment(configuration: config, connector: tsp, logger: logger)
        try await TestTMP.runLive({ onRunning in
            TMPServer.makeServer(configuration: config, environment: environment, logger: logger) { port in
                await tsp.connect(to: TSPAPIEndpoint(baseURL: URL(string: "http://127.0.0.1:\(port)")!, apiKey: config.tspAPIKey))
                await onRunning(port)
            }
        }) { client, _ in
            let card = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Debit")
            let put = try await client.execute(uri: "/lifecycle/cards/c1", method: .put, headers: [.authorization: "Bearer \(config.issuerAPIKey)", .contentType: "application/json"], body: ByteBuffer(bytes: try JSONEncoder().encode(card)))
            #expect(put.status == .created)

            // Without activation data TMP asks for in-app activation: a yellow token.
            let payload = try PassDataPayload(primaryAccountNumber: card.primaryAccountNumber, expiration: card.expiration, name: "Alice", nonce: Data([1, 2, 3]), nonceSignature: Data([4]))
            let outcome = try await tsp.tokenize(TokenizationRequest(card: payload, activationData: nil, deviceType: .phone))
            let token = try #require(outcome.token)
            #expect(outcome == .requiresActivation(token))
            #expect(try await environment.store.token(reference: token.tokenUniqueReference)?.status == .inactive)

            let deactivate = try await client.execute(uri: "/lifecycle/tokens/\(token.tokenUniqueReference)/deactivate", method: .post, headers: [.authorization: "Bearer \(config.issuerAPIKey)"])
            #expect(deactivate.status == .ok)
            await tsp.drainEvents()
            #expect(await tsp.token(token.tokenUniqueReference)?.status == .deactivated)
            #expect(try await environment.store.token(reference: token.tokenUniqueReference)?.status == .deactivated)
        }
    }
}
