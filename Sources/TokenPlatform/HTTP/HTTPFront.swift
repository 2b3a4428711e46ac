import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import ProvisioningModels
import ServiceLifecycle
import UnixSignals

/// The TMP server's HTTP/1.1 front: Hummingbird's router answers every request, Hummingbird's
/// server binds the socket and shuts down gracefully, and between them a channel handler
/// reads each request whole and writes its response in one go.
///
/// Hummingbird's own connection loop streams request and response parts through a
/// `NIOAsyncChannel` and wraps every request in its application closure. For this server's
/// small requests that bookkeeping was measurable: about 0.01–0.02 ms of CPU per request
/// (see the README's HTTP front section).
///
/// What stays as Hummingbird does it: the pipeline (NIO's HTTP/1.1 codec with pipelining
/// assistance, so requests on one connection are answered in order), the connection state
/// handler (idle and quiescing connections are closed, a connection being answered is closed
/// after its response), `Date` and `Server` headers, a request id in each request's logger,
/// and a 500 for an error the router did not turn into a response.
///
/// Request bodies are held whole, up to a limit decided from each request's head
/// (`bodyLimit`, at most ``maximumBodySize``): before a byte of the body arrives, so a caller
/// without the right to a large upload cannot make the server hold one. Of a larger body only
/// the first `limit + 1` bytes are kept and the rest is discarded as it arrives; every route
/// refuses a body over its own limit with 413 (or the caller with 401 first), so a truncated
/// body is always refused and never read. A connection that sends nothing for ``idleTimeout``
/// while no request of it is being answered is closed, and so is one that has not sent a whole
/// request ``requestReadTimeout`` after its head (a body trickled in to hold the connection).
public struct TMPHTTPServer: Service {
    /// The largest body any route accepts: a card-art upload (see ``CardArtValidator``).
    public static let maximumBodySize = max(JSONCoding.maximumBodySize, CardArtValidator.maximumSize + 1)
    /// How long a connection may send nothing while none of its requests is being answered.
    public static let defaultIdleTimeout: Duration = .seconds(60)
    /// How long a request may take to arrive whole, from its head to its end (4 MB of card
    /// art at 1 Mbit/s takes about 32 s).
    public static let defaultRequestReadTimeout: Duration = .seconds(60)
    /// How long a request's head may take to arrive whole, from the read that brought its
    /// first bytes: a head trickled in (slowloris) is cut off then instead of at the idle
    /// timeout. Real clients send a head in one packet. A client silent until just before
    /// the idle timeout, or whose head's first bytes come in the read that ended its previous
    /// request, is bound by the idle timeout alone.
    public static let defaultRequestHeadTimeout: Duration = .seconds(10)
    /// The most a request's head may hold: 100 header fields, 16 KiB in one field, 32 KiB in
    /// all (NIO's defaults, 65,534 fields and 80 KiB, let one request cost tens of milliseconds
    /// of parsing). A head over them is answered 400 and its connection closed. The largest
    /// header a client needs is `Authorization` (at most 8 KiB).
    static let headerLimits: NIOHTTPDecoderLimitConfiguration = {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldCount = 100
        limits.maxHeaderFieldSize = 16 * 1024
        limits.maxHeaderListSize = 32 * 1024
        return limits
    }()

    /// How much of a request's body to hold, from its head.
    public typealias BodyLimit = @Sendable (HTTPRequest) -> Int

    let responder: RouterResponder<BasicRequestContext>
    let host: String
    let port: Int
    let serverName: String
    let logger: Logger
    let bodyLimit: BodyLimit
    let idleTimeout: Duration
    let requestReadTimeout: Duration
    let requestHeadTimeout: Duration
    let maximumConnections: Int?
    let metrics: PlatformMetrics?
    let onServerRunning: @Sendable (Int) async -> Void

    /// A server for `router` on `host`:`port` (0 picks a free port, reported to
    /// `onServerRunning`), holding at most `bodyLimit(head)` bytes of each request's body
    /// (capped at ``maximumBodySize``) and at most `maximumConnections` connections open
    /// (``ConnectionLimit``; nil: no limit), counted into `metrics` when given.
    public init(
        router: Router<BasicRequestContext>,
        host: String,
        port: Int,
        serverName: String = "pushprov",
        logger: Logger,
        bodyLimit: @escaping BodyLimit = { _ in TMPHTTPServer.maximumBodySize },
        idleTimeout: Duration = TMPHTTPServer.defaultIdleTimeout,
        requestReadTimeout: Duration = TMPHTTPServer.defaultRequestReadTimeout,
        requestHeadTimeout: Duration = TMPHTTPServer.defaultRequestHeadTimeout,
        maximumConnections: Int? = nil,
        metrics: PlatformMetrics? = nil,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.responder = router.buildResponder()
        self.host = host
        self.port = port
        self.serverName = serverName
        self.logger = logger
        self.bodyLimit = { head in min(bodyLimit(head), TMPHTTPServer.maximumBodySize) }
        self.idleTimeout = idleTimeout
        self.requestReadTimeout = requestReadTimeout
        self.requestHeadTimeout = requestHeadTimeout
        self.maximumConnections = maximumConnections
        self.metrics = metrics
        self.onServerRunning = onServerRunning
    }

