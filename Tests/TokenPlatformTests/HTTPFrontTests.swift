import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ProvisioningCrypto
import ProvisioningModels
import ServiceLifecycle
import SDKTestSupport
import TMPTestSupport
import Testing
@testable import TokenPlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The server's HTTP/1.1 front (``TMPHTTPServer``) over real sockets: what Hummingbird's own
/// connection handling did, it must still do.
@Suite("HTTP front")
struct HTTPFrontTests {
    /// Serves a fresh platform and runs `body` with the port.
    static func serve(_ body: @escaping @Sendable (TestPlatform, Int) async throws -> Void) async throws {
        let platform = try await TestPlatform()
        try await TestTMP.runLive(router: platform.router(), logger: platform.logger) { _, port in
            try await body(platform, port)
        }
    }

    @Test func datesAreIMFFixdates() {
        // RFC 9110's example instant.
        #expect(HTTPDateCache.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDateCache.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDateCache.format(1_795_000_000) == "Wed, 18 Nov 2026 11:06:40 GMT")
    }

    @Test func answersWithDateServerAndLengthOnAKeptAliveConnection() async throws {
        try await Self.serve { _, port in
            let responses = try await blocking {
                let connection = try RawConnection(port: port)
                return try (0..<3).map { _ in
                    try connection.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    return try connection.readResponse()
                }
            }
            for response in responses {
                #expect(response.status == 200)
                #expect(response.headers["server"] == "pushprov")
                #expect(response.headers["date"].map { $0.hasSuffix(" GMT") && $0.count == 29 } == true)
                #expect(response.headers["content-length"] == String(response.body.count))
            }
        }
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await Self.serve { platform, port in
            _ = try await APIClient(port: port, platform: platform).putCard("c1", user: "alice")
            let responses = try await blocking {
                let connection = try RawConnection(port: port)
                // Three requests in one write: an unknown route, a card (issuer key), health.
                try connection.send(
                    "GET /nowhere HTTP/1.1\r\nHost: localhost\r\n\r\n"
                        + "GET /lifecycle/cards/c1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\n\r\n"
                        + "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"
                )
                return try (0..<3).map { _ in try connection.readResponse() }
            }
            #expect(responses.map(\.status) == [404, 200, 200])
            #expect(String(decoding: responses[1].body, as: UTF8.self).contains(#""externalCardId":"c1""#))
            #expect(String(decoding: responses[2].body, as: UTF8.self).contains("database"))
        }
    }

