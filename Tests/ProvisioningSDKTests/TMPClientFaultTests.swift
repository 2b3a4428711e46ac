import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

@Suite("TMPClient error paths")
struct TMPClientFaultTests {
    static let request = SignedCardRequest(externalCardId: "card-1", deviceType: .phone, certificates: [Data([1])], nonce: Data([2]), nonceSignature: Data([3]))

    func failure(_ body: () async throws -> Void) async -> TMPClientError? {
        do {
            try await body()
            return nil
        } catch let error as TMPClientError {
            return error
        } catch {
            Issue.record("not a TMPClientError: \(error)")
            return nil
        }
    }

    @Test func serverErrorCarriesTheServersCodeAndMessageAndIsNotRetriedForSignedCards() async throws {
        let transport = ScriptedTransport { _, _ in ScriptedTransport.error(500, code: "internal_error", message: "something broke") }
        let error = try #require(await failure { _ = try await Fixtures.client(transport).signCard(Self.request) })
        #expect(error.kind == .server(status: 500))
        #expect(error.code == "internal_error")
        #expect(error.message == "something broke")
        #expect(error.operation == .signCard)
        #expect(transport.requests.count == 1)
    }

    /// `.` and `..` are ids of the right characters that a URL library resolves to another
    /// path (`cards/../art`): refused before a request carries the bearer token there.
    @Test(arguments: [".", "..", "a/b", ""])
    func aCardIdThatCannotBeAPathSegmentSendsNothing(id: String) async throws {
        let transport = ScriptedTransport { _, _ in ScriptedTransport.json(Fixtures.signedCard) }
        let error = try #require(await failure { _ = try await Fixtures.client(transport).cardArt(externalCardId: id) })
        #expect(error.kind == .invalidRequest && error.operation == .cardArt)
        #expect(transport.requests.isEmpty)
    }

    @Test func serverErrorIsRetriedForIdempotentReadsUpToTheCap() async throws {
        let transport = ScriptedTransport { _, _ in ScriptedTransport.error(503, code: "unavailable", message: "database unreachable") }
        let error = try #require(await failure { _ = try await Fixtures.client(transport).cards() })
        #expect(error.kind == .server(status: 503))
        #expect(transport.requests(for: .listCards).count == 3)
    }

    @Test func aReadSucceedsWhenARetrySucceeds() async throws {
        let transport = ScriptedTransport { _, index in
            index == 0 ? ScriptedTransport.error(502, code: "bad_gateway", message: "upstream") : ScriptedTransport.json([TokenSearchResult]())
        }
        let results = try await Fixtures.client(transport).searchTokens(["DA-1"])
        #expect(results.isEmpty)
        #expect(transport.requests.count == 2)
    }