    /// Serves until the enclosing service group shuts down gracefully (or the task is
    /// cancelled): the listening socket closes, idle connections close, and requests being
    /// answered finish first.
    public func run() async throws {
        let front = HTTP1Front(
            respond: RequestResponder(responder: responder, serverName: serverName, logger: logger),
            bodyLimit: bodyLimit,
            idleTimeout: idleTimeout,
            requestReadTimeout: requestReadTimeout,
            requestHeadTimeout: requestHeadTimeout,
            logger: logger,
            metrics: metrics,
            // Twice the connections: a connection's next request may be read before its last
            // one is counted out, and the cap may let a few more connections in than it holds.
            inFlight: RequestsInFlight(limit: maximumConnections.map { $0 * 2 })
        )
        let server = front.server(
            configuration: .init(
                address: .hostname(host, port: port),
                serverName: serverName,
                availableConnectionsDelegate: maximumConnections.map { ConnectionCap(limit: $0, logger: logger, metrics: metrics) }
            ),
            onServerRunning: { [onServerRunning, port] channel in await onServerRunning(channel.localAddress?.port ?? port) },
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            logger: logger
        )
        try await server.run()
    }

    /// Runs the server, and `services` beside it, in a service group that shuts them down
    /// gracefully on SIGTERM and SIGINT.
    ///
    /// - Parameter shutdownGrace: The longest a graceful shutdown waits for requests and
    ///   connections to finish (a slow client taking a large answer, a token service command
    ///   under way) before it cancels them; nil: as long as they take.
    public func runService(alongside services: [any Service] = [], gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint], shutdownGrace: Duration? = nil) async throws {
        var configuration = ServiceGroupConfiguration(services: [self] + services, gracefulShutdownSignals: gracefulShutdownSignals, logger: logger)
        configuration.maximumGracefulShutdownDuration = shutdownGrace
        let group = ServiceGroup(configuration: configuration)
        try await group.run()
    }
}

/// Turns one whole request into a response through the router.
struct RequestResponder: Sendable {
    let responder: RouterResponder<BasicRequestContext>
    let serverName: String
    let logger: Logger
    let dates = HTTPDateCache()

    func respond(to request: Request, channel: any Channel) async -> Response {
        var logger = self.logger
        let id = RequestID()
        logger[metadataKey: "hb.request.id"] = .stringConvertible(id)
        let context = BasicRequestContext(source: .init(channel: channel, logger: logger))
        var response: Response
        do {
            // The services' lines carry the id too (``RequestLogContext``).
            response = try await RequestLogContext.$requestID.withValue(id) {
                try await responder.respond(to: request, context: context)
            }
        } catch {
            logger.debug("unhandled error", metadata: ["error.type": "\(type(of: error))"])
            response = Response(status: .internalServerError)
        }
        response.headers[.date] = dates.current()
        response.headers[.server] = serverName
        return response
    }
}

/// The child channel: pipeline set-up, and a connection lives until its channel closes.
struct HTTP1Front: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
        /// The requests the connection is answering.
        let requests: ConnectionRequests
    }

    let respond: RequestResponder
    let bodyLimit: TMPHTTPServer.BodyLimit
    let idleTimeout: Duration
    let requestReadTimeout: Duration
    var requestHeadTimeout: Duration = TMPHTTPServer.defaultRequestHeadTimeout
    let logger: Logger
    let metrics: PlatformMetrics?
    /// The requests being answered on every connection, open or closed.
    var inFlight = RequestsInFlight(limit: nil)

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            // Lets the response being sent finish before the connection closes, as long as the
            // client keeps taking it (the idle timeout would otherwise cut a large answer off),
            // for at most four read timeouts after the close is asked for: 4 MB of art then
            // needs about 17 kB/s (a close right after the answer, `Connection: close`).
            try pipeline.addHandler(DrainingClose(patience: TimeAmount(requestReadTimeout), limit: TimeAmount(requestReadTimeout) * 4))
            // Stops reading the socket while responses wait to be sent (a client that sends
            // requests and reads no answers), so what it sends stays in the kernel's buffers.
            try pipeline.addHandler(BackPressureHandler())
            // Pipelining assistance holds a connection's next request until the current
            // response is written; error handling answers a request NIO cannot parse with 400
            // and closes the connection. So is a head over the header limits.
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: true, withErrorHandling: true, withOutboundHeaderValidation: false,
                withEncoderConfiguration: HTTPResponseEncoder.Configuration(), withDecoderLimitConfiguration: TMPHTTPServer.headerLimits
            )
            // Between the decoder and the pipelining assistance, which holds every request
            // read ahead of its turn: a connection may have only so many unanswered.
            try pipeline.addHandler(PipelineDepthLimit(metrics: metrics), position: .before(try pipeline.handler(type: HTTPServerPipelineHandler.self)))
            try pipeline.addHandler(CloseMarker(metrics: metrics))
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: idleTimeout, logger: logger))
            let requests = ConnectionRequests(inFlight: inFlight)
            try pipeline.addHandler(WholeRequestHandler(respond: respond, bodyLimit: bodyLimit, readTimeout: requestReadTimeout, headTimeout: requestHeadTimeout, metrics: metrics, requests: requests))
            return Value(channel: channel, requests: requests)
        }
    }

    func handle(value: Value, logger: Logger) async {
        // The handler answers requests as they complete; the server keeps track of the
        // connection until it closes and its requests have ended, so graceful shutdown waits
        // for both: a request whose client reset the connection is still carried out (a
        // card's block with its token service commands), and the database must not close
        // under it. Cancelled (a shutdown past its grace), the connection goes at once: its
        // requests are cancelled, not waited for, and the close does not wait for a slow reader.
        await withTaskCancellationHandler {
            try? await value.channel.closeFuture.get()
            await value.requests.ended()
        } onCancel: {
            value.requests.cancelAll()
            value.channel.triggerUserOutboundEvent(DrainingClose.Abandon(), promise: nil)
            value.channel.close(promise: nil)
        }
    }
}

