import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

/// Wallet's completion handler is called exactly once, inside the budget, whatever happens.
@Suite("Exactly-once completion")
struct ExactlyOnceCompletionTests {
    static let request = SignedCardRequest(externalCardId: "card-1", deviceType: .phone, certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3]))

    /// Records every completion call.
    final class Completions: Sendable {
        let calls = Locked<[AddPassRequest]>([])
        var handler: @Sendable (AddPassRequest) -> Void { { request in self.calls.withValue { $0.append(request) } } }
    }

    @Test func aSealedCardCompletesOnceWithTheServersData() async throws {
        let transport = Fixtures.server(cards: [], tokens: [])
        let completions = Completions()
        let generator = AddPassRequestGenerator(client: Fixtures.client(transport), clock: ManualClock())
        let generation = await generator.generate(Self.request, completion: completions.handler).value
        #expect(generation.failure == nil)
        #expect(completions.calls.current == [AddPassRequest(Fixtures.signedCard)])
        #expect(completions.calls.current.first?.ephemeralPublicKey?.count == 65)
    }

    @Test func aServerSlowerThanTheBudgetGetsAnEmptyRequestAtTheDeadline() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport { _, _ in try await ScriptedTransport.hang() }
        let completions = Completions()
        let generator = AddPassRequestGenerator(client: Fixtures.client(transport, clock: clock), budget: .seconds(18), clock: clock)
        let task = generator.generate(Self.request, completion: completions.handler)
        // The generator's budget timer and the client's own timeout, both at 18 s.
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(17))
        #expect(completions.calls.current.isEmpty)
        clock.advance(by: .seconds(1))
        let generation = await task.value
        #expect(generation.failure == .timedOut)
        #expect(completions.calls.current == [.empty])
        #expect(clock.now.offset <= AddPassRequestGenerator.walletBudget)
    }

    @Test func aServerErrorCompletesOnceWithAnEmptyRequestAndTheReason() async throws {
        let transport = ScriptedTransport { _, _ in ScriptedTransport.error(409, code: "card_blocked", message: "card card-1 is blocked and cannot be added to Wallet") }
        let completions = Completions()
        let generation = await AddPassRequestGenerator(client: Fixtures.client(transport), clock: ManualClock()).generate(Self.request, completion: completions.handler).value
        #expect(completions.calls.current == [.empty])
        guard case .server(let error) = generation.failure else {
            Issue.record("expected a server failure, got \(String(describing: generation.failure))")
            return
        }
        #expect(error.code == "card_blocked")
    }

    @Test func cancellationMidCallCompletesAtOnceWithAnEmptyRequest() async throws {
        let clock = ManualClock()
        let gate = AsyncGate()
        let transport = ScriptedTransport { _, _ in
            await gate.wait()
            return try await ScriptedTransport.hang()
        }
        let completions = Completions()
        let task = AddPassRequestGenerator(client: Fixtures.client(transport, clock: clock), clock: clock).generate(Self.request, completion: completions.handler)
        await gate.waitForArrivals(1)
        task.cancel()
        let generation = await task.value
        #expect(generation.failure == .cancelled)
        #expect(completions.calls.current == [.empty])
        #expect(clock.now.offset == .zero)
    }

    @Test func anAnswerAfterTheDeadlineIsDroppedAndNeverCompletesTwice() async throws {
        let clock = ManualClock()
        let gate = AsyncGate()
        let answered = AsyncGate()
        let transport = ScriptedTransport { _, _ in
            await gate.wait()
            defer { answered.open() }
            return ScriptedTransport.error(500, code: "internal_error", message: "late failure")
        }
        let completions = Completions()
        // The client's own timeout is far away, so only the generator's budget can fire.
        let sign: @Sendable (SignedCardRequest, Duration) async throws(TMPClientError) -> SignedCardResponse = { request, _ async throws(TMPClientError) in
            try await Fixtures.client(transport, clock: ManualClock()).signCard(request)
        }
        let generator = AddPassRequestGenerator(budget: .seconds(18), clock: clock, sign: sign)
        let task = generator.generate(Self.request, completion: completions.handler)
        await gate.waitForArrivals(1)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(18))
        #expect(await task.value.failure == .timedOut)
        gate.open()
        await answered.wait()
        #expect(completions.calls.current == [.empty])
    }

    @Test func completionOnceIgnoresEveryLaterCall() async {
        let count = Locked(0)
        let once = CompletionOnce<Int> { _ in count.withValue { $0 += 1 } }
        await withTaskGroup(of: Bool.self) { group in
            for value in 0..<100 { group.addTask { once.complete(value) } }
            let firsts = await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            #expect(firsts == 1)
        }
        #expect(count.current == 1)
        #expect(once.isCompleted)
    }

    // MARK: A whole flow

    func session(transport: ScriptedTransport, clock: ManualClock, refreshed: Locked<Int> = Locked(0)) -> ProvisioningSession {
        let configuration = AddPassConfiguration(externalCardId: "card-1", target: .phone, cardholderName: "Jane Appleseed", primaryAccountSuffix: "1111", localizedDescription: nil, primaryAccountIdentifier: nil, paymentNetwork: .visa)
        let generator = AddPassRequestGenerator(client: Fixtures.client(transport, clock: clock), clock: clock)
        return ProvisioningSession(configuration: configuration, generator: generator) {
            refreshed.withValue { $0 += 1 }
            return nil
        }
    }

    @Test func aSecondGenerateCallSupersedesTheFirstAndEachAnswersOnce() async throws {
        let clock = ManualClock()
        let first = AsyncGate()
        let transport = ScriptedTransport { request, index in
            if index == 0 {
                await first.wait()
                return try await ScriptedTransport.hang()
            }
            let body = try ScriptedTransport.body(of: request, as: SignedCardRequest.self)
            #expect(body.nonce.data == Data("nonce-2".utf8))
            return ScriptedTransport.json(Fixtures.signedCard)
        }
        let session = session(transport: transport, clock: clock)
        let firstCall = Task { await session.generateRequest(certificates: [Data([1])], nonce: Data("nonce-1".utf8), nonceSignature: Data([3])) }
        await first.waitForArrivals(1)
        let second = await session.generateRequest(certificates: [Data([1])], nonce: Data("nonce-2".utf8), nonceSignature: Data([3]))
        #expect(await firstCall.value == .empty)
        #expect(second == AddPassRequest(Fixtures.signedCard))
        #expect(transport.requests(for: .signCard).count == 2)
        let (outcome, _) = await session.finish(.added(nil))
        #expect(outcome == .added(.phone))
    }

    @Test func theOutcomeNamesTheIssuersFailureOverWalletsGenericError() async throws {
        let transport = ScriptedTransport { _, _ in ScriptedTransport.error(400, code: "certificate_chain_refused", message: "leaf_marker_missing: …") }
        let refreshed = Locked(0)
        let session = session(transport: transport, clock: ManualClock(), refreshed: refreshed)
        #expect(await session.generateRequest(certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3])) == .empty)
        let (outcome, _) = await session.finish(.failed(WalletAddError(.other(domain: "PKPassKitErrorDomain", code: -1))))
        guard case .failed(.server(let error)) = outcome else {
            Issue.record("expected the server's failure, got \(outcome)")
            return
        }
        #expect(error.code == "certificate_chain_refused")
        #expect(refreshed.current == 1)
        // Finishing twice reports the same outcome and does not refresh again.
        #expect(await session.finish(.added(nil)).outcome == outcome)
        #expect(refreshed.current == 1)
    }

    @Test func theOutcomeNamesTheDeviceThePassLandedOnNotTheTarget() async {
        // The target is the iPhone; the cardholder picked the Watch in Wallet's sheet.
        let session = session(transport: Fixtures.server(cards: [], tokens: []), clock: ManualClock())
        let onWatch = WalletPass(serialNumber: "S1", deviceAccountIdentifier: "DAI1", primaryAccountIdentifier: "PAI1", primaryAccountNumberSuffix: "1111", activationState: .requiresActivation, device: .watch)
        #expect(await session.finish(.added(onWatch)).outcome == .added(.watch))
    }

    @Test func userCancellationIsCancelledNotFailed() async {
        let session = session(transport: Fixtures.server(cards: [], tokens: []), clock: ManualClock())
        #expect(await session.finish(.failed(WalletAddError(.userCancelled))).outcome == .cancelled)
    }

    @Test func finishingAbandonsARequestStillRunning() async throws {
        let gate = AsyncGate()
        let transport = ScriptedTransport { _, _ in
            await gate.wait()
            return try await ScriptedTransport.hang()
        }
        let session = session(transport: transport, clock: ManualClock())
        let pending = Task { await session.generateRequest(certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3])) }
        await gate.waitForArrivals(1)
        #expect(await session.finish(.failed(WalletAddError(.systemCancelled))).outcome == .failed(.wallet(WalletAddError(.systemCancelled))))
        #expect(await pending.value == .empty)
    }
}