    @Test func backoffWaitsOnTheClockAndDoublesUpToItsCap() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport { _, _ in throw URLError(.networkConnectionLost) }
        let client = Fixtures.client(transport, clock: clock, retry: .init(maximumAttempts: 3, initialBackoff: .seconds(1), maximumBackoff: .seconds(4)))
        let call = Task { await failure { _ = try await client.cards() } }
        // Asleep: the call's timeout timer and the first back-off.
        await clock.waitForSleepers(2)
        #expect(transport.requests.count == 1)
        clock.advanceToNextDeadline()
        await clock.waitForSleepers(2)
        #expect(transport.requests.count == 2)
        clock.advanceToNextDeadline()
        let error = try #require(await call.value)
        #expect(error.kind == .unreachable)
        #expect(transport.requests.count == 3)
        #expect(clock.requestedSleeps.filter { $0 < .seconds(10) } == [.seconds(1), .seconds(2)])
        let policy = TMPClient.RetryPolicy(maximumAttempts: 9, initialBackoff: .milliseconds(500), maximumBackoff: .seconds(4))
        #expect((1...6).map(policy.backoff(afterAttempt:)) == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(4), .seconds(4)])
    }

    @Test func expiredTokenIsUnauthorizedAndNeverRetried() async throws {
        let transport = ScriptedTransport { _, _ in ScriptedTransport.error(401, code: "unauthorized", message: "missing or invalid credentials") }
        let error = try #require(await failure { _ = try await Fixtures.client(transport).cards() })
        #expect(error.kind == .unauthorized)
        #expect(error.code == "unauthorized")
        #expect(!error.isTransient)
        #expect(transport.requests.count == 1)
    }

    @Test func aCallThatOutlivesItsTimeoutEndsAsTimedOut() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport { _, _ in try await ScriptedTransport.hang() }
        let client = Fixtures.client(transport, clock: clock)
        let call = Task { await failure { _ = try await client.signCard(Self.request, timeout: .seconds(5)) } }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        let error = try #require(await call.value)
        #expect(error.kind == .timedOut)
        #expect(error.code == "timed_out")
    }

    /// A search of more references than one request may carry is sent in several requests,
    /// and the timeout bounds them all: two answers of 6 s each end a 10 s search at 10 s.
    /// (Before, each request had the whole timeout, and the search ended after 12 s.)
    @Test func aSearchInSeveralRequestsEndsAtItsOneTimeout() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport { _, index in
            try await clock.sleep(for: index == 0 ? .seconds(6) : .seconds(5))
            return ScriptedTransport.json([TokenSearchResult]())
        }
        let client = Fixtures.client(transport, clock: clock)
        let references = (0..<150).map { "DA-\($0)" }
        let search = Task { await failure { _ = try await client.searchTokens(references, timeout: .seconds(10)) } }
        // Each answer's wait is on the clock before the clock moves.
        func untilAsleep(_ duration: Duration) async throws {
            while !clock.requestedSleeps.contains(duration) { try await Task.sleep(for: .milliseconds(1)) }
        }
        try await untilAsleep(.seconds(6))
        clock.advance(by: .seconds(6))
        try await untilAsleep(.seconds(5))
        clock.advance(by: .seconds(4))
        clock.advance(by: .seconds(1))
        let error = await search.value
        #expect(error?.kind == .timedOut, "\(String(describing: error))")
        #expect(transport.requests(for: .searchTokens).count == 2)
    }

    @Test func aTransportTimeoutIsTimedOutAndRetriedForReads() async throws {
        let transport = ScriptedTransport { _, _ in throw URLError(.timedOut) }
        let error = try #require(await failure { _ = try await Fixtures.client(transport).searchTokens(["DA-1"]) })
        #expect(error.kind == .timedOut)
        #expect(transport.requests.count == 3)
    }

    @Test func malformedJSONIsAMalformedResponseThatDoesNotQuoteTheBody() async throws {
        let transport = ScriptedTransport { _, _ in TransportResponse(statusCode: 200, body: Data("{\"cards\": [{\"secret-looking\": tru".utf8)) }
        let error = try #require(await failure { _ = try await Fixtures.client(transport).cards() })
        #expect(error.kind == .malformedResponse)
        #expect(error.code == "malformed_response")
        #expect(!error.message.contains("secret-looking"))
        #expect(transport.requests.count == 1)
    }

    @Test func wellFormedJSONOfTheWrongShapeNamesTheField() async throws {
        let transport = ScriptedTransport { _, _ in TransportResponse(statusCode: 200, body: Data("{\"activationData\":\"AA==\"}".utf8)) }
        let error = try #require(await failure { _ = try await Fixtures.client(transport).signCard(Self.request) })
        #expect(error.kind == .malformedResponse)
        #expect(error.message.contains("ephemeralPublicKey") || error.message.contains("encryptedData"))
    }

    @Test func anOversizedBodyIsRefusedAndOneAtTheLimitIsRead() async throws {
        // A valid answer padded with white space: only its size can refuse it.
        @Sendable func padded(to size: Int) -> Data {
            let json = Data(#"{"cards":[]}"#.utf8)
            return json + Data(repeating: 0x20, count: size - json.count)
        }
        let limit = 1 << 20
        let over = ScriptedTransport { _, _ in TransportResponse(statusCode: 200, body: padded(to: limit + 1)) }
        let error = try #require(await failure { _ = try await Fixtures.client(over).cards() })
        #expect(error.kind == .malformedResponse)
        #expect(error.message.contains("the response body has \(limit + 1) bytes; at most \(limit) are accepted"), "\(error.message)")
        let atLimit = ScriptedTransport { _, _ in TransportResponse(statusCode: 200, body: padded(to: limit)) }
        #expect(try await Fixtures.client(atLimit).cards().isEmpty)
    }

    @Test func connectionRefusedIsUnreachableAndRetriedOnlyForReads() async throws {
        let transport = ScriptedTransport { _, _ in throw URLError(.cannotConnectToHost) }
        let client = Fixtures.client(transport)
        let read = try #require(await failure { _ = try await client.cards() })
        let write = try #require(await failure { _ = try await client.activateToken(tokenUniqueReference: "DA-1") })
        #expect(read.kind == .unreachable)
        #expect(write.kind == .unreachable)
        #expect(transport.requests(for: .listCards).count == 3)
        #expect(transport.requests(for: .activateToken).count == 1)
    }

    @Test func cancellingTheCallingTaskEndsTheCallAtOnce() async throws {
        let clock = ManualClock()
        let gate = AsyncGate()
        let transport = ScriptedTransport { _, _ in
            await gate.wait()
            return try await ScriptedTransport.hang()
        }
        let client = Fixtures.client(transport, clock: clock)
        let call = Task { await failure { _ = try await client.signCard(Self.request) } }
        await gate.waitForArrivals(1)
        call.cancel()
        let error = try #require(await call.value)
        #expect(error.kind == .cancelled)
        #expect(clock.now.offset == .zero)
    }

    @Test func aMissingCredentialSendsNothing() async throws {
        struct SignedOut: Error {}
        let transport = ScriptedTransport { _, _ in ScriptedTransport.json(CardListResponse(cards: [])) }
        let client = TMPClient(configuration: .init(baseURL: Fixtures.baseURL), transport: transport, clock: ManualClock(), cardholderToken: { throw SignedOut() })
        let error = try #require(await failure { _ = try await client.cards() })
        #expect(error.kind == .credentialUnavailable)
        #expect(transport.requests.isEmpty)
    }

    @Test func requestsCarryTheBearerTokenAndTheLogNeverDoes() async throws {
        let events = Locked<[TMPClientEvent]>([])
        let secret = "eyJhbGciOiJFUzI1NiJ9.secret-claims.secret-signature"
        let transport = ScriptedTransport { request, index in
            index == 0 ? ScriptedTransport.error(503, code: "unavailable", message: "later") : ScriptedTransport.json([TokenSearchResult]())
        }
        let client = Fixtures.client(transport, token: secret) { event in events.withValue { $0.append(event) } }
        _ = try await client.searchTokens(["DA-1", "DA-1", "DA-2"])
        let sent = try #require(transport.requests.last)
        #expect(sent.headers["Authorization"] == "Bearer \(secret)")
        #expect(sent.method == "POST")
        #expect(sent.url.absoluteString == "https://tmp.bank.example/issuer/push-provisioning/tokens/searches")
        #expect(try ScriptedTransport.body(of: sent, as: TokenSearchRequest.self).tokenUniqueReferences == ["DA-1", "DA-2"])
        let lines = events.current.map(\.description)
        #expect(lines == ["tokens/searches #1 sending", "tokens/searches #1 answered 503", "tokens/searches #1 failed unavailable", "tokens/searches #1 retrying after 0.0 seconds", "tokens/searches #2 sending", "tokens/searches #2 answered 200"])
        #expect(!lines.joined().contains("secret"))
        #expect(!lines.joined().contains("DA-1"))
    }

    @Test func anEmptySearchSendsNothing() async throws {
        let transport = ScriptedTransport { _, _ in ScriptedTransport.json([TokenSearchResult]()) }
        #expect(try await Fixtures.client(transport).searchTokens([]).isEmpty)
        #expect(transport.requests.isEmpty)
    }
}
