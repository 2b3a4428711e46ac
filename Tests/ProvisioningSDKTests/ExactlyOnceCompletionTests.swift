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
        // The generator's budget timer (18 s) and the client's own timeout: `signed-cards`'
        // 15 s, the smaller of the two.
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(14))
        #expect(completions.calls.current.isEmpty)
        clock.advance(by: .seconds(1))
        let generation = await task.value
        #expect(generation.failure == .timedOut)
        #expect(completions.calls.current == [.empty])
        #expect(clock.now.offset <= AddPassRequestGenerator.walletBudget)
    }

    /// `signed-cards` gets the smaller of the generation's budget and the client's own
    /// `signed-cards` timeout, never a longer one than the client was configured with.
    @Test(arguments: [(Duration.seconds(5), Duration.seconds(18), Duration.seconds(5)), (.seconds(30), .seconds(18), .seconds(18)), (.seconds(15), .seconds(60), .seconds(15))])
    func signedCardsGetsTheSmallerOfTheBudgetAndTheClientsTimeout(_ signCard: Duration, _ budget: Duration, _ expected: Duration) async throws {
        let transport = Fixtures.server(cards: [], tokens: [])
        let client = TMPClient(configuration: .init(baseURL: Fixtures.baseURL, timeouts: .init(signCard: signCard)), transport: transport, clock: ManualClock(), cardholderToken: { "cardholder-jwt" })
        let generation = await AddPassRequestGenerator(client: client, budget: budget, clock: ManualClock()).generate(Self.request)
        #expect(generation.failure == nil)
        #expect(transport.requests(for: .signCard).map(\.timeout) == [expected])
    }

    /// No budget may exceed what Wallet allows: longer ones are cut to 19 s, negative ones
    /// are none, wherever they are set.
    @Test func theGeneratorsBudgetIsBoundedByWallets() async throws {
        let timeouts = Locked<[Duration]>([])
        let sign: @Sendable (SignedCardRequest, Duration) async throws(TMPClientError) -> SignedCardResponse = { _, timeout in
            timeouts.withValue { $0.append(timeout) }
            return Fixtures.signedCard
        }
        #expect(AddPassRequestGenerator.maximumBudget == .seconds(19))
        #expect(AddPassRequestGenerator.maximumBudget < AddPassRequestGenerator.walletBudget)
        var generator = AddPassRequestGenerator(budget: .seconds(60), clock: ManualClock(), sign: sign)
        #expect(generator.budget == .seconds(19))
        generator.budget = .seconds(25)
        #expect(generator.budget == .seconds(19))
        generator.budget = .seconds(-1)
        #expect(generator.budget == .zero)
        generator.budget = .seconds(12)
        #expect(generator.budget == .seconds(12))
        _ = await generator.generate(Self.request)
        _ = await generator.generate(Self.request, budget: .seconds(45))
        #expect(timeouts.current == [.seconds(12), .seconds(19)])
    }

    @Test func theExtensionsBudgetsAreBoundedByWallets() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        func configuration(refresh: Duration = .seconds(5), art: Duration = .seconds(3), generation: Duration = .seconds(18)) -> WalletExtensionConfiguration {
            WalletExtensionConfiguration(tmp: .init(baseURL: Fixtures.baseURL), directory: SharedWalletDirectory(containerURL: folder.url), secrets: FileSecretStore(directory: folder.url), passLibrary: FakePassLibrary(), refreshBudget: refresh, artBudget: art, generationBudget: generation)
        }
        let defaults = configuration()
        #expect(defaults.refreshBudget == .seconds(5) && defaults.artBudget == .seconds(3) && defaults.generationBudget == .seconds(18))
        let long = configuration(refresh: .seconds(30), art: .seconds(10), generation: .seconds(40))
        #expect(long.refreshBudget == .seconds(19) && long.artBudget == .zero && long.generationBudget == .seconds(19))
        #expect(configuration(refresh: .seconds(15), art: .seconds(10)).artBudget == .seconds(4))
        #expect(configuration(refresh: .seconds(-1), art: .seconds(-1), generation: .seconds(-1)).refreshBudget == .zero)

        var changed = defaults
        changed.artBudget = .seconds(30)
        #expect(changed.artBudget == .seconds(14))
        changed.refreshBudget = .seconds(17)
        #expect(changed.refreshBudget == .seconds(17) && changed.artBudget == .seconds(2))
        changed.refreshBudget = .seconds(100)
        #expect(changed.refreshBudget == .seconds(19) && changed.artBudget == .zero)
        changed.generationBudget = .seconds(21)
        #expect(changed.generationBudget == .seconds(19))
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
        // Opened once the late answer has come back out of the client, not merely out of the
        // transport (the client still decodes it, and hands it to the generator after that).
        let signReturned = AsyncGate()
        let sign: @Sendable (SignedCardRequest, Duration) async throws(TMPClientError) -> SignedCardResponse = { request, _ async throws(TMPClientError) in
            defer { signReturned.open() }
            return try await Fixtures.client(transport, clock: ManualClock()).signCard(request)
        }
        let generator = AddPassRequestGenerator(budget: .seconds(18), clock: clock, sign: sign)
        let task = generator.generate(Self.request, completion: completions.handler)
        await gate.waitForArrivals(1)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(18))
        #expect(await task.value.failure == .timedOut)
        gate.open()
        await answered.wait()
        await signReturned.wait()
        // The late answer's remaining steps (the race's resolve, which must drop it) run on
        // the operation's task right after `sign` returns; give them turns to run.
        for _ in 0..<100 { await Task.yield() }
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

    /// Wallet asks again after a refused request, and the cardholder closes the sheet while
    /// the new one is on its way: the flow was cancelled; the earlier failure is not its end.
    @Test func aCancelDuringARetryIsCancelledNotTheEarlierFailure() async throws {
        let gate = AsyncGate()
        let transport = ScriptedTransport { _, index in
            guard index > 0 else { return ScriptedTransport.error(400, code: "certificate_chain_refused", message: "leaf_marker_missing: …") }
            await gate.wait()
            return try await ScriptedTransport.hang()
        }
        let session = session(transport: transport, clock: ManualClock())
        #expect(await session.generateRequest(certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3])) == .empty)
        let retry = Task { await session.generateRequest(certificates: [Data([1])], nonce: Data([4]), nonceSignature: Data([3])) }
        await gate.waitForArrivals(1)
        #expect(await session.finish(.failed(WalletAddError(.userCancelled))).outcome == .cancelled)
        #expect(await retry.value == .empty)
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

    @Test func aRequestArrivingAfterTheFlowEndedSealsNothing() async {
        // Wallet asked, and the cardholder cancelled before the app's answer had started.
        let transport = Fixtures.server(cards: [], tokens: [])
        let session = session(transport: transport, clock: ManualClock())
        #expect(await session.finish(.failed(WalletAddError(.userCancelled))).outcome == .cancelled)
        #expect(await session.generateRequest(certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3])) == .empty)
        #expect(transport.requests(for: .signCard).isEmpty, "the card was sealed for a flow that had ended")
        #expect(await session.finish(.added(nil)).outcome == .cancelled)
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
