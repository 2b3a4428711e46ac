import Foundation
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

    @Test func anAddStartsFromAFreshStatusOnceTheLatestIsOlderThanItsMaximumAge() async throws {
        // The card is blocked at the issuer after the status was read.
        let status = Locked(CardStatus.active)
        let lists = Locked(0)
        let server = ScriptedTransport { request, _ in
            guard ScriptedTransport.operation(of: request) == .listCards else { return ScriptedTransport.json([TokenSearchResult]()) }
            lists.withValue { $0 += 1 }
            return ScriptedTransport.json(CardListResponse(cards: [Fixtures.card("card-1", status: status.current)]))
        }
        let clock = Locked(Date(timeIntervalSince1970: 1_800_000_000))
        let wallet = IssuerWallet(client: Fixtures.client(server), passLibrary: FakePassLibrary(), activationLinks: ActivationLinkTests.route, statusMaxAge: 60, now: { clock.current })
        _ = try await wallet.refreshStatus()
        status.withValue { $0 = .blocked }
        // Within the maximum age: the latest status decides, no read.
        clock.withValue { $0 += 60 }
        _ = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
        #expect(lists.current == 1)
        // Older: read again first, and the blocked card is refused before any sheet.
        clock.withValue { $0 += 1 }
        let refusal = await #expect(throws: ProvisioningFailure.self) { try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone) }
        #expect(lists.current == 2)
        guard case .notEligible(let reason)? = refusal else {
            Issue.record("not refused as not eligible: \(String(describing: refusal))")
            return
        }
        #expect(reason.contains("blocked"))
    }

    @Test func anAddWhoseFreshReadFailsStartsFromTheOlderStatus() async throws {
        let failing = Locked(false)
        let refusal = Locked(false)
        let server = ScriptedTransport { request, _ in
            if refusal.current { return ScriptedTransport.error(401, code: "unauthorized", message: "sign in again") }
            if failing.current { return ScriptedTransport.error(503, code: "database_unavailable", message: "try again") }
            guard ScriptedTransport.operation(of: request) == .listCards else { return ScriptedTransport.json([TokenSearchResult]()) }
            return ScriptedTransport.json(CardListResponse(cards: [Fixtures.card("card-1")]))
        }
        let clock = Locked(Date(timeIntervalSince1970: 1_800_000_000))
        let wallet = IssuerWallet(client: Fixtures.client(server, retry: .none), passLibrary: FakePassLibrary(), activationLinks: ActivationLinkTests.route, statusMaxAge: 60, now: { clock.current })
        // With no status at all, the read's error is the failure.
        failing.withValue { $0 = true }
        let first = await #expect(throws: ProvisioningFailure.self) { try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone) }
        #expect(first?.code == "database_unavailable")
        failing.withValue { $0 = false }
        _ = try await wallet.refreshStatus()
        failing.withValue { $0 = true }
        clock.withValue { $0 += 3600 }
        let session = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
        #expect(session.configuration.externalCardId == "card-1")
        #expect(server.requests(for: .listCards).count == 3)
        // Not when the read was refused for good: the cardholder's token is no longer taken.
        refusal.withValue { $0 = true }
        let refused = await #expect(throws: ProvisioningFailure.self) { try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone) }
        #expect(refused?.code == "unauthorized")
    }
}