    @Test func aClientThatPipelinesRequestsAndReadsNoAnswersIsNotAnsweredAheadOfWhatItReads() async throws {
        // Before, every request read was answered at once and its response queued in memory:
        // one connection sending small requests for large answers grew the server without
        // bound (2.7 GB in 8 s in a review). Now a request waits while responses wait to be sent.
        let answered = Locked(0)
        let router = Router()
        router.get("/big") { _, _ -> Response in
            answered.withValue { $0 += 1 }
            return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "a"), count: 262_144)))
        }
        let requests = 200
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        try await TestTMP.runLive(router: router, logger: logger) { _, port in
            let connection = try await blocking { try RawConnection(port: port) }
            try await blocking {
                try connection.send(String(repeating: "GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n", count: requests))
            }
            // Time for the server to answer all of them, were it not holding back.
            try await Task.sleep(for: .seconds(1))
            let whileUnread = answered.withValue { $0 }
            #expect(whileUnread < 100, "answered \(whileUnread) of \(requests) requests (256 KiB each) that the client does not read")
            // Reading them, the client gets every answer, in order.
            let statuses = try await blocking { try (0..<requests).map { _ in try connection.readResponse() }.map { $0.status == 200 && $0.body.count == 262_144 } }
            #expect(statuses.count == requests && !statuses.contains(false))
            #expect(answered.withValue { $0 } == requests)
        }
    }

    @Test func aClientThatReadsNoAnswersLosesItsConnectionAfterTheReadTimeout() async throws {
        // A request held back for it must not hold the connection (a place under the limit,
        // a graceful shutdown) for ever.
        let router = Router()
        router.get("/big") { _, _ -> Response in
            Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "a"), count: 262_144)))
        }
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let metrics = PlatformMetrics()
        try await TestTMP.runLive({ onRunning in
            TMPHTTPServer(router: router, host: "127.0.0.1", port: 0, logger: logger, requestReadTimeout: .seconds(1), metrics: metrics, onServerRunning: onRunning)
        }) { _, port in
            let closedAfter = try await blocking { () -> Duration? in
                let connection = try RawConnection(port: port, receiveTimeout: .seconds(20))
                try connection.send(String(repeating: "GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n", count: 200))
                // Reads nothing; notices the server's close when a write is refused (reset).
                // The window is wide: on a loaded machine the kernel keeps taking bytes for a
                // while, and each time it does the server's timer starts again.
                let started = ContinuousClock.now
                while ContinuousClock.now - started < .seconds(45) {
                    Thread.sleep(forTimeInterval: 0.2)
                    if !connection.sendUnlessClosed("x") { return ContinuousClock.now - started }
                }
                return nil
            }
            // The timer restarts while the kernel still takes some of what waits (its buffers
            // grow), so the close comes a few read timeouts later, not at once.
            #expect(closedAfter != nil, "the server closed the connection of a client that reads nothing")
        }
        #expect(metrics.render().contains(#"pushprov_http_connection_failures_total{reason="stalled_reader"} 1"#))
    }

    @Test func aHeadTrickledInLosesItsConnectionAfterTheHeadTimeoutWhileAnIdleKeepAliveOneStays() async throws {
        // Slowloris: a head sent a byte at a time, each within the idle timeout.
        let router = Router()
        router.get("/health") { _, _ -> Response in Response(status: .ok) }
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let metrics = PlatformMetrics()
        try await TestTMP.runLive({ onRunning in
            TMPHTTPServer(router: router, host: "127.0.0.1", port: 0, logger: logger, requestHeadTimeout: .seconds(1), metrics: metrics, onServerRunning: onRunning)
        }) { _, port in
            let closedAfter = try await blocking { () -> Duration? in
                let connection = try RawConnection(port: port, receiveTimeout: .seconds(20))
                try connection.send("GET /health HTTP/1.1\r\n")
                let started = ContinuousClock.now
                while ContinuousClock.now - started < .seconds(15) {
                    Thread.sleep(forTimeInterval: 0.2)
                    if !connection.sendUnlessClosed("X") { return ContinuousClock.now - started }
                }
                return nil
            }
            #expect(closedAfter != nil, "the server kept a connection whose head never ended")
            if let closedAfter { #expect(closedAfter < .seconds(10), "closed after \(closedAfter)") }
            // A keep-alive client silent between requests for longer than the head timeout is
            // not cut off: the head's time starts with its first bytes.
            let statuses = try await blocking { () -> [Int] in
                let connection = try RawConnection(port: port, receiveTimeout: .seconds(20))
                try connection.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                let first = try connection.readResponse().status
                Thread.sleep(forTimeInterval: 2)
                // A head in two parts, well within the head timeout, is answered too.
                try connection.send("GET /health HTTP/1.1\r\n")
                Thread.sleep(forTimeInterval: 0.2)
                try connection.send("Host: localhost\r\n\r\n")
                return [first, try connection.readResponse().status]
            }
            #expect(statuses == [200, 200])
        }
        #expect(metrics.render().contains(#"pushprov_http_connection_failures_total{reason="request_head_timeout"} 1"#))
    }

    /// `Connection: close` (or HTTP/1.0 without keep-alive) closes after the response; a
    /// request NIO cannot parse gets 400
    /// (from NIO's protocol error handler) and the connection closes, as does an HTTP/1.1
    /// request without exactly one `Host`, or any with an invalid one (nothing after it is
    /// answered), and one with a
    /// transfer coding other than chunked (501).
    @Test(arguments: [
        ("GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", 200),
        ("GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: Close\r\n\r\n", 200),
        ("GET /health HTTP/1.0\r\n\r\n", 200),  // HTTP/1.0 keeps a connection only when asked to
        // Protocol upgrades are not offered: NIO parses nothing after one, so what the client
        // sent next would be held unparsed (and a next request never answered); the connection
        // closes instead. (Before, it stayed open until the idle timeout.)
        ("GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n", 200),
        ("GARBAGE\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nBad Header\r\n\r\n", 400),
        // HTTP/1.1 needs exactly one Host (RFC 9112 §3.2); HTTP/1.0 none.
        ("GET /health HTTP/1.1\r\n\r\n", 400),
        ("GET /health HTTP/1.1\r\nHost: localhost\r\nHost: example.com\r\nConnection: close\r\n\r\n", 400),
        ("POST /issuer/push-provisioning/signed-cards HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
        // … and a valid one, in any version (RFC 9112 §3.2).
        ("GET /health HTTP/1.1\r\nHost: local host\r\n\r\nGET /health HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
        ("GET /health HTTP/1.0\r\nHost: user@localhost\r\nConnection: keep-alive\r\n\r\n", 400),
        ("GET /health HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n", 200),
        // A transfer coding other than chunked is not decoded, so refused (RFC 9112 §6.1).
        ("PUT /lifecycle/cards/c1 HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 501),
        ("PUT /lifecycle/cards/c1 HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 501),
        ("GET /health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n0\r\n\r\n", 200),
        // HTTP/1.0 has no chunked coding: framing that an HTTP/1.0 hop may read otherwise is
        // answered, and the connection closed after it (RFC 9112 §6.1), whatever it asks.
        ("POST /tsp/token-events HTTP/1.0\r\nHost: localhost\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /health HTTP/1.0\r\nHost: localhost\r\n\r\n", 401),
    ])
    func theConnectionClosesAfterTheResponse(request: String, status: Int) async throws {
        try await Self.serve { _, port in
            let (answered, rest) = try await blocking {
                let connection = try RawConnection(port: port)
                try connection.send(request)
                return (try connection.readResponse().status, try connection.readToEnd())
            }
            #expect(answered == status)
            #expect(rest.isEmpty, "the server closes the connection")
        }
    }

    /// Which `Host` values are a host and an optional port (RFC 3986 §3.2.2).
    @Test func validHostFieldValues() {
        for valid in ["localhost", "localhost:8080", "localhost:", "127.0.0.1:443", "[::1]", "[::1]:8080", "[v1.fe80::a+en1]", "tmp.example.com", "a%41b", "xn--bcher-kva.example", "", " localhost "] {
            #expect(CloseMarker.isValidHost(valid), "\(valid)")
        }
        for invalid in ["local host", "user@localhost", "a/b", "localhost:80a", "a:1:2", "[::1", "[]", "[::1]x", "[::1]:8080:1", "a%4", "a%zz", "exämple.com", "localhost\u{0}"] {
            #expect(!CloseMarker.isValidHost(invalid), "\(invalid)")
        }
    }

    /// A head within the limits is served; one with more than 100 fields, a field over 16 KiB or
    /// more than 32 KiB in all is answered 400 and its connection closed.
    @Test func headsOverTheHeaderLimitsAreRefused() async throws {
        @Sendable func head(fields: Int, each size: Int) -> String {
            "GET /health HTTP/1.1\r\nHost: localhost\r\n" + (0..<fields).map { "X-Filler-\($0): \(String(repeating: "a", count: size))\r\n" }.joined() + "\r\n"
        }
        try await Self.serve { _, port in
            for (request, status, closes) in [
                (head(fields: 98, each: 10), 200, false), (head(fields: 1, each: 15_000), 200, false), (head(fields: 30, each: 1_000), 200, false),
                (head(fields: 100, each: 10), 400, true), (head(fields: 1, each: 17_000), 400, true), (head(fields: 40, each: 1_000), 400, true),
            ] {
                let (answered, rest) = try await blocking {
                    let connection = try RawConnection(port: port)
                    try connection.send(request)
                    let answered = try connection.readResponse().status
                    if !closes { try connection.send("GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n") }
                    return (answered, try connection.readToEnd())
                }
                #expect(answered == status, "\(request.count) bytes")
                #expect(rest.isEmpty == closes, "\(request.count) bytes")
            }
        }
    }

    @Test func aTunnelRequestIsRefusedAndItsConnectionClosed() async throws {
        try await Self.serve { _, port in
            let answer = try await blocking {
                let connection = try RawConnection(port: port)
                try connection.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
                return String(decoding: try connection.readToEnd(), as: UTF8.self)
            }
            // Answered, and closed (reading to the end returned instead of timing out).
            #expect(answer.hasPrefix("HTTP/1.1 404"), "\(answer.prefix(200))")
        }
    }

    @Test func aClientThatExpects100ContinueGetsItBeforeSendingTheBody() async throws {
        try await Self.serve { platform, port in
            let body = #"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Debit"}"#
            let (interim, final) = try await blocking {
                let connection = try RawConnection(port: port)
                try connection.send("PUT /lifecycle/cards/c7 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nExpect: 100-continue\r\n\r\n")
                // Nothing of the body is sent until the server says to go on.
                let interim = try connection.readResponse()
                try connection.send(body)
                return (interim, try connection.readResponse())
            }
            #expect(interim.status == 100)
            #expect(final.status == 201)
            #expect(try await platform.store.card(externalCardId: "c7")?.userId == "alice")
        }
    }

    @Test func aBodyOverEveryRoutesLimitIsRefusedWith413AndNothingIsStored() async throws {
        try await Self.serve { platform, port in
            // Chunked, so no Content-Length lets a route refuse it before reading: the front
            // keeps only the first maximumBodySize + 1 bytes and the route refuses those, as
            // soon as they are in: the client learns it while still sending (the body's end is
            // never sent here), and the connection closes after the answer.
            let (refused, rest) = try await blocking {
                let connection = try RawConnection(port: port, receiveTimeout: .seconds(10))
                let chunk = [UInt8](repeating: 0x41, count: 256 * 1024)
                try connection.send("PUT /lifecycle/card-art/big HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\n")
                for _ in 0..<(TMPHTTPServer.maximumBodySize / chunk.count + 2) {
                    try connection.send(String(chunk.count, radix: 16) + "\r\n")
                    try connection.send(bytes: chunk)
                    try connection.send("\r\n")
                }
                let refused = try connection.readResponse()
                // What the client sends after the answer is discarded, not answered.
                try connection.send("1\r\nA\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                connection.closeSending()
                return (refused, try connection.readToEnd())
            }
            #expect(refused.status == 413)
            #expect(refused.headers["connection"] == "close")
            #expect(String(decoding: refused.body, as: UTF8.self).contains(#""code":"payload_too_large""#))
            #expect(rest.isEmpty, "\(String(decoding: rest, as: UTF8.self))")
            #expect(try await platform.store.cardArt(id: "big") == nil)
        }
    }

    /// A body of a size the route may take, or under the limit of what is read through, keeps
    /// its connection: the next request on it is answered.
    @Test func aSmallBodyWithoutACredentialIsReadThroughAndTheConnectionKept() async throws {
        try await Self.serveAsTheServerDoes { _, port in
            let (refused, next) = try await blocking {
                let connection = try RawConnection(port: port)
                let body = String(repeating: "x", count: JSONCoding.maximumBodySize)
                try connection.send("POST /issuer/push-provisioning/signed-cards HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                try connection.send(String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n0\r\n\r\n")
                let refused = try connection.readResponse()
                try connection.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                return (refused, try connection.readResponse())
            }
            #expect(refused.status == 401 && refused.headers["connection"] == nil)
            #expect(next.status == 200)
        }
    }

    /// A length announced over the limit, without `Expect: 100-continue`, is refused from the
    /// head too: before the body is sent.
    @Test func aLengthAnnouncedOverTheLimitIsRefusedBeforeTheBodyIsSent() async throws {
        try await Self.serveAsTheServerDoes { _, port in
            let statuses = try await blocking {
                try [TestPlatform.issuerKey, nil].map { key in
                    let connection = try RawConnection(port: port, receiveTimeout: .seconds(10))
                    let authorization = key.map { "Authorization: Bearer \($0)\r\n" } ?? ""
                    try connection.send("PUT /lifecycle/cards/c1 HTTP/1.1\r\nHost: localhost\r\n\(authorization)Content-Type: application/json\r\nContent-Length: \(100 * 1024 * 1024)\r\n\r\n{")
                    let reply = try connection.readResponse()
                    connection.closeSending()
                    #expect(try connection.readToEnd().isEmpty)
                    return reply.status
                }
            }
            #expect(statuses == [413, 401])
        }
    }

    /// HEAD is answered as GET without the body: the same status and headers, `Content-Length`
    /// the body's, and the connection goes on to the next request. A path without GET refuses
    /// it (405), and every 405 lists HEAD beside GET.
    @Test func headIsAnsweredAsGetWithoutTheBody() async throws {
        try await Self.serveAsTheServerDoes { platform, port in
            _ = try await APIClient(port: port, platform: platform).putCard("c1", user: "alice")
            let jwt = platform.jwt("alice")
            let replies = try await blocking {
                let connection = try RawConnection(port: port)
                var replies: [(RawConnection.Response, toHEAD: Bool)] = []
                for (method, path, authorization) in [
                    ("HEAD", "/health", ""), ("GET", "/health", ""),
                    ("HEAD", "/issuer/push-provisioning/cards", "Authorization: Bearer \(jwt)\r\n"),
                    ("GET", "/issuer/push-provisioning/cards", "Authorization: Bearer \(jwt)\r\n"),
                    ("HEAD", "/issuer/push-provisioning/cards", ""),
                    ("HEAD", "/issuer/push-provisioning/signed-cards", "Authorization: Bearer \(jwt)\r\n"),
                    ("POST", "/lifecycle/cards/c1", "Authorization: Bearer \(TestPlatform.issuerKey)\r\n"),
                    ("GET", "/health", ""),
                ] {
                    try connection.send("\(method) \(path) HTTP/1.1\r\nHost: localhost\r\n\(authorization)\r\n")
                    replies.append((try connection.readResponse(toHEAD: method == "HEAD"), method == "HEAD"))
                }
                return replies
            }
            #expect(replies.map(\.0.status) == [200, 200, 200, 200, 401, 405, 405, 200])
            let (head, get) = (replies[0].0, replies[1].0)
            #expect(head.body.isEmpty && head.headers["content-length"] == String(get.body.count) && head.headers["content-type"] == get.headers["content-type"])
            let (cardsHead, cards) = (replies[2].0, replies[3].0)
            #expect(cardsHead.body.isEmpty && cardsHead.headers["content-length"] == String(cards.body.count) && !cards.body.isEmpty)
            #expect(replies[4].0.headers["content-length"].flatMap(Int.init).map { $0 > 0 } == true)
            #expect(replies[5].0.headers["allow"] == "POST")
            #expect(replies[6].0.headers["allow"] == "PUT, PATCH, GET, HEAD")
        }
    }

    @Test func aJSONBodyJustOverItsLimitIsRefusedEvenWithoutALength() async throws {
        try await Self.serve { platform, port in
            let status = try await blocking {
                let connection = try RawConnection(port: port)
                let body = #"{"userId":"alice","padding":""# + String(repeating: "x", count: JSONCoding.maximumBodySize) + #""}"#
                try connection.send("PUT /lifecycle/cards/c9 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                try connection.send(String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n0\r\n\r\n")
                return try connection.readResponse().status
            }
            #expect(status == 413)
            #expect(try await platform.store.card(externalCardId: "c9") == nil)
        }
    }

    /// Serves a fresh platform as `pushprov serve` does: route-aware body limits, and an idle
    /// timeout of `idleTimeout`.
    static func serveAsTheServerDoes(
        idleTimeout: Duration = TMPHTTPServer.defaultIdleTimeout,
        requestReadTimeout: Duration = TMPHTTPServer.defaultRequestReadTimeout,
        metrics: PlatformMetrics? = nil,
        _ body: @escaping @Sendable (TestPlatform, Int) async throws -> Void
    ) async throws {
        try await serveAsTheServerDoes(idleTimeout: idleTimeout, requestReadTimeout: requestReadTimeout, metrics: metrics) { platform, _, port in try await body(platform, port) }
    }

    /// ``serveAsTheServerDoes(idleTimeout:requestReadTimeout:_:)`` that also hands `body` the
    /// authenticator the server judges credentials with.
    static func serveAsTheServerDoes(
        idleTimeout: Duration = TMPHTTPServer.defaultIdleTimeout,
        requestReadTimeout: Duration = TMPHTTPServer.defaultRequestReadTimeout,
        metrics: PlatformMetrics? = nil,
        _ body: @escaping @Sendable (TestPlatform, Authenticator, Int) async throws -> Void
    ) async throws {
        let platform = try await TestPlatform()
        let authenticator = platform.authenticator()
        let router = platform.router(authenticator: authenticator)
        let logger = platform.logger
        try await TestTMP.runLive({ onRunning in
            TMPHTTPServer(
                router: router, host: "127.0.0.1", port: 0, logger: logger,
                bodyLimit: TMPServer.bodyLimit(authenticator: authenticator), idleTimeout: idleTimeout,
                requestReadTimeout: requestReadTimeout, metrics: metrics, onServerRunning: onRunning
            )
        }) { _, port in try await body(platform, authenticator, port) }
    }

    @Test func onlyACardArtUploadWithTheIssuerKeyMayHaveALargeBody() async throws {
        let platform = try await TestPlatform()
        let authenticator = platform.authenticator()
        let limit = TMPServer.bodyLimit(authenticator: authenticator)
        func head(_ method: HTTPRequest.Method, _ path: String, _ authorization: String?) -> HTTPRequest {
            var request = HTTPRequest(method: method, scheme: nil, authority: "localhost", path: path)
            if let authorization { request.headerFields[.authorization] = authorization }
            return request
        }
        let large = TMPHTTPServer.maximumBodySize
        let small = JSONCoding.maximumBodySize
        #expect(limit(head(.put, "/lifecycle/card-art/a1", "Bearer \(TestPlatform.issuerKey)")) == large)
        #expect(limit(head(.put, "/lifecycle/card-art/a1", "bearer \(TestPlatform.issuerKey) ")) == large)
        // The Lifecycle and TSP APIs' keys are judged from the head: a wrong one holds nothing.
        #expect(limit(head(.put, "/lifecycle/card-art/a1", "Bearer \(TestPlatform.tspKey)")) == 0)
        #expect(limit(head(.post, "/tsp/token-events", "Bearer \(TestPlatform.issuerKey)")) == 0)
        #expect(limit(head(.post, "/tsp/token-events", "Bearer \(TestPlatform.tspKey)")) == small)
        #expect(limit(head(.post, "/lifecycle/card-art/a1", "Bearer \(TestPlatform.issuerKey)")) == small)
        #expect(limit(head(.put, "/lifecycle/cards/c1", "Bearer \(TestPlatform.issuerKey)")) == small)
        // The API is told by the path as the router reads it: empty segments skipped, no query.
        #expect(limit(head(.put, "//lifecycle//card-art/a1?x=/tsp/", "Bearer \(TestPlatform.issuerKey)")) == large)
        #expect(limit(head(.put, "//lifecycle/cards/c1", "Bearer \(TestPlatform.issuerKey)")) == small)
        #expect(limit(head(.post, "/tsp//token-events", "Bearer \(TestPlatform.tspKey)")) == small)
        #expect(limit(head(.post, "//issuer/push-provisioning/signed-cards", "Bearer \(TestPlatform.issuerKey)")) == 0)
        // An absolute-form target that reaches the head as it came, as the router reads it.
        #expect(limit(head(.put, "http://localhost/lifecycle/cards/c1?x={", "Bearer \(TestPlatform.issuerKey)")) == small)
        #expect(limit(head(.put, "http://localhost:8080/lifecycle/card-art/a1", "Bearer \(TestPlatform.issuerKey)")) == large)
        // So is a cardholder JWT, as far as it can be without verifying its signature there:
        // one that is no JWT, names an unknown key or has expired holds nothing.
        #expect(limit(head(.post, "/issuer/push-provisioning/signed-cards", "Bearer \(platform.jwt("alice"))")) == small)
        #expect(limit(head(.post, "/issuer/push-provisioning/signed-cards", "Bearer x")) == 0)
        #expect(limit(head(.post, "/issuer/push-provisioning/signed-cards", "Bearer \(platform.jwt("alice", lifetime: -3600))")) == 0)
        #expect(limit(head(.post, "/issuer/push-provisioning/signed-cards", "Bearer \(platform.jwt("alice", key: SigningKey(id: "not-\(platform.cardholderKey.id)", privateKey: .init())))")) == 0)
        #expect(limit(head(.post, "/issuer/push-provisioning/signed-cards", "Bearer \(TestPlatform.issuerKey)")) == 0)
        // A forged signature is found by the route; once it has, the head knows it too.
        let forged = "Bearer \(platform.jwt("alice", key: SigningKey(id: platform.cardholderKey.id, privateKey: .init())))"
        #expect(limit(head(.post, "/issuer/push-provisioning/signed-cards", forged)) == small)
        #expect(authenticator.cardholderVerifications == 0, "no signature is verified from the head")
        _ = try? authenticator.authenticate(Request(head: head(.post, "/issuer/push-provisioning/signed-cards", forged), body: RequestBody(buffer: ByteBuffer())), as: .cardholder, logger: platform.logger)
        #expect(limit(head(.post, "/issuer/push-provisioning/signed-cards", forged)) == 0)
        #expect(authenticator.cardholderVerifications == 1)
        // Without a bearer credential, a request can only be refused: none of its body is held.
        #expect(limit(head(.put, "/lifecycle/card-art/a1", nil)) == 0)
        #expect(limit(head(.post, "/issuer/push-provisioning/signed-cards", nil)) == 0)
        #expect(limit(head(.post, "/issuer/push-provisioning/signed-cards", "Basic YWxpY2U6c2VjcmV0")) == 0)
        #expect(limit(head(.put, "/lifecycle/cards/c1", "Bearer " + String(repeating: "a", count: 8192))) == 0)
        // That holds because every route open to all callers is a GET, which takes no body
        // (`/metrics` too, open unless a metrics key is configured).
        #expect(RouteTable.all.filter { $0.auth == .none || $0.auth == .metrics }.allSatisfy { $0.method == .get })
    }

    @Test func everyRouteHoldsABodyForItsOwnCredentialAndNoneForAnother() async throws {
        let platform = try await TestPlatform()
        let limit = TMPServer.bodyLimit(authenticator: platform.authenticator())
        let credentials: [AuthRequirement: String] = [.cardholder: "Bearer \(platform.jwt("alice"))", .issuer: "Bearer \(TestPlatform.issuerKey)", .tsp: "Bearer \(TestPlatform.tspKey)"]
        for spec in RouteTable.all where spec.method != .get {
            let path = spec.path.replacingOccurrences(of: "{externalCardId}", with: "c1").replacingOccurrences(of: "{tokenUniqueReference}", with: "T1").replacingOccurrences(of: "{artId}", with: "a1")
            var request = HTTPRequest(method: spec.method, scheme: nil, authority: "localhost", path: path)
            request.headerFields[.authorization] = credentials[spec.auth]
            // A route's own credential never gets a body cut short: only a refusal can.
            #expect(limit(request) >= JSONCoding.maximumBodySize, "\(spec)")
            // Another API's credential holds nothing: each is judged from the head.
            for (other, header) in credentials where other != spec.auth {
                request.headerFields[.authorization] = header
                #expect(limit(request) == 0, "\(spec) with the \(other) credential")
            }
        }
    }

    @Test func aCardholderTokenJudgedFromTheHeadIsVerifiedOnce() async throws {
        try await Self.serveAsTheServerDoes { platform, authenticator, port in
            let valid = platform.jwt("alice")
            let forged = platform.jwt("alice", key: SigningKey(id: platform.cardholderKey.id, privateKey: .init()))
            let replies = try await blocking { () -> [RawConnection.Response] in
                var replies: [RawConnection.Response] = []
                for token in [valid, forged, forged] {
                    // A client waiting for 100 Continue: a valid token is asked for its body, and
                    // so is a forged one at first (no signature is verified on the event loop);
                    // its route refuses it, and from then on its head does.
                    let connection = try RawConnection(port: port)
                    try connection.send("POST /issuer/push-provisioning/tokens/searches HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
                    let first = try connection.readResponse()
                    replies.append(first)
                    if first.status == 100 {
                        try connection.send("{}")
                        replies.append(try connection.readResponse())
                    }
                }
                return replies
            }
            #expect(replies.map(\.status) == [100, 400, 100, 401, 401])
            #expect(replies.last?.headers["connection"] == "close")
            // Each token was verified once.
            #expect(authenticator.cardholderVerifications == 2)
            // The forged token's refusal is logged: by the route, and by the head as well only
            // when the two come more than the log's one-line-a-second throttle apart (a loaded
            // machine: this once failed with 2 lines when the test took 37 s).
            let refusals = platform.logs.current.filter { $0.contains("credential refused") && $0.contains("bad_signature") }.count
            #expect((1...2).contains(refusals), "\(refusals) lines")
        }
    }

    @Test func aRequestWithoutACredentialIsRefusedWithoutItsBodyBeingAskedFor() async throws {
        try await Self.serveAsTheServerDoes { platform, port in
            let (early, plain) = try await blocking { () -> ([RawConnection.Response], [Int]) in
                // A client waiting for 100 Continue is refused from the head, for a body of any size.
                let waiting = try RawConnection(port: port)
                try waiting.send("POST /issuer/push-provisioning/signed-cards HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
                let early = try waiting.readResponse()
                // So is one announcing a chunked body.
                let chunked = try RawConnection(port: port)
                try chunked.send("POST /issuer/push-provisioning/signed-cards HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
                let earlyChunked = try chunked.readResponse()
                // One that sends its body anyway is refused once it is in, and keeps its connection.
                let sending = try RawConnection(port: port)
                let body = String(repeating: " ", count: 60_000) + "{}"
                try sending.send("POST /issuer/push-provisioning/signed-cards HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
                let refused = try sending.readResponse()
                try sending.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                return ([early, earlyChunked], [refused.status, try sending.readResponse().status])
            }
            #expect(early.map(\.status) == [401, 401])
            #expect(early.map { $0.headers["connection"] } == ["close", "close"])
            #expect(plain == [401, 200])
        }
    }

    @Test func aLargeUploadIsReadOnlyForTheIssuer() async throws {
        try await Self.serveAsTheServerDoes { platform, port in
            let replies = try await blocking {
                let body = [UInt8](repeating: 0x41, count: 1 << 20)
                var replies: [RawConnection.Response] = []
                for key in [TestPlatform.tspKey, TestPlatform.issuerKey] {
                    let connection = try RawConnection(port: port)
                    try connection.send("PUT /lifecycle/card-art/big HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(key)\r\nContent-Type: image/png\r\nContent-Length: \(body.count)\r\n\r\n")
                    // (Refused from its head, the request may be answered before its body is sent.)
                    _ = connection.sendUnlessClosed(String(decoding: body, as: UTF8.self))
                    replies.append(try connection.readResponse())
                }
                return replies
            }
            // Without the key: 401 from the head, with the connection closed after it (none of
            // the body was held: the TSP key is judged from the head); with it, the whole
            // megabyte is read and judged as card art.
            #expect(replies.map(\.status) == [401, 400])
            #expect(replies.map { $0.headers["connection"] } == ["close", nil])
            #expect(String(decoding: replies[1].body, as: UTF8.self).contains("PNG"), "\(String(decoding: replies[1].body, as: UTF8.self))")
            #expect(try await platform.store.cardArt(id: "big") == nil)
        }
    }

    @Test func aBodyAnnouncedOverTheLimitIsRefusedAtOnceWithoutBeingAskedFor() async throws {
        try await Self.serveAsTheServerDoes { _, port in
            let (reply, rest) = try await blocking {
                let connection = try RawConnection(port: port)
                let length = JSONCoding.maximumBodySize + 1
                try connection.send("PUT /lifecycle/cards/c1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: \(length)\r\n\r\n")
                // No "100 Continue" but the refusal, before a byte of the body is sent (before,
                // the client had to give up waiting and send the body to learn it).
                return (try connection.readResponse(), try connection.readToEnd())
            }
            #expect(reply.status == 413)
            #expect(String(decoding: reply.body, as: UTF8.self).contains("payload_too_large"))
            #expect(rest.isEmpty, "nothing more is sent, and the server closes its side")
        }
    }

    @Test func aRequestAnsweredFromItsHeadStillLosesItsConnectionToABodyTrickledIn() async throws {
        try await Self.serveAsTheServerDoes(requestReadTimeout: .seconds(1)) { _, port in
            let (reply, closed) = try await blocking {
                let connection = try RawConnection(port: port, receiveTimeout: .seconds(10))
                try connection.send("PUT /lifecycle/cards/c1 HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 10000000000\r\n\r\n")
                let reply = try connection.readResponse()
                // A byte now and then, as if to keep the connection.
                let started = ContinuousClock.now
                var closed = false
                while ContinuousClock.now - started < .seconds(30), !closed {
                    closed = !connection.sendUnlessClosed("x")
                    Thread.sleep(forTimeInterval: 0.2)
                }
                return (reply, closed)
            }
            #expect(reply.status == 401)
            #expect(reply.headers["connection"] == "close")
            #expect(closed, "the server closed the connection after its read timeout")
        }
    }

    @Test func nothingSentAfterARequestAnsweredFromItsHeadIsCarriedOut() async throws {
        try await Self.serveAsTheServerDoes { platform, port in
            let (reply, rest) = try await blocking {
                let connection = try RawConnection(port: port)
                // The body it was not asked for, sent at once, then a request that would create a card.
                let card = #"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"A","network":"VISA","productTitle":"P"}"#
                try connection.send(
                    "PUT /lifecycle/card-art/x HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 70000\r\n\r\n"
                        + String(repeating: "x", count: 70000)
                        + "PUT /lifecycle/cards/c2 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: application/json\r\nContent-Length: \(card.utf8.count)\r\n\r\n\(card)"
                )
                return (try connection.readResponse(), try connection.readToEnd())
            }
            #expect(reply.status == 401)
            #expect(rest.isEmpty, "no second answer")
            #expect(try await platform.store.card(externalCardId: "c2") == nil, "the request after the last was not carried out")
        }
    }

    @Test func aRequestAnsweredFromItsHeadBehindAPipelinedOneIsAnsweredToo() async throws {
        try await Self.serveAsTheServerDoes { _, port in
            let replies = try await blocking {
                let connection = try RawConnection(port: port)
                try connection.send(
                    "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"
                        + "PUT /lifecycle/cards/c1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 10000000\r\n\r\n"
                )
                return try (0..<2).map { _ in try connection.readResponse().status }
            }
            #expect(replies == [200, 413])
        }
    }

    @Test func anHTTP10RequestExpectingContinueGetsNoInterimResponse() async throws {
        try await Self.serve { _, port in
            let answer = try await blocking {
                let connection = try RawConnection(port: port)
                try connection.send("POST /issuer/push-provisioning/tokens/searches HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}")
                return String(decoding: try connection.readToEnd(), as: UTF8.self)
            }
            #expect(answer.hasPrefix("HTTP/1.1 401"), "\(answer.prefix(120))")
        }
    }

    @Test func aClientThatSendsTheBodyAnywayStillGetsTheRefusal() async throws {
        try await Self.serveAsTheServerDoes { _, port in
            let reply = try await blocking {
                let connection = try RawConnection(port: port)
                let length = 1 << 20
                try connection.send("PUT /lifecycle/cards/c1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.tspKey)\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: \(length)\r\n\r\n")
                try connection.send(bytes: [UInt8](repeating: 0x20, count: length))
                return try connection.readResponse()
            }
            // The wrong key: 401 first, as for any request.
            #expect(reply.status == 401)
        }
    }

    /// A `GET /health` on a new connection, then (after closing this side when asked) the wait
    /// until the server closes the connection: the answer's status and that wait.
    static func healthThenTimeToClose(port: Int, closingSending: Bool) async throws -> (Int, Duration) {
        try await blocking {
            let connection = try RawConnection(port: port)
            // Timed from before the request: the server's clock starts once it has written the
            // answer, and a client that reads the answer late must not shorten what it measures.
            let start = ContinuousClock.now
            try connection.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let answered = try connection.readResponse().status
            if closingSending { connection.closeSending() }
            _ = try connection.readToEnd()  // returns when the server closes
            return (answered, ContinuousClock.now - start)
        }
    }

    @Test func aConnectionThatSendsNothingIsClosedAfterTheIdleTimeout() async throws {
        try await Self.serveAsTheServerDoes(idleTimeout: .milliseconds(300)) { _, port in
            let (answered, closedAfter) = try await Self.healthThenTimeToClose(port: port, closingSending: false)
            #expect(answered == 200)
            #expect(closedAfter >= .milliseconds(300) && closedAfter < .seconds(30), "\(closedAfter)")
            // A connection that never sent a request goes the same way.
            let silent = try await blocking { () -> Int in
                let connection = try RawConnection(port: port)
                return try connection.readToEnd().count
            }
            #expect(silent == 0)
        }
    }

    @Test func aRequestTrickledInSlowerThanTheReadTimeoutLosesItsConnection() async throws {
        // The idle timeout alone would not close it: each part read counts as activity.
        try await Self.serveAsTheServerDoes(idleTimeout: .seconds(60), requestReadTimeout: .seconds(2)) { platform, port in
            let (whole, trickled, elapsed) = try await blocking {
                // A request sent in two parts inside the limit is answered.
                let first = try RawConnection(port: port)
                try first.send("PUT /lifecycle/cards/c1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: application/json\r\nContent-Length: 155\r\n\r\n")
                usleep(100_000)
                try first.send(#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Everyday Debit"}"#)
                let whole = try first.readResponse().status
                // One trickled byte by byte, 100 ms apart (each byte is activity), is cut off
                // 2 s after its head, long before the idle timeout. (Timed from before the head,
                // which the server's clock cannot start before; a byte the client sends late,
                // after the close, is not sent: a write to the closed socket would raise SIGPIPE.)
                let second = try RawConnection(port: port)
                let start = ContinuousClock.now
                try second.send("PUT /lifecycle/cards/c2 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
                for _ in 0..<3 {
                    usleep(100_000)
                    guard second.sendUnlessClosed("{") else { break }
                }
                let received = try second.readToEnd()
                return (whole, received, ContinuousClock.now - start)
            }
            #expect(whole == 201)
            #expect(trickled.isEmpty, "closed without an answer")
            #expect(elapsed >= .milliseconds(1900) && elapsed < .seconds(30), "\(elapsed)")
            #expect(try await platform.store.card(externalCardId: "c2") == nil)
        }
    }

    /// Connections closed before a request reached the router are counted by reason: a request
    /// NIO cannot parse (answered 400), a head that is no HTTP request, and one not whole within
    /// the read timeout. Its four series are there from the start, at zero.
    @Test func connectionsClosedBeforeTheRouterAreCounted() async throws {
        let metrics = PlatformMetrics()
        let count = { (reason: String) -> String? in
            metrics.render().split(separator: "\n").first { $0.hasPrefix("pushprov_http_connection_failures_total{reason=\"\(reason)\"}") }.map(String.init)
        }
        #expect(["unparsable_request", "request_read_timeout", "request_head_timeout", "stalled_reader"].map(count) == [
            #"pushprov_http_connection_failures_total{reason="unparsable_request"} 0"#,
            #"pushprov_http_connection_failures_total{reason="request_read_timeout"} 0"#,
            #"pushprov_http_connection_failures_total{reason="request_head_timeout"} 0"#,
            #"pushprov_http_connection_failures_total{reason="stalled_reader"} 0"#,
        ])
        try await Self.serveAsTheServerDoes(requestReadTimeout: .seconds(1), metrics: metrics) { _, port in
            let (garbage, trickled) = try await blocking {
                let first = try RawConnection(port: port)
                try first.send("NOT HTTP AT ALL\r\n\r\n")
                let garbage = try first.readResponse().status
                let second = try RawConnection(port: port)
                try second.send("PUT /lifecycle/cards/c2 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
                return (garbage, try second.readToEnd())
            }
            #expect(garbage == 400)
            #expect(trickled.isEmpty)
        }
        #expect(count("unparsable_request") == #"pushprov_http_connection_failures_total{reason="unparsable_request"} 1"#)
        #expect(count("request_read_timeout") == #"pushprov_http_connection_failures_total{reason="request_read_timeout"} 1"#)
        #expect(count("stalled_reader") == #"pushprov_http_connection_failures_total{reason="stalled_reader"} 0"#)
    }

    /// A request answered early (its chunked body over the limit) is not counted as one that
    /// failed to arrive when the client goes on sending past the read timeout: its answer ended
    /// the request, and the rest is discarded.
    @Test func aRequestAnsweredEarlyIsNotCountedAsReadTooSlowly() async throws {
        let metrics = PlatformMetrics()
        try await Self.serveAsTheServerDoes(requestReadTimeout: .seconds(1), metrics: metrics) { _, port in
            let status = try await blocking {
                let connection = try RawConnection(port: port)
                try connection.send("PUT /lifecycle/cards/c9 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                usleep(100_000)
                let chunk = String(repeating: "x", count: JSONCoding.maximumBodySize + 1)
                try connection.send(String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n")
                let status = try connection.readResponse().status
                // More of the body, well past the read timeout.
                for _ in 0..<6 {
                    usleep(300_000)
                    guard connection.sendUnlessClosed("1\r\nx\r\n") else { break }
                }
                return status
            }
            #expect(status == 413)
        }
        #expect(metrics.render().contains(#"pushprov_http_connection_failures_total{reason="request_read_timeout"} 0"#))
    }

    /// An error no route or middleware turned into a response.
    struct Misbehaviour: Error {}

    /// A bare router (no error middleware) whose routes fail in the ways the front must survive,
    /// and one that reports its request id.
    static func misbehavingRouter() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/throws") { _, _ -> String in throw Misbehaviour() }
        router.get("/body-fails") { _, _ -> Response in
            Response(status: .ok, body: ResponseBody { _ in throw Misbehaviour() })
        }
        router.get("/request-id") { _, context -> String in
            let own = context.logger[metadataKey: "hb.request.id"].map { "\($0)" } ?? ""
            // What a service's line, logged through another logger, carries.
            let provided = RequestLogContext.metadataProvider.get()["hb.request.id"].map { "\($0)" } ?? "none"
            return own == provided ? own : "differs: \(own) \(provided)"
        }
        return router
    }

    @Test func anErrorNoRouteHandledIsA500AndTheConnectionServesOn() async throws {
        let logger = Logger(label: "test.front") { _ in SwiftLogNoOpLogHandler() }
        try await TestTMP.runLive(router: Self.misbehavingRouter(), logger: logger) { _, port in
            let (failed, next) = try await blocking {
                let connection = try RawConnection(port: port)
                try connection.send("GET /throws HTTP/1.1\r\nHost: localhost\r\n\r\n")
                let failed = try connection.readResponse()
                try connection.send("GET /request-id HTTP/1.1\r\nHost: localhost\r\n\r\n")
                return (failed, try connection.readResponse())
            }
            #expect(failed.status == 500)
            #expect(failed.headers["server"] == "pushprov")
            #expect(failed.headers["content-length"] == "0")
            #expect(failed.body.isEmpty, "nothing about the error is sent")
            #expect(next.status == 200)
        }
    }

    @Test func aBodyThatFailsAfterItsHeadWasDecidedClosesTheConnectionWithoutAResponse() async throws {
        let logger = Logger(label: "test.front") { _ in SwiftLogNoOpLogHandler() }
        try await TestTMP.runLive(router: Self.misbehavingRouter(), logger: logger) { _, port in
            let received = try await blocking {
                let connection = try RawConnection(port: port)
                try connection.send("GET /body-fails HTTP/1.1\r\nHost: localhost\r\n\r\n")
                return try connection.readToEnd()
            }
            // A 200 head with a body that never came would be a lie; the client sees the
            // connection end instead.
            #expect(received.isEmpty)
        }
    }

    @Test func everyRequestHasARequestIdOfItsOwnInItsLogger() async throws {
        // A handler that keeps metadata (a no-op handler drops it); it logs nothing here.
        var logger = Logger(label: "test.front") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .critical
        try await TestTMP.runLive(router: Self.misbehavingRouter(), logger: logger) { _, port in
            let responses = try await blocking {
                let connection = try RawConnection(port: port)
                return try (0..<4).map { _ in
                    try connection.send("GET /request-id HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    return try connection.readResponse()
                }
            }
            let ids = responses.map { String(decoding: $0.body, as: UTF8.self) }
            #expect(responses.allSatisfy { $0.status == 200 })
            #expect(ids.allSatisfy { !$0.isEmpty && !$0.hasPrefix("differs") }, "\(ids)")
            #expect(Set(ids).count == ids.count, "ids are not reused: \(ids)")
        }
    }

    @Test func aConnectionTheClientClosedIsClosedAtOnceNotAfterTheIdleTimeout() async throws {
        try await Self.serveAsTheServerDoes(idleTimeout: .seconds(30)) { _, port in
            let (answered, closedAfter) = try await Self.healthThenTimeToClose(port: port, closingSending: true)
            #expect(answered == 200)
            #expect(closedAfter < .seconds(10), "\(closedAfter)")
            // One that closes before sending anything goes the same way.
            let silentClosedAfter = try await blocking {
                let connection = try RawConnection(port: port)
                let start = ContinuousClock.now
                connection.closeSending()
                _ = try connection.readToEnd()
                return ContinuousClock.now - start
            }
            #expect(silentClosedAfter < .seconds(10), "\(silentClosedAfter)")
        }
    }

    @Test func requestsSentBeforeTheClientClosedItsSideAreAllAnsweredFirst() async throws {
        try await Self.serveAsTheServerDoes(idleTimeout: .seconds(30)) { platform, port in
            let (statuses, rest) = try await blocking {
                let connection = try RawConnection(port: port)
                // Two requests and the end of the stream in quick succession: the second waits
                // behind the first (pipelining), the end behind both.
                try connection.send(
                    "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"
                        + "GET /lifecycle/cards/none HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(TestPlatform.issuerKey)\r\n\r\n"
                )
                connection.closeSending()
                let statuses = try [connection.readResponse().status, connection.readResponse().status]
                return (statuses, try connection.readToEnd())
            }
            #expect(statuses == [200, 404])
            #expect(rest.isEmpty)
        }
    }

    @Test func connectionsOverTheLimitWaitUntilOneCloses() async throws {
        let platform = try await TestPlatform()
        let router = platform.router()
        let metrics = PlatformMetrics()
        try await TestTMP.runLive({ onRunning in
            TMPHTTPServer(router: router, host: "127.0.0.1", port: 0, logger: platform.logger, maximumConnections: 2, metrics: metrics, onServerRunning: onRunning)
        }) { client, port in
            // The test client's connection is one of the two.
            #expect(try await client.execute(uri: "/health", method: .get).status == .ok)
            let (secondStatus, waited, answeredAfterClose, openWhileWaiting) = try await blocking { () -> (Int, Bool, Int, String) in
                let second = try RawConnection(port: port)
                try second.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                let secondStatus = try second.readResponse().status
                // The third connects (the kernel queues it) but is not taken while two are open.
                let third = try RawConnection(port: port, receiveTimeout: .milliseconds(500))
                try third.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                let waited = (try? third.readResponse()) == nil
                let open = metrics.render().split(separator: "\n").first { $0.hasPrefix("pushprov_http_connections_open ") }.map(String.init) ?? "none"
                // Once one closes, it is taken and answered.
                second.shutDown()
                third.setReceiveTimeout(.seconds(10))
                return (secondStatus, waited, try third.readResponse().status, open)
            }
            #expect(secondStatus == 200)
            #expect(waited)
            #expect(answeredAfterClose == 200)
            #expect(openWhileWaiting == "pushprov_http_connections_open 2.0")
        }
    }

    @Test func gracefulShutdownLetsARequestBeingAnsweredFinish() async throws {
        let platform = try await TestPlatform()
        let (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
        // The in-app activation is with the token service when the shutdown begins.
        platform.connector.meanwhile.withValue { $0 = { command, _ in
            guard command == "activate" else { return }
            startedContinuation.yield()
            try await Task.sleep(for: .milliseconds(300))
        } }
        // runLive returns only once the server has stopped; the activation began before.
        let activation = try await TestTMP.runLive(router: platform.router(), logger: platform.logger) { _, port in
            let api = APIClient(port: port, platform: platform)
            _ = try await api.putCard("c1", user: "alice")
            let decision = try await api.provision("c1", user: "alice", token: "DNITHE1")
            guard decision.decision == .requireAdditionalAuthentication else { throw TestFailure("expected a yellow token, got \(decision.decision)") }
            let activation = Task {
                try await api.send(.post, "/issuer/push-provisioning/tokens/activations", as: .cardholder("alice"), json: TokenActivationRequest(tokenUniqueReference: "DNITHE1"))
            }
            var iterator = started.makeAsyncIterator()
            await iterator.next()
            return activation
        }
        let reply = try await activation.value
        #expect(reply.status == .ok)
        #expect(try reply.decode(TokenActivationResponse.self).issuerMobileAppAuthResponse == .approved)
        #expect(try await platform.store.token(reference: "DNITHE1")?.status == .active)
    }

    @Test func gracefulShutdownClosesIdleConnectionsAndReturns() async throws {
        let platform = try await TestPlatform()
        // runLive returns only once the server has shut down; an idle kept-alive connection
        // must not hold it open.
        let connection = try await TestTMP.runLive(router: platform.router(), logger: platform.logger) { _, port in
            try await blocking {
                let open = try RawConnection(port: port)
                try open.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                guard try open.readResponse().status == 200 else { throw TestFailure("health did not answer") }
                return open
            }
        }
        let rest = try await blocking { try connection.readToEnd() }
        #expect(rest.isEmpty, "the idle connection was closed by the shutdown")
    }

    /// A shutdown past its grace (`serve --shutdown-grace`): the request still being answered
    /// is cancelled (its handler sees the cancellation rather than running on unowned), its
    /// connection closes, and the server returns soon after the grace.
    @Test func aRequestStillRunningPastTheShutdownsGraceIsCancelledAndItsConnectionClosed() async throws {
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let (cancellations, cancellationContinuation) = AsyncStream.makeStream(of: Void.self)
        let router = Router()
        router.get("/slow") { _, _ -> Response in
            enteredContinuation.yield()
            do {
                try await Task.sleep(for: .seconds(120))
            } catch {
                cancellationContinuation.yield()
                throw error
            }
            return Response(status: .ok)
        }
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let server = TMPHTTPServer(router: router, host: "127.0.0.1", port: 0, logger: logger, onServerRunning: { port in
            portContinuation.yield(port)
            portContinuation.finish()
        })
        var configuration = ServiceGroupConfiguration(services: [server], gracefulShutdownSignals: [], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(1)
        let group = ServiceGroup(configuration: configuration)
        let running = Task { try await group.run() }
        var portIterator = ports.makeAsyncIterator()
        guard let port = await portIterator.next() else {
            running.cancel()
            throw TestFailure("the server did not start")
        }
        let connection = try await blocking {
            let connection = try RawConnection(port: port, receiveTimeout: .seconds(30))
            try connection.send("GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
            return connection
        }
        var enteredIterator = entered.makeAsyncIterator()
        await enteredIterator.next()
        let shutdownAsked = ContinuousClock.now
        await group.triggerGracefulShutdown()
        // The group may end with the cancellation it used past the grace; either way it ends.
        _ = await running.result
        let tookToStop = ContinuousClock.now - shutdownAsked
        let rest = try await blocking { try connection.readToEnd() }
        // The handler's task runs its `catch` on its own time (the server does not wait for
        // it): waited for, up to 20 s on a loaded machine; left running, it would sleep 120 s.
        let cancelled = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                var iterator = cancellations.makeAsyncIterator()
                return await iterator.next() != nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(20))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(cancelled, "the request's handler was cancelled, not left running")
        #expect(tookToStop < .seconds(20), "the server stopped soon after its grace, not after the request (\(tookToStop))")
        #expect(String(decoding: rest, as: UTF8.self).hasPrefix("HTTP/1.1 200") == false, "no answer claims the request was carried out")
    }

    /// A request whose client reset the connection is still carried out, and a graceful
    /// shutdown waits for it (within its grace) rather than return, and close the database,
    /// under it.
    @Test func gracefulShutdownWaitsForARequestWhoseConnectionWasReset() async throws {
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let finished = Locked(false)
        let router = Router()
        router.get("/slow") { _, _ -> Response in
            enteredContinuation.yield()
            var iterator = release.makeAsyncIterator()
            await iterator.next()
            finished.withValue { $0 = true }
            return Response(status: .ok)
        }
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let server = TMPHTTPServer(router: router, host: "127.0.0.1", port: 0, logger: logger, onServerRunning: { port in
            portContinuation.yield(port)
            portContinuation.finish()
        })
        var configuration = ServiceGroupConfiguration(services: [server], gracefulShutdownSignals: [], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(60)
        let group = ServiceGroup(configuration: configuration)
        let stopped = Locked(false)
        let running = Task {
            try? await group.run()
            stopped.withValue { $0 = true }
        }
        var portIterator = ports.makeAsyncIterator()
        guard let port = await portIterator.next() else {
            running.cancel()
            throw TestFailure("the server did not start")
        }
        let connection = try await blocking {
            let connection = try RawConnection(port: port)
            try connection.send("GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
            return connection
        }
        var enteredIterator = entered.makeAsyncIterator()
        await enteredIterator.next()
        connection.reset()
        await group.triggerGracefulShutdown()
        // Still running while the request is: given time to (wrongly) return.
        try await Task.sleep(for: .milliseconds(500))
        #expect(!stopped.current, "the server stopped while a request of a reset connection was still being answered")
        releaseContinuation.yield()
        await running.value
        #expect(stopped.current)
        #expect(finished.current, "the request was carried out")
    }

    /// A client that sends a request and resets the connection, again and again, frees its
    /// connection's place each time while the request runs on: past twice as many requests
    /// in flight as connections allowed, a request is refused 503 at once, its connection closed.
    @Test func requestsOfResetConnectionsCountAgainstTheConnectionLimit() async throws {
        let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
        let release = AsyncGate()
        let router = Router()
        router.get("/slow") { _, _ -> Response in
            enteredContinuation.yield()
            await release.wait()
            return Response(status: .ok)
        }
        router.get("/fast") { _, _ -> Response in Response(status: .ok) }
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let metrics = PlatformMetrics()
        let server = TMPHTTPServer(router: router, host: "127.0.0.1", port: 0, logger: logger, maximumConnections: 1, metrics: metrics, onServerRunning: { port in
            portContinuation.yield(port)
            portContinuation.finish()
        })
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [server], gracefulShutdownSignals: [], logger: logger))
        let running = Task { try await group.run() }
        defer { running.cancel() }
        var portIterator = ports.makeAsyncIterator()
        guard let port = await portIterator.next() else { throw TestFailure("the server did not start") }
        // Two requests (twice the one connection allowed) whose clients reset their connections.
        var enteredIterator = entered.makeAsyncIterator()
        for _ in 0..<2 {
            let reset = try await blocking {
                let connection = try RawConnection(port: port)
                try connection.send("GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
                return connection
            }
            await enteredIterator.next()
            reset.reset()
        }
        // The connections' places are free (they closed), their requests are not: refused.
        let (refused, rest) = try await blocking {
            let second = try RawConnection(port: port)
            try second.send("GET /fast HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let response = try second.readResponse()
            return (response, try second.readToEnd())
        }
        #expect(refused.status == 503)
        #expect(refused.headers["connection"] == "close" && refused.headers["retry-after"] == "1", "\(refused.headers)")
        #expect(String(decoding: refused.body, as: UTF8.self).contains(#""code":"server_busy""#))
        #expect(rest.isEmpty, "the refused request's connection closed")
        #expect(metrics.render().contains(#"reason="requests_over_limit"} 1"#), "\(metrics.render())")
        // Once the requests ended, requests are taken again.
        release.open()
        var answered = 0
        for _ in 0..<200 where answered != 200 {
            answered = try await blocking {
                let third = try RawConnection(port: port)
                try third.send("GET /fast HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                return try third.readResponse().status
            }
            if answered != 200 { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(answered == 200)
    }

    /// Requests pipelined back to back are held, parsed, until their turn: a connection may
    /// have up to 256 unanswered; one with more loses its connection.
    @Test func aClientPipeliningMoreThan256RequestsLosesItsConnection() async throws {
        let router = Router()
        router.get("/fast") { _, _ -> Response in Response(status: .ok) }
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let metrics = PlatformMetrics()
        let server = TMPHTTPServer(router: router, host: "127.0.0.1", port: 0, logger: logger, metrics: metrics, onServerRunning: { port in
            portContinuation.yield(port)
            portContinuation.finish()
        })
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [server], gracefulShutdownSignals: [], logger: logger))
        let running = Task { try await group.run() }
        defer { running.cancel() }
        var portIterator = ports.makeAsyncIterator()
        guard let port = await portIterator.next() else { throw TestFailure("the server did not start") }
        let request = "GET /fast HTTP/1.1\r\nHost: localhost\r\n\r\n"
        // 256 at once are all answered, in order, and the connection stays.
        let answered = try await blocking {
            let connection = try RawConnection(port: port)
            try connection.send(String(repeating: request, count: 256))
            return try (0..<256).map { _ in try connection.readResponse().status }
        }
        #expect(answered == Array(repeating: 200, count: 256))
        // 2,000 back to back, none read: the connection goes before they are all held.
        let (statuses, closed) = try await blocking {
            let connection = try RawConnection(port: port)
            _ = connection.sendUnlessClosed(String(repeating: request, count: 2_000))
            var statuses: [Int] = []
            while let response = try? connection.readResponse() { statuses.append(response.status) }
            return (statuses, (try? connection.readToEnd())?.isEmpty ?? true)
        }
        #expect(statuses.count < 2_000 && statuses.allSatisfy { $0 == 200 }, "\(statuses.count) answered")
        #expect(closed)
        #expect(metrics.render().contains(#"reason="pipelined_over_limit"} 1"#), "\(metrics.render())")
    }

    /// A request read once its connection's requests were cancelled (after the shutdown's
    /// grace) is not carried out at all: no answer could be sent.
    @Test func aRequestReadAfterItsConnectionsRequestsWereCancelledIsNotRun() async throws {
        let requests = ConnectionRequests()
        let (done, doneContinuation) = AsyncStream.makeStream(of: Void.self)
        let ran = Locked(0)
        requests.run {
            ran.withValue { $0 += 1 }
            doneContinuation.yield()
        }
        var iterator = done.makeAsyncIterator()
        await iterator.next()
        requests.cancelAll()
        requests.run { ran.withValue { $0 += 1 } }
        // Nothing was started: the table holds no task, and nothing runs later either.
        #expect(requests.running == 0)
        try await Task.sleep(for: .milliseconds(200))
        #expect(ran.current == 1)
    }
}

/// Runs blocking socket work on a thread of its own, never on Swift's cooperative pool (whose
/// few threads the server under test needs).
func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// A blocking HTTP/1.1 client on one TCP connection, for what a high-level client hides:
/// pipelining, raw bytes, the server closing. Call it through ``blocking(_:)``.
final class RawConnection: @unchecked Sendable {
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
    }

    private let socket: Int32
    private var buffer: [UInt8] = []

    /// Reads at most `bytes` at a time, waiting `pause` before each read (a slow client).
    var pacing: (bytes: Int, pause: Duration)?

    /// `receiveBuffer`: the socket's receive buffer (`SO_RCVBUF`), set before connecting, so a
    /// slow reader holds the server's bytes on the server's side.
    init(port: Int, receiveTimeout: Duration = .seconds(10), receiveBuffer: Int? = nil) throws {
        #if canImport(Glibc)
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        socket = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard socket >= 0 else { throw TestFailure("socket() failed") }
        setReceiveTimeout(receiveTimeout)
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestFailure("connect() failed: \(errno)") }
    }

    deinit { close(socket) }

    /// How long a read waits for bytes before it fails.
    func setReceiveTimeout(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Ends the connection from this side (the descriptor itself closes with the object).
    func shutDown() { shutdownSocket(Int32(SHUT_RDWR)) }

    /// Resets the connection (`SO_LINGER` 0, then the socket's close): the server sees an
    /// RST, as from a client or load balancer that gave up, and closes the channel at once.
    /// Nothing can be sent or read afterwards.
    func reset() {
        #if canImport(Glibc)
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        #else
        var linger = Darwin.linger(l_onoff: 1, l_linger: 0)
        #endif
        setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout.size(ofValue: linger)))
        shutdownSocket(Int32(SHUT_RD))
        _ = dup2(Self.nullDescriptor, socket)
    }

    /// A descriptor of /dev/null, put in the place of a reset socket's so `deinit` closes that.
    private static let nullDescriptor = open("/dev/null", O_RDONLY)

    /// Closes the sending side only: the server reads the end of the stream, and this side
    /// can still read.
    func closeSending() { shutdownSocket(Int32(SHUT_WR)) }

    private func shutdownSocket(_ how: Int32) {
        #if canImport(Glibc)
        _ = Glibc.shutdown(socket, how)
        #else
        _ = Darwin.shutdown(socket, how)
        #endif
    }

    func send(_ text: String) throws { try send(bytes: Array(text.utf8)) }

    /// Sends `text` without raising SIGPIPE; false once the connection is gone (reset).
    func sendUnlessClosed(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        #if canImport(Glibc)
        return bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
        #else
        return bytes.withUnsafeBytes { Darwin.send(socket, $0.baseAddress, $0.count, 0) } == bytes.count
        #endif
    }

    func send(bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
            guard written > 0 else { throw TestFailure("write() failed: \(errno)") }
            offset += written
        }
    }

    /// Reads more bytes; false at the end of the stream.
    private func fill() throws -> Bool {
        if let pacing { Thread.sleep(forTimeInterval: Double(pacing.pause.components.attoseconds) / 1e18 + Double(pacing.pause.components.seconds)) }
        var chunk = [UInt8](repeating: 0, count: pacing?.bytes ?? 65_536)
        let count = chunk.withUnsafeMutableBytes { read(socket, $0.baseAddress, $0.count) }
        guard count >= 0 else { throw TestFailure("read() failed or timed out: \(errno)") }
        buffer += chunk[0..<count]
        return count > 0
    }

    /// One response with a Content-Length body (what this server sends).
    /// The next response; `toHEAD`: one to a HEAD request, whose head announces a body it does
    /// not have.
    func readResponse(toHEAD: Bool = false) throws -> Response {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while headEnd == nil {
            headEnd = buffer.indices.dropLast(3).first { Array(buffer[$0..<$0 + 4]) == separator }
            if headEnd == nil, try !fill() { throw TestFailure("connection closed before a response head") }
        }
        let lines = String(decoding: buffer[0..<headEnd!], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = toHEAD ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        let bodyStart = headEnd! + 4
        while buffer.count < bodyStart + length {
            if try !fill() { throw TestFailure("connection closed inside a body") }
        }
        let body = Array(buffer[bodyStart..<bodyStart + length])
        buffer.removeFirst(bodyStart + length)
        return Response(status: status, headers: headers, body: body)
    }

    /// Everything until the server closes the connection.
    func readToEnd() throws -> [UInt8] {
        while try fill() {}
        defer { buffer = [] }
        return buffer
    }
}