/// The requests one connection is answering, each on a task of its own, so that a shutdown
/// past its grace can cancel them (a token service command under way, a database call
/// waiting): they end, and their connection with them.
final class ConnectionRequests: Sendable {
    private struct State {
        var tasks: [Int: Task<Void, Never>] = [:]
        var next = 0
        var cancelled = false
        /// Waiting in ``ended()``.
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = NIOLockedValueBox(State())
    private let inFlight: RequestsInFlight

    init(inFlight: RequestsInFlight = RequestsInFlight(limit: nil)) {
        self.inFlight = inFlight
    }

    /// Whether ``run(_:)`` started the request.
    enum Start { case started, cancelled, overLimit }

    /// Runs `operation` on a task of its own; not at all once ``cancelAll()`` came (a request
    /// read after the shutdown's grace is not carried out: no answer could be sent), nor when
    /// the server already answers as many requests as it may hold connections (``RequestsInFlight``).
    @discardableResult
    func run(_ operation: @escaping @Sendable () async -> Void) -> Start {
        state.withLockedValue { state in
            guard !state.cancelled else { return .cancelled }
            guard inFlight.enter() else { return .overLimit }
            let id = state.next
            state.next += 1
            let task = Task {
                await operation()
                self.finished(id)
            }
            state.tasks[id] = task
            return .started
        }
    }

    /// Cancels the tasks running; none is started later, and ``ended()`` waits no more.
    func cancelAll() {
        let (tasks, waiting) = state.withLockedValue { state in
            state.cancelled = true
            defer { (state.tasks, state.waiting) = ([:], []) }
            return (Array(state.tasks.values), state.waiting)
        }
        for task in tasks { task.cancel() }
        for waiter in waiting { waiter.resume() }
    }

    /// Returns once no request is being answered, or at ``cancelAll()``.
    func ended() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { state in
                guard !state.tasks.isEmpty, !state.cancelled else { return true }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// How many requests are being answered.
    var running: Int { state.withLockedValue { $0.tasks.count } }

    private func finished(_ id: Int) {
        inFlight.leave()
        let waiting = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.tasks.removeValue(forKey: id)
            guard state.tasks.isEmpty else { return [] }
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiter in waiting { waiter.resume() }
    }
}

/// The requests being answered across the server, open connections' and closed ones' alike,
/// within a limit.
///
/// A connection answers one request at a time (the next waits for the answer), so the
/// connection limit bounds the requests in flight, except for requests whose client closed or
/// reset the connection: they are still carried out, and a client that sends a request and
/// resets, again and again, would otherwise have any number running at once (each holding
/// memory, a database connection's turn, a token service command's). Past the limit (twice
/// the connection limit) a request is answered `503` at once, its connection closed.
final class RequestsInFlight: Sendable {
    /// The most requests answered at once (nil: no limit).
    let limit: Int?
    private let count = NIOLockedValueBox(0)

    init(limit: Int?) {
        self.limit = limit
    }

    /// Counts a request in, unless the limit is reached.
    func enter() -> Bool {
        count.withLockedValue { count in
            if let limit, count >= limit { return false }
            count += 1
            return true
        }
    }

    /// Counts a request out.
    func leave() {
        count.withLockedValue { $0 -= 1 }
    }

    /// How many requests are being answered.
    var current: Int { count.withLockedValue { $0 } }
}

/// Holds back closing a connection while a response written to it is still being sent and the
/// client keeps taking it.
///
/// Hummingbird's idle timer starts when a response's end is written, not when it has left, so
/// a large answer (4 MB of card art) to a client reading slowly was cut off mid-body once the
/// idle timeout passed, and logged as answered. A close asked for while bytes still wait in
/// the channel waits, checking once a second: it goes ahead once they have left, or once
/// `patience` has passed without the client taking any (a client that reads nothing cannot
/// hold the connection for ever), or once `limit` has passed since the close was asked for
/// (nor can one that takes a few bytes now and then: a graceful shutdown waits for every
/// connection to close), or at once after ``Abandon``.
final class DrainingClose: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData

    /// An outbound user event: the next close is not to wait (the client has already had a
    /// read timeout to take what waits for it).
    struct Abandon: Sendable {}

    private let patience: TimeAmount
    private let limit: TimeAmount
    private var waiting: [EventLoopPromise<Void>?] = []
    private var tick: Scheduled<Void>?
    private var abandoned = false
    /// When the close being held back was asked for.
    private var askedAt = NIODeadline.now()

    /// - Parameters:
    ///   - patience: How long the client may take nothing before the connection closes.
    ///   - limit: How long after the close is asked for it goes ahead in any case (`patience`
    ///     when nil).
    init(patience: TimeAmount, limit: TimeAmount? = nil) {
        self.patience = patience
        self.limit = limit ?? patience
    }

    private static func pending(_ channel: any Channel) -> Int {
        (try? channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, !abandoned, context.channel.isActive else {
            context.close(mode: mode, promise: promise)
            return
        }
        if tick != nil {
            waiting.append(promise)
            return
        }
        let pending = Self.pending(context.channel)
        guard pending > 0 else {
            context.close(mode: mode, promise: promise)
            return
        }
        waiting = [promise]
        askedAt = .now()
        // The connection is closing: a request the client sends while the last answer drains
        // must not be carried out, since the close would come before its answer.
        context.fireUserInboundEventTriggered(Closing())
        wait(context: context, last: pending, since: .now())
    }

    /// An inbound user event: a close is held back while the last answer drains; no request
    /// read from now on is to be carried out.
    struct Closing: Sendable {}

    private func wait(context: ChannelHandlerContext, last: Int, since progress: NIODeadline) {
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        tick = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: .seconds(1)) {
            let (handler, context) = bound.value
            let now = Self.pending(context.channel)
            let progressed = now < last
            if now == 0 || !context.channel.isActive || handler.abandoned || (!progressed && .now() - progress >= handler.patience)
                || .now() - handler.askedAt >= handler.limit
            {
                handler.closeNow(context: context)
            } else {
                handler.wait(context: context, last: now, since: progressed ? .now() : progress)
            }
        }
    }

    private func closeNow(context: ChannelHandlerContext) {
        tick = nil
        let promises = waiting
        waiting = []
        let closed = context.eventLoop.makePromise(of: Void.self)
        for promise in promises { if let promise { closed.futureResult.cascade(to: promise) } }
        context.close(mode: .all, promise: closed)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is Abandon else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        abandoned = true
        promise?.succeed()
        if tick != nil {
            tick?.cancel()
            closeNow(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        tick?.cancel()
        tick = nil
        // A close held back when the channel went another way (a reset): its promises are
        // kept with the channel's own close, not dropped unfulfilled.
        let promises = waiting
        waiting = []
        for promise in promises { if let promise { context.channel.closeFuture.cascade(to: promise) } }
    }
}

/// Closes a connection that has more than ``limit`` requests unanswered.
///
/// Pipelining assistance answers a connection's requests one at a time, and holds those read
/// ahead of their turn in memory, parsed; reading stops while answers wait to be sent, but one
/// read takes up to 256 KB, some ten thousand minimal requests (a few hundred bytes of memory
/// each once parsed) from a client that sends them back to back and reads nothing. Clients
/// that pipeline keep a few requests in flight; one with more than ``limit`` unanswered loses
/// its connection, counted as `pipelined_over_limit` (so a connection holds at most some
/// 100 KB of requests waiting their turn).
final class PipelineDepthLimit: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The most requests a connection may have unanswered (read, and not answered to their end).
    static let limit = 256

    private let metrics: PlatformMetrics?
    private var unanswered = 0
    private var closed = false

    init(metrics: PlatformMetrics?) {
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closed else { return }
        if case .head = unwrapInboundIn(data) {
            unanswered += 1
            if unanswered > Self.limit {
                closed = true
                metrics?.recordConnectionFailure(.pipelinedOverLimit)
                context.close(promise: nil)
                return
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // An interim response (`100 Continue`) is a head without an end: only the end counts.
        if case .end = unwrapOutboundIn(data) { unanswered = max(0, unanswered - 1) }
        context.write(data, promise: promise)
    }
}

/// Marks a request whose connection is not to be kept alive (HTTP/1.0 without `keep-alive`)
/// with `Connection: close`: the HTTP version does not survive the conversion to HTTP types,
/// the header does, and ``WholeRequestHandler`` closes the connection after such a request.
///
/// So is a request asking to upgrade the protocol (`Upgrade`) or to tunnel (`CONNECT`): this
/// server does neither, and NIO's parser reads nothing after such a request, so whatever the
/// client sent next would pile up unparsed until the idle timeout.
///
/// It also refuses an HTTP/1.1 request without exactly one `Host` field line, and any request
/// whose `Host` is not a valid host and port (RFC 9112 §3.2: a server must answer both `400`),
/// and one whose body has a transfer coding other than `chunked`
/// (`501`, §6.1): the answer is NIO's kind for a request it cannot parse, empty, after which
/// the connection closes, and the request goes no further.
final class CloseMarker: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Where a refused request is counted.
    private let metrics: PlatformMetrics?
    /// A request was refused: nothing more of the connection is read on.
    private var refused = false

    init(metrics: PlatformMetrics? = nil) {
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        if case .head(let head) = unwrapInboundIn(data) {
            let hosts = head.headers["host"]
            if head.version.major == 1, head.version.minor >= 1, hosts.count != 1 {
                refuse(.badRequest, context: context)
                return
            }
            if hosts.contains(where: { !Self.isValidHost($0) }) {
                refuse(.badRequest, context: context)
                return
            }
            // A body coded in a way this server does not decode (gzip, say) would be read as
            // it came: refused instead (RFC 9112 §6.1). `chunked` is the only coding NIO undoes.
            if head.headers[canonicalForm: "transfer-encoding"].contains(where: { $0.lowercased() != "chunked" }) {
                refuse(.notImplemented, context: context)
                return
            }
        }
        if case .head(var head) = unwrapInboundIn(data), head.version == .http1_0, head.headers.contains(name: "expect") {
            // HTTP/1.0 has no `100 Continue`: the expectation is ignored (RFC 9110 §10.1.1).
            head.headers.remove(name: "expect")
            channelRead(context: context, data: wrapInboundOut(.head(head)))
            return
        }
        // An HTTP/1.0 message with a transfer coding may be framed otherwise by an HTTP/1.0 hop
        // before this server: answered, then the connection is closed (RFC 9112 §6.1).
        if case .head(var head) = unwrapInboundIn(data),
            !head.isKeepAlive || head.method == .CONNECT || head.headers.contains(name: "upgrade")
                || (head.version == .http1_0 && head.headers.contains(name: "transfer-encoding")),
            !head.headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "close" })
        {
            head.headers.replaceOrAdd(name: "Connection", value: "close")
            context.fireChannelRead(wrapInboundOut(.head(head)))
            return
        }
        context.fireChannelRead(data)
    }

