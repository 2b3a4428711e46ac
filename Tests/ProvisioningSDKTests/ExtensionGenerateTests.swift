import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

/// Wallet's `generateAddPaymentPassRequest…`: `signed-cards` for the entry's card and device,
/// completed exactly once inside the budget, nil on failure.
@Suite("Wallet extension: generate request")
struct ExtensionGenerateTests {
    /// Records every completion call.
    final class Completions: Sendable {
        let calls = Locked<[AddPassRequest?]>([])
        var handler: @Sendable (AddPassRequest?) -> Void { { request in self.calls.withValue { $0.append(request) } } }
    }

    func generate(_ world: ExtensionHarness, _ identifier: String, nonce: String = "nonce", _ completions: Completions) -> Task<AddPassRequestGenerator.Generation, Never> {
        world.walletExtension.generateRequest(identifier: identifier, certificates: [Data([1]), Data([2])], nonce: Data(nonce.utf8), nonceSignature: Data([3]), completion: completions.handler)
    }

    @Test(arguments: [("card-1", DeviceType.phone), ("card-1:WATCH", DeviceType.watch)])
    func theEntrysDeviceGoesToSignedCards(_ identifier: String, _ device: DeviceType) async throws {
        let world = try ExtensionHarness(transport: Fixtures.server(cards: [], tokens: []))
        defer { world.remove() }
        try world.signIn()
        let completions = Completions()
        _ = await generate(world, identifier, completions).value
        #expect(completions.calls.current == [AddPassRequest(Fixtures.signedCard)])
        let sent = try ScriptedTransport.body(of: try #require(world.transport.requests(for: .signCard).first), as: SignedCardRequest.self)
        #expect(sent.externalCardId == "card-1")
        #expect(sent.deviceType == device)
        #expect(sent.certificates.map(\.data) == [Data([1]), Data([2])])
        #expect(world.transport.requests.first?.headers["Authorization"] == "Bearer cardholder-jwt")
    }

    @Test(arguments: [(409, "card_blocked"), (400, "certificate_chain_refused"), (500, "internal_error")])
    func aServerErrorCompletesOnceWithNil(_ status: Int, _ code: String) async throws {
        let world = try ExtensionHarness(transport: ScriptedTransport { _, _ in ScriptedTransport.error(status, code: code, message: "refused") })
        defer { world.remove() }
        try world.signIn()
        let completions = Completions()
        let generation = await generate(world, "card-1", completions).value
        #expect(completions.calls.current.count == 1)
        #expect(completions.calls.current.first == .some(nil))
        guard case .server(let error) = generation.failure else {
            Issue.record("expected a server failure, got \(String(describing: generation.failure))")
            return
        }
        #expect(error.code == code)
        #expect(world.transport.requests.count == 1)
        // TMP refused the card, not the cardholder: still signed in.
        #expect(ExtensionSessionStore(secrets: world.secrets).validSession(at: world.date.now) != nil)
    }

    /// TMP refuses the session itself: it is removed before Wallet is answered, so `status`
    /// asks for sign-in instead of offering cards every pick of which would fail.
    @Test func aRefusedSessionIsRemovedBeforeWalletIsAnswered() async throws {
        let world = try ExtensionHarness(transport: ScriptedTransport { _, _ in ScriptedTransport.error(401, code: "unauthorized", message: "token expired") })
        defer { world.remove() }
        try world.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try world.signIn()
        #expect(await world.walletExtension.status().requiresAuthentication == false)
        let secrets = world.secrets
        let signedInWhenAnswered = Locked<Bool?>(nil)
        let generation = await world.walletExtension.generateRequest(identifier: "card-1", certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3])) { request in
            #expect(request == nil)
            signedInWhenAnswered.withValue { $0 = ExtensionSessionStore(secrets: secrets).validSession(at: .distantPast) != nil }
        }.value
        #expect(generation.request.isEmpty)
        #expect(signedInWhenAnswered.current == false)
        #expect(await world.walletExtension.status().requiresAuthentication)
    }

    @Test func aLateServerGetsNilAtTheDeadlineAndItsAnswerIsDropped() async throws {
        let gate = AsyncGate()
        let answered = AsyncGate()
        let world = try ExtensionHarness(transport: ScriptedTransport { _, _ in
            await gate.wait()
            defer { answered.open() }
            return ScriptedTransport.json(Fixtures.signedCard)
        })
        defer { world.remove() }
        try world.signIn()
        let completions = Completions()
        let task = generate(world, "card-1", completions)
        await gate.waitForArrivals(1)
        await world.clock.waitForSleepers(2)
        world.clock.advance(by: .seconds(17))
        #expect(completions.calls.current.isEmpty)
        world.clock.advance(by: .seconds(1))
        #expect(await task.value.failure == .timedOut)
        #expect(completions.calls.current.count == 1)
        #expect(completions.calls.current.first == .some(nil))
        gate.open()
        await answered.wait()
        await Task.yield()
        #expect(completions.calls.current.count == 1)
        #expect(world.clock.now.offset <= AddPassRequestGenerator.walletBudget)
    }

    @Test func aSecondCallSupersedesTheFirstAndEachCompletesOnce() async throws {
        let first = AsyncGate()
        let world = try ExtensionHarness(transport: ScriptedTransport { request, index in
            if index == 0 {
                await first.wait()
                return try await ScriptedTransport.hang()
            }
            return ScriptedTransport.json(Fixtures.signedCard)
        })
        defer { world.remove() }
        try world.signIn()
        let firstCompletions = Completions()
        let secondCompletions = Completions()
        let firstTask = generate(world, "card-1", nonce: "n1", firstCompletions)
        await first.waitForArrivals(1)
        let second = await generate(world, "card-1", nonce: "n2", secondCompletions).value
        #expect(await firstTask.value.failure == .cancelled)
        #expect(firstCompletions.calls.current.count == 1)
        #expect(firstCompletions.calls.current.first == .some(nil))
        #expect(second.failure == nil)
        #expect(secondCompletions.calls.current == [AddPassRequest(Fixtures.signedCard)])
    }

    @Test func cancellationCompletesAtOnceWithNil() async throws {
        let gate = AsyncGate()
        let world = try ExtensionHarness(transport: ScriptedTransport { _, _ in
            await gate.wait()
            return try await ScriptedTransport.hang()
        })
        defer { world.remove() }
        try world.signIn()
        let completions = Completions()
        let task = generate(world, "card-1", completions)
        await gate.waitForArrivals(1)
        task.cancel()
        #expect(await task.value.failure == .cancelled)
        #expect(completions.calls.current.count == 1)
        #expect(completions.calls.current.first == .some(nil))
        #expect(world.clock.now.offset == .zero)
    }

    @Test func theAsyncFormAnswersTheSameAndNilWhenCancelled() async throws {
        let gate = AsyncGate()
        let world = try ExtensionHarness(transport: ScriptedTransport { _, index in
            if index == 0 { return ScriptedTransport.json(Fixtures.signedCard) }
            await gate.wait()
            return try await ScriptedTransport.hang()
        })
        defer { world.remove() }
        try world.signIn()
        let sealed = await world.walletExtension.generateRequest(identifier: "card-1", certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3]))
        #expect(sealed == AddPassRequest(Fixtures.signedCard))
        let pending = Task { await world.walletExtension.generateRequest(identifier: "card-1", certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3])) }
        await gate.waitForArrivals(1)
        pending.cancel()
        #expect(await pending.value == nil)
    }

    @Test func withoutASessionOrWithAForeignIdentifierNothingIsSent() async throws {
        let world = try ExtensionHarness()
        defer { world.remove() }
        let noSession = Completions()
        _ = await generate(world, "card-1", noSession).value
        #expect(noSession.calls.current.count == 1)
        #expect(noSession.calls.current.first == .some(nil))
        try world.signIn()
        for identifier in ["", "card/1", "card-1:PHONE", "card-1:WATCH:WATCH"] {
            let completions = Completions()
            _ = await generate(world, identifier, completions).value
            #expect(completions.calls.current.count == 1, "\(identifier)")
            #expect(completions.calls.current.first == .some(nil), "\(identifier)")
        }
        #expect(world.transport.requests.isEmpty)
    }
}
