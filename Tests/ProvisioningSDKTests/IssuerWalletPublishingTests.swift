import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

@Suite("IssuerWallet status publishing")
struct IssuerWalletPublishingTests {
    @Test func anOlderReadFinishingLastNeverReplacesANewerOne() async throws {
        let gate = AsyncGate()
        let calls = Locked(0)
        let server = ScriptedTransport { request, _ in
            guard ScriptedTransport.operation(of: request) == .listCards else { return ScriptedTransport.json([TokenSearchResult]()) }
            let call = calls.withValue { $0 += 1; return $0 }
            if call == 1 { await gate.wait() }
            return ScriptedTransport.json(CardListResponse(cards: [Fixtures.card("card-\(call)")]))
        }
        let wallet = IssuerWallet(client: Fixtures.client(server), passLibrary: FakePassLibrary(), activationLinks: ActivationLinkTests.route)
        let updates = await wallet.statusUpdates()
        let older = Task { try await wallet.refreshStatus() }
        await gate.waitForArrivals(1)
        let newer = try await wallet.refreshStatus()
        gate.open()
        #expect(try await older.value.cards.map(\.id) == ["card-1"])
        #expect(newer.cards.map(\.id) == ["card-2"])
        #expect(await wallet.latestStatus?.cards.map(\.id) == ["card-2"])
        var iterator = updates.makeAsyncIterator()
        #expect(await iterator.next()?.cards.map(\.id) == ["card-2"])
    }
}