    /// Whether `value` is a valid `Host` field value (RFC 9110 §7.2, RFC 3986 §3.2.2): a host —
    /// a name of letters, digits, `-._~`, sub-delimiters and `%XX`, or an IPv6 (or future)
    /// literal in brackets — then optionally `:` and a port of digits. An empty value is valid
    /// (a target without an authority). Nothing is looked up: any name may be this server's.
    static func isValidHost(_ value: String) -> Bool {
        var rest = Substring(value).drop { $0 == " " || $0 == "\t" }
        while rest.last == " " || rest.last == "\t" { rest = rest.dropLast() }
        if rest.first == "[" {
            guard let close = rest.firstIndex(of: "]") else { return false }
            let literal = rest[rest.index(after: rest.startIndex)..<close]
            guard !literal.isEmpty, literal.utf8.allSatisfy(isLiteralByte) else { return false }
            rest = rest[rest.index(after: close)...]
        } else {
            let name = rest.prefix { $0 != ":" }
            guard isRegisteredName(name.utf8) else { return false }
            rest = rest[name.endIndex...]
        }
        guard let colon = rest.first else { return true }
        return colon == ":" && rest.dropFirst().utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    /// Letters, digits, `-._~`, sub-delimiters, and `%` followed by two hexadecimal digits.
    private static func isRegisteredName(_ bytes: Substring.UTF8View) -> Bool {
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                let first = bytes.index(after: index)
                guard first != bytes.endIndex, isHexDigit(bytes[first]) else { return false }
                let second = bytes.index(after: first)
                guard second != bytes.endIndex, isHexDigit(bytes[second]) else { return false }
                index = bytes.index(after: second)
                continue
            }
            guard isAlphanumeric(byte) || "-._~!$&'()*+,;=".utf8.contains(byte) else { return false }
            index = bytes.index(after: index)
        }
        return true
    }

    /// What an IPv6 address or an `IPvFuture` literal is made of (RFC 3986 §3.2.2).
    private static func isLiteralByte(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || ":.-._~!$&'()*+,;=".utf8.contains(byte)
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
    }

