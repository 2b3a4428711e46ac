import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import TMPTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The SDK's response-size limit over real HTTP on loopback: the default URLSession
/// transport stops reading a body as soon as it is known to be over the limit, instead of
/// holding all of it first; a body at the limit is read; cancellation and the request's
/// timeout still end a call.
@Suite("URLSession transport: response-size limit over loopback")
struct ResponseSizeLimitTests {
    static let limit = 64 * 1024
    static let chunk = 16 * 1024
    /// The most an endless body sends at a network's pace, so a client that reads everything
    /// still ends.
    static let endlessCap = 256 << 20
    /// The most one sends at loopback speed: far over the limit, yet short enough that the
    /// flood (FoundationNetworking reads ahead of its delegate) does not starve the other
    /// suites running meanwhile (connection waits of 2 s in the PostgreSQL outage tests).
    static let fastCap = 8 << 20

    /// What the test server sent, and the flag that ends its slow and endless answers.
    final class Server: Sendable {
        let sentBytes = Locked(0)
        let streamEnded = Locked(false)
        let reachedCap = Locked(false)
        let trickleStarted = Locked(false)
        let stop = Locked(false)
        /// The `Authorization` headers of the requests a redirect led to.
        let redirectedAuthorizations = Locked<[String]>([])

        /// Waits until `stop` is set or `limit` has passed.
        func idle(atMost limit: Duration) async {
            let deadline = ContinuousClock.now + limit
            while !stop.current, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// `{"cards":[]}` padded with spaces to `size` bytes: valid JSON for `GET cards`.
    static func cardsJSON(size: Int) -> ByteBuffer {
        let json = Array(#"{"cards":[]}"#.utf8)
        return ByteBuffer(bytes: json + Array(repeating: UInt8(ascii: " "), count: size - json.count))
    }

    static func router(_ server: Server) -> Router<BasicRequestContext> {
        let router = Router()
        let cards = RouterPath(stringLiteral: "/" + TMPOperation.listCards.path)
        // `GET cards` with a body without a length that never ends (up to the cap or 60 s).
        router.get(cards) { request, _ -> Response in
            let chunk = ByteBuffer(repeating: UInt8(ascii: " "), count: Self.chunk)
            switch request.uri.queryParameters.get("case") {
            case "endless":
                // A body without a length that does not end (until the cap, 60 s, or the client
                // goes away); `pace=1` sends it at about 16 MB/s, a fast network's speed, instead
                // of as fast as loopback takes it.
                let paced = request.uri.queryParameters.get("pace") == "1"
                return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody { writer in
                    defer { server.streamEnded.withValue { $0 = true } }
                    let deadline = ContinuousClock.now + .seconds(60)
                    try await writer.write(ByteBuffer(bytes: Array(#"{"cards":[]}"#.utf8)))
                    let cap = paced ? Self.endlessCap : Self.fastCap
                    while !server.stop.current, server.sentBytes.current < cap, ContinuousClock.now < deadline {
                        try await writer.write(chunk)
                        server.sentBytes.withValue { $0 += Self.chunk }
                        if paced { try await Task.sleep(for: .milliseconds(1)) }
                    }
                    server.reachedCap.withValue { $0 = server.sentBytes.current >= cap }
                    try await writer.finish(nil)
                })
            case "declared":
                // A head that declares 100 MiB; the body then stalls.
                return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(contentLength: 100 << 20) { writer in
                    try await writer.write(ByteBuffer(bytes: Array(#"{"cards":[]}"#.utf8)))
                    await server.idle(atMost: .seconds(30))
                    throw CancellationError()
                })
            case "slow":
                // Headers at once, then a trickle of spaces until the client goes away.
                return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody { writer in
                    defer { server.streamEnded.withValue { $0 = true } }
                    server.trickleStarted.withValue { $0 = true }
                    let deadline = ContinuousClock.now + .seconds(30)
                    while !server.stop.current, ContinuousClock.now < deadline {
                        try await writer.write(ByteBuffer(bytes: [UInt8(ascii: " ")]))
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    try await writer.finish(nil)
                })
            case "redirect":
                // TMP never redirects; a redirect elsewhere must not take the token along.
                return Response(status: .temporaryRedirect, headers: [.location: "/" + TMPOperation.listCards.path + "?case=redirected"])
            case "redirected":
                server.redirectedAuthorizations.withValue { $0.append(request.headers[.authorization] ?? "") }
                return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: Self.cardsJSON(size: 16)))
            case "silent":
                // No answer at all for 30 s.
                await server.idle(atMost: .seconds(30))
                return Response(status: .serviceUnavailable)
            default:
                let size = Int(request.uri.queryParameters.get("size") ?? "") ?? Self.limit
                let body = Self.cardsJSON(size: size)
                if request.uri.queryParameters.get("length") == "none" {
                    // Chunked: the client learns the size only by reading.
                    return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody { writer in
                        var rest = body
                        while let part = rest.readSlice(length: min(Self.chunk, rest.readableBytes)), part.readableBytes > 0 {
                            try await writer.write(part)
                        }
                        try await writer.finish(nil)
                    })
                }
                return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: body))
            }
        }
        return router
    }

    /// Runs `body` with the test server listening on a loopback port; stops its slow answers
    /// and the server afterwards. A plain Hummingbird application, since it streams bodies as
    /// they are written (TMP's own HTTP front sends every body whole).
    static func withServer(_ body: @escaping @Sendable (Server, Int) async throws -> Void) async throws {
        let server = Server()
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let application = Application(
            router: router(server),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: Logger(label: "size-limit") { _ in SwiftLogNoOpLogHandler() }
        )
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await application.runService(gracefulShutdownSignals: []) }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next(), port > 0 else { throw TestFailure("the test server did not start") }
            defer {
                server.stop.withValue { $0 = true }
                tasks.cancelAll()
            }
            try await body(server, port)
        }
    }