    /// Answers the request being read with an empty `status` and closes the connection; nothing
    /// of it, or after it, goes further.
    private func refuse(_ status: HTTPResponseStatus, context: ChannelHandlerContext) {
        refused = true
        metrics?.recordConnectionFailure(.unparsableRequest)
        let fields = HTTPHeaders([("Connection", "close"), ("Content-Length", "0")])
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: fields))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// Reads each request whole, answers it through the router on a task of its own, and writes
/// the response on the connection's event loop.
final class WholeRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    private let respond: RequestResponder
    /// Where the requests' tasks are kept, for a shutdown past its grace to cancel them.
    private let requests: ConnectionRequests
    private let bodyLimit: TMPHTTPServer.BodyLimit
    private let readTimeout: Duration
    private let headTimeout: Duration
    private var head: HTTPRequest?
    private var limit = 0
    private var body = ByteBuffer()
    /// Bytes of the request's body received so far, kept or not.
    private var received = 0
    /// Closes the connection if the request being read is not whole by then.
    private var readDeadline: Scheduled<Void>?
    /// Closes the connection if the head whose first bytes have come is not whole by then.
    private var headDeadline: Scheduled<Void>?
    /// The read being handled brought a request's end: what else it brought is the next
    /// request's beginning, if anything, and its head's time starts at the next read.
    private var endedInThisRead = false
    /// A request of this connection is with the router (NIO's pipelining assistance holds the
    /// next one until its response is written).
    private var answering = false
    /// The client has closed its side: nothing more will arrive.
    private var inputClosed = false
    /// The end of the last response written, done once it has been handed to the socket.
    private var lastResponseWritten: EventLoopFuture<Void>?
    /// A request read whole while earlier responses still waited to be sent (the channel not
    /// writable): it is answered once they are, so a client that pipelines requests and reads
    /// no answers makes the server hold at most about one response beyond the write buffer's
    /// high-water mark, not one per request it sent. (NIO's pipelining assistance hands over
    /// the next request as soon as the previous response is written, not when it is sent.)
    private var waiting: Request?
    /// The request being read was answered before its body was in (``answerEarly(_:body:context:)``:
    /// a body announced over the limit, or more of one over its limit than is read through):
    /// its remaining parts are discarded, and the connection closes after the answer.
    private var answeredEarly = false
    /// A response after which the connection closes has been written (or is being written):
    /// whatever the client sent after that request is not carried out (RFC 9112 §9.6).
    private var closing = false
    /// Closes the connection if a request held back for a client that reads no answers
    /// (`waiting`) is still held back then: such a client cannot keep the connection, a place
    /// under the connection limit, and a graceful shutdown waiting, for ever.
    private var stallDeadline: Scheduled<Void>?

    /// Where connections closed for a failure of the client's are counted.
    private let metrics: PlatformMetrics?

    init(respond: RequestResponder, bodyLimit: @escaping TMPHTTPServer.BodyLimit, readTimeout: Duration, headTimeout: Duration = TMPHTTPServer.defaultRequestHeadTimeout, metrics: PlatformMetrics? = nil, requests: ConnectionRequests = ConnectionRequests()) {
        self.respond = respond
        self.requests = requests
        self.bodyLimit = bodyLimit
        self.readTimeout = readTimeout
        self.headTimeout = headTimeout
        self.metrics = metrics
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        readDeadline?.cancel()
        readDeadline = nil
        headDeadline?.cancel()
        headDeadline = nil
        stallDeadline?.cancel()
        stallDeadline = nil
    }

    /// After a read that left a request incomplete, its remaining parts get until the deadline.
    /// (A request that arrives whole in one read, as nearly all do, costs no timer.)
    ///
    /// A read that brought bytes but no head (the head's first part) starts the head's time;
    /// its head must be whole within ``TMPHTTPServer/defaultRequestHeadTimeout``. Not while
    /// a request is being answered: NIO's pipelining assistance holds what comes meanwhile.
    func channelReadComplete(context: ChannelHandlerContext) {
        if head != nil, readDeadline == nil {
            let channel = context.channel
            let metrics = metrics
            readDeadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: TimeAmount(readTimeout)) {
                metrics?.recordConnectionFailure(.requestReadTimeout)
                channel.close(promise: nil)
            }
        } else if head == nil, headDeadline == nil, !endedInThisRead, !answering, !closing, !answeredEarly, !inputClosed {
            let channel = context.channel
            let metrics = metrics
            headDeadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: TimeAmount(headTimeout)) {
                metrics?.recordConnectionFailure(.requestHeadTimeout)
                channel.close(promise: nil)
            }
        }
        endedInThisRead = false
        context.fireChannelReadComplete()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            headDeadline?.cancel()
            headDeadline = nil
            // Nothing after an early answer or a response that closes the connection is
            // carried out; the request being read was the last.
            guard !closing, !answeredEarly else { return }
            self.head = head
            limit = bodyLimit(head)
            body = context.channel.allocator.buffer(capacity: 0)
            received = 0
            let announced = head.headerFields[.contentLength].flatMap { Int($0) }
            // The client waits for this before sending the body (curl does for large
            // uploads); the answer comes once the whole body is in. A body announced over the
            // limit is not asked for: the request is answered at once from its head (the
            // route refuses it, 413, or its caller, 401, without reading a body), and the
            // connection closes after the answer (RFC 9110 §10.1.1). So is one whose limit is
            // nothing, whatever its length (chunked, say): its answer cannot depend on a body.
            if head.headerFields[.expect]?.lowercased() == "100-continue" {
                if limit > 0, announced.map({ $0 <= limit }) ?? true {
                    context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
                } else {
                    answerEarly(head, body: ByteBuffer(), context: context)
                }
            } else if let announced, announced > max(limit, Self.readThrough) {
                // Announced larger than the route may take, and than is worth reading through:
                // answered from its head too, while the body is on its way.
                answerEarly(head, body: ByteBuffer(), context: context)
            }
        case .body(var part):
            guard !closing, !answeredEarly else { return }
            received += part.readableBytes
            // Keep one byte over the limit, so the route sees a body too large and refuses it.
            let room = limit + 1 - body.readableBytes
            if room > 0 {
                if part.readableBytes > room { part = part.getSlice(at: part.readerIndex, length: room)! }
                // A body that comes in one part (most do) is kept as it came, without a copy.
                if body.readableBytes == 0 { body = part } else { body.writeBuffer(&part) }
            }
            // Past the limit and what is worth reading through (chunked, so no length said so
            // at the head): answered now, on what was kept, rather than once the client has
            // sent all of it.
            if received > max(limit, Self.readThrough), let head {
                let kept = body
                body = ByteBuffer()
                answerEarly(head, body: kept, context: context)
            }
        case .end:
            readDeadline?.cancel()
            readDeadline = nil
            endedInThisRead = true
            // The rest of a request answered early, or of one sent after the last: discarded.
            guard !closing, !answeredEarly else { return }
            // An end without a head follows only a head that could not be converted, whose
            // error closes the connection; should one come otherwise, nothing could answer it.
            guard let head else {
                context.close(promise: nil)
                return
            }
            self.head = nil
            let request = Request(head: head, body: RequestBody(buffer: body))
            body = ByteBuffer()
            if context.channel.isWritable {
                answer(request, context: context)
            } else {
                // Taken, not answered yet: a half-close meanwhile waits for its response.
                answering = true
                waiting = request
                armStallDeadline(context: context)
            }
        }
    }

    /// Closes the connection after the read timeout unless the client has taken some of the
    /// responses waiting for it by then (it is reading, if slowly: the timer starts again).
    private func armStallDeadline(context: ChannelHandlerContext) {
        let channel = context.channel
        let pending = (try? channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        stallDeadline = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: TimeAmount(readTimeout)) {
            let (handler, context) = bound.value
            guard handler.waiting != nil else { return }
            let now = (try? channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
            if now < pending {
                handler.armStallDeadline(context: context)
            } else {
                // The client has had its read timeout to take what waits: no further wait.
                handler.metrics?.recordConnectionFailure(.stalledReader)
                channel.triggerUserOutboundEvent(DrainingClose.Abandon(), promise: nil)
                channel.close(promise: nil)
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let request = waiting {
            waiting = nil
            stallDeadline?.cancel()
            stallDeadline = nil
            answer(request, context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    /// The client closed its side of the connection (Hummingbird's server allows half-closed
    /// connections): a request being answered still gets its response, after which the
    /// connection closes; otherwise it closes now (a request half read can never be whole).
    /// Without this, a connection the client has closed would stay open until the idle
    /// timeout, holding a file and a place under the connection limit.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is DrainingClose.Closing {
            // As after `Connection: close`: what the client sends now is not carried out.
            closing = true
            return
        }
        guard case .inputClosed = event as? ChannelEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        inputClosed = true
        // Nothing more will come: no head to wait for (NIO reports the end of input after the
        // read completion that may have started the head's time).
        headDeadline?.cancel()
        headDeadline = nil
        // A request being answered closes the connection once its response is written.
        guard !answering else { return }
        // NIO's pipelining assistance may deliver a half-close it held back from inside the
        // write of the last response's end, before that end is flushed: the close waits for
        // the current call to finish, and then for the last response to be written.
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let channel = context.channel
        context.eventLoop.execute {
            let handler = bound.value
            guard !handler.answering else { return }
            if let written = handler.lastResponseWritten {
                written.whenComplete { _ in channel.close(promise: nil) }
            } else {
                channel.close(promise: nil)
            }
        }
    }

    /// A request NIO could not parse has had its 400 (from NIO's protocol error handler); any
    /// error ends the connection. One of a request the client sent (unparsable, over the
    /// header limits, or a head that is no HTTP request) is counted; one of the connection
    /// itself (a reset) is not.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // (A connection that ends inside a request, closed by either side, is reported as an
        // `invalidEOFState` parse error: not counted as unparsable. One connection's parse
        // error is counted once.)
        let unparsable = (error as? HTTPParserError).map { $0 != .invalidEOFState } ?? (error is HTTP1TypeConversionError)
        if unparsable, !unparsableCounted {
            unparsableCounted = true
            metrics?.recordConnectionFailure(.unparsableRequest)
        }
        context.close(promise: nil)
    }

    /// The connection's unparsable request has been counted.
    private var unparsableCounted = false

    /// The most of a body over its limit that is read through to its end, discarded, before the
    /// request is answered: below it the connection stays open for the next request (the
    /// request is answered once its body is in); above it the request is answered at once, and
    /// the connection closes after the answer, so a client sending megabytes to a route that
    /// refuses them learns it without sending them all.
    static let readThrough = JSONCoding.maximumBodySize

    /// Answers the request being read, from `head` and what was kept of its body, before the
    /// rest of the body arrives: the rest is discarded, and the connection closes after the
    /// answer (``write(head:buffers:failed:closeAfter:early:headRequest:context:)``).
    private func answerEarly(_ head: HTTPRequest, body: ByteBuffer, context: ChannelHandlerContext) {
        self.head = nil
        answeredEarly = true
        // Answered: the rest of the body is discarded under the answer's own read timeout
        // (``write(head:buffers:failed:closeAfter:early:headRequest:context:)``), not counted
        // as a request that failed to arrive.
        readDeadline?.cancel()
        readDeadline = nil
        var early = head
        early.headerFields[.connection] = "close"
        answer(Request(head: early, body: RequestBody(buffer: body)), early: true, context: context)
    }

    /// Answers `request` on a task of its own; `early`: from its head alone, its body unread.
    private func answer(_ request: Request, early: Bool = false, context: ChannelHandlerContext) {
        answering = true
        // HEAD is answered as GET (the router has a HEAD route for each GET route), without the body.
        let headRequest = request.method == .head
        let closeAfter = request.headers[values: .connection].contains { value in
            value.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "close" }
        }
        let channel = context.channel
        let loop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
        let respond = self.respond
        let start = requests.run {
            let response = await respond.respond(to: request, channel: channel)
            let collected = BufferedBody()
            let failed: Bool
            do {
                try await response.body.write(collected)
                failed = false
            } catch {
                failed = true
            }
            let head = response.head
            let buffers = collected.buffers
            loop.execute {
                let (handler, context) = bound.value
                handler.write(head: head, buffers: buffers, failed: failed, closeAfter: closeAfter, early: early, headRequest: headRequest, context: context)
            }
        }
        if start == .overLimit {
            // As many requests as connections are being answered (clients resetting their
            // connections under them): refused at once, and the connection closes.
            metrics?.recordConnectionFailure(.requestsOverLimit)
            let body = ByteBuffer(string: Self.overLimitBody)
            var head = HTTPResponse(status: .serviceUnavailable)
            head.headerFields[.contentType] = "application/json"
            head.headerFields[.contentLength] = String(body.readableBytes)
            head.headerFields[.retryAfter] = "1"
            head.headerFields[.date] = respond.dates.current()
            head.headerFields[.server] = respond.serverName
            write(head: head, buffers: [body], failed: false, closeAfter: true, early: early, headRequest: headRequest, context: context)
        }
    }

    /// The answer to a request over ``RequestsInFlight``'s limit.
    static let overLimitBody = #"{"error":{"code":"server_busy","message":"the server is answering as many requests as it takes at once; try again in a moment"}}"#

    private func write(head: HTTPResponse, buffers: [ByteBuffer], failed: Bool, closeAfter: Bool, early: Bool, headRequest: Bool, context: ChannelHandlerContext) {
        answering = false
        guard context.channel.isActive else { return }
        guard !failed else {
            // The body could not be produced after its head was decided: nothing sound can be
            // sent, so the connection goes.
            context.close(promise: nil)
            return
        }
        var head = head
        // A response after which the connection closes says so (RFC 9112 §9.6), and nothing
        // the client sent after its request is carried out.
        // (Not for a client that has closed its side: requests it sent before are still answered.)
        if early || closeAfter {
            head.headerFields[.connection] = "close"
            closing = true
        }
        if headRequest {
            // The length GET's body would have (RFC 9110 §9.3.2), and no body: a response
            // without a length would be framed as chunked, its terminator taken for the next
            // response by the client.
            head.headerFields[.contentLength] = String(buffers.reduce(0) { $0 + $1.readableBytes })
            context.write(wrapOutboundOut(.head(head)), promise: nil)
        } else {
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            for buffer in buffers { context.write(wrapOutboundOut(.body(buffer)), promise: nil) }
        }
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        lastResponseWritten = written
        // The client may have closed its side while this response was being made, or just now,
        // from inside the write above (which may also have handed over a request it had sent
        // before closing: that one's response then closes the connection).
        if early {
            // The client may be sending the body it was not asked for: only this side closes, so
            // the answer is not lost to a reset; what still arrives is discarded, and the
            // connection closes when the client closes its side, or after the read timeout.
            let channel = context.channel
            let readTimeout = TimeAmount(self.readTimeout)
            let inputClosed = self.inputClosed
            written.whenComplete { _ in
                // A client that has closed its side already: nothing more to wait for.
                guard !inputClosed else {
                    channel.close(promise: nil)
                    return
                }
                channel.close(mode: .output, promise: nil)
                let fullClose = channel.eventLoop.scheduleTask(in: readTimeout) { channel.close(promise: nil) }
                channel.closeFuture.whenComplete { _ in fullClose.cancel() }
            }
        } else if closeAfter || (inputClosed && !answering) {
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

/// Collects a response body's buffers (every body this server makes is already in memory).
private final class BufferedBody: ResponseBodyWriter, @unchecked Sendable {
    // Written by one task, read after it finished.
    private(set) var buffers: [ByteBuffer] = []

    func write(_ buffer: ByteBuffer) async throws {
        buffers.append(buffer)
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

/// The `Date` header value, formatted once per second.
final class HTTPDateCache: Sendable {
    private let cached = NIOLockedValueBox<(second: Int, text: String)>((-1, ""))

    /// The current time as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
    func current() -> String {
        let now = time(nil)
        return cached.withLockedValue { cached in
            if cached.second != now {
                cached = (now, Self.format(now))
            }
            return cached.text
        }
    }

    static func format(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