    /// A client of the test server whose `GET cards` asks for `query`, with the default
    /// (URLSession) transport unless one is given.
    static func client(port: Int, query: String, transport: any HTTPTransport = URLSessionTransport(), timeout: Duration = .seconds(20)) -> TMPClient {
        let base = URL(string: "http://127.0.0.1:\(port)/")!
        return TMPClient(
            configuration: .init(baseURL: base, timeouts: .init(listCards: timeout), retry: .none, maximumResponseBytes: limit),
            transport: QueryAdding(base: transport, query: query),
            cardholderToken: { "cardholder-jwt" }
        )
    }

    /// Adds `query` to every request's URL (TMPClient builds paths without one).
    struct QueryAdding: HTTPTransport {
        let base: any HTTPTransport
        let query: String

        func send(_ request: TransportRequest) async throws -> TransportResponse {
            var request = request
            var components = URLComponents(url: request.url, resolvingAgainstBaseURL: false)!
            components.query = query
            request.url = components.url!
            return try await base.send(request)
        }
    }

    /// The default transport follows no redirect, so the cardholder's token never goes where
    /// one points; a session of the caller's own follows it, token and all (what the default
    /// guards against, and the proof that the test server's redirect works).
    @Test func aRedirectIsNotFollowedAndTheTokenGoesNowhereElse() async throws {
        try await Self.withServer { server, port in
            let error = await #expect(throws: TMPClientError.self) {
                _ = try await Self.client(port: port, query: "case=redirect").cards()
            }
            #expect(error?.kind == .server(status: 307), "\(error?.message ?? "")")
            #expect(server.redirectedAuthorizations.current.isEmpty)
            let following = URLSessionTransport(session: URLSession(configuration: .ephemeral))
            _ = try await Self.client(port: port, query: "case=redirect", transport: following).cards()
            #expect(server.redirectedAuthorizations.current == ["Bearer cardholder-jwt"])
        }
    }

    /// At a network's speed: the call fails as soon as the limit is passed — as an oversized
    /// body, not at its 10 s timeout, which would end a call that waited for all 256 MiB at
    /// this pace — and the connection closes before the body has all been sent. (The error's
    /// kind tells the two ends apart; a wall-clock bound once failed on a loaded machine.)
    @Test func anEndlessBodyIsRefusedOnceItPassesTheLimitLongBeforeItIsAllSent() async throws {
        try await Self.withServer { server, port in
            let error = await #expect(throws: TMPClientError.self) {
                _ = try await Self.client(port: port, query: "case=endless&pace=1", timeout: .seconds(10)).cards()
            }
            #expect(error?.kind == .malformedResponse)
            #expect(error?.code == "malformed_response")
            #expect(error?.message == "cards answered with an unexpected body (the response body has more than 65536 bytes; at most 65536 are accepted)")
            // The connection is gone: the server's next writes fail and its stream ends.
            let deadline = ContinuousClock.now + .seconds(10)
            while !server.streamEnded.current, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(server.streamEnded.current && !server.reachedCap.current)
            let sent = server.sentBytes.current
            #expect(sent < 64 << 20, "sent \(sent) bytes of a 256 MiB body")
        }
    }

    /// As fast as loopback goes (about a GB/s here), up to 8 MiB: the call still fails as soon
    /// as the limit is passed, from the cut-off body ("more than"), not from one read whole
    /// (which would give the body's exact size). How much the server has sent by then is not
    /// bounded here: FoundationNetworking reads on (and the SDK drops what it reads) until it
    /// acts on the cancellation, later when the machine is loaded.
    @Test func anEndlessBodyAtLoopbackSpeedFailsAtOnce() async throws {
        try await Self.withServer { server, port in
            let error = await #expect(throws: TMPClientError.self) {
                _ = try await Self.client(port: port, query: "case=endless", timeout: .seconds(10)).cards()
            }
            // Not the 10 s timeout: the error is the oversized body's.
            #expect(error?.kind == .malformedResponse)
            #expect(error?.message == "cards answered with an unexpected body (the response body has more than 65536 bytes; at most 65536 are accepted)")
            // Whether the server's stream ended early says nothing here: at this speed it reaches
            // its 8 MiB cap either way (the paced test above checks the connection is dropped).
        }
    }

    @Test func aDeclaredLengthOverTheLimitIsRefusedFromTheHead() async throws {
        try await Self.withServer { _, port in
            let error = await #expect(throws: TMPClientError.self) {
                _ = try await Self.client(port: port, query: "case=declared", timeout: .seconds(15)).cards()
            }
            // Refused from the head (its declared size in the message), not at the timeout.
            #expect(error?.kind == .malformedResponse)
            #expect(error?.message == "cards answered with an unexpected body (the response body has 104857600 bytes; at most 65536 are accepted)")
        }
    }

    @Test(arguments: ["length=none", "length=declared"])
    func aBodyExactlyAtTheLimitIsRead(_ length: String) async throws {
        try await Self.withServer { _, port in
            let cards = try await Self.client(port: port, query: "size=\(Self.limit)&\(length)").cards()
            #expect(cards.isEmpty)
        }
    }

    @Test func oneByteOverTheLimitWithoutALengthIsRefused() async throws {
        try await Self.withServer { _, port in
            let error = await #expect(throws: TMPClientError.self) {
                _ = try await Self.client(port: port, query: "size=\(Self.limit + 1)&length=none").cards()
            }
            #expect(error?.message == "cards answered with an unexpected body (the response body has more than 65536 bytes; at most 65536 are accepted)")
        }
    }

    /// The transport itself: the error says what was refused, and why.
    @Test func theTransportThrowsResponseTooLarge() async throws {
        try await Self.withServer { _, port in
            let transport = URLSessionTransport()
            func request(_ query: String) -> TransportRequest {
                TransportRequest(method: "GET", url: URL(string: "http://127.0.0.1:\(port)/\(TMPOperation.listCards.path)?\(query)")!, timeout: .seconds(10), maximumResponseSize: Self.limit)
            }
            await #expect(throws: ResponseTooLargeError(statusCode: 200, declaredLength: 104_857_600, maximumResponseSize: Self.limit)) {
                _ = try await transport.send(request("case=declared"))
            }
            await #expect(throws: ResponseTooLargeError(statusCode: 200, declaredLength: nil, maximumResponseSize: Self.limit)) {
                _ = try await transport.send(request("case=endless"))
            }
            let unlimited = try await transport.send(TransportRequest(method: "GET", url: request("size=\(Self.limit + 1)&length=none").url, timeout: .seconds(10)))
            #expect(unlimited.body.count == Self.limit + 1, "no limit asked, none applied")
        }
    }

    /// A session of the caller's own keeps its delegate: the body is read whole, and TMPClient
    /// refuses it afterwards (documented on `URLSessionTransport.init(session:)`).
    @Test func aCallersOwnSessionReadsTheBodyWholeAndTheClientRefusesItAfterwards() async throws {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        try await Self.withServer { _, port in
            let error = await #expect(throws: TMPClientError.self) {
                _ = try await Self.client(port: port, query: "size=\(Self.limit + 1)&length=none", transport: URLSessionTransport(session: session)).cards()
            }
            #expect(error?.message == "cards answered with an unexpected body (the response body has 65537 bytes; at most 65536 are accepted)")
        }
    }

    @Test func cancellingTheCallCancelsTheDataTask() async throws {
        try await Self.withServer { server, port in
            let client = Self.client(port: port, query: "case=slow")
            let call = Task { try await client.cards() }
            // Cancelled once the server is answering, so there is a connection to close.
            let started = ContinuousClock.now + .seconds(10)
            while !server.trickleStarted.current, ContinuousClock.now < started { try await Task.sleep(for: .milliseconds(10)) }
            try #require(server.trickleStarted.current)
            let start = ContinuousClock.now
            call.cancel()
            let error = await #expect(throws: TMPClientError.self) { _ = try await call.value }
            #expect(error?.kind == .cancelled)
            #expect(ContinuousClock.now - start < .seconds(5))
            // The connection was closed: the server's trickle fails and ends.
            let deadline = ContinuousClock.now + .seconds(10)
            while !server.streamEnded.current, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(server.streamEnded.current)
        }
    }

    @Test func theRequestsTimeoutStillApplies() async throws {
        try await Self.withServer { _, port in
            let transport = URLSessionTransport()
            let start = ContinuousClock.now
            let request = TransportRequest(method: "GET", url: URL(string: "http://127.0.0.1:\(port)/\(TMPOperation.listCards.path)?case=silent")!, timeout: .seconds(1), maximumResponseSize: Self.limit)
            let error = await #expect(throws: URLError.self) { _ = try await transport.send(request) }
            #expect(error?.code == .timedOut)
            #expect(ContinuousClock.now - start < .seconds(10))
        }
    }
}
