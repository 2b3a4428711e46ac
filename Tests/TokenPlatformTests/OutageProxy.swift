import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
@testable import TokenPlatform

/// A TCP proxy on loopback in front of a server (a test's PostgreSQL), which a test can cut
/// and restore: an outage of the database on demand, without stopping the server other tests
/// share.
///
/// Cut, it closes every proxied connection and closes each new one as soon as it is accepted,
/// as a server that went away (or a network in between) would look to its clients.
/// Silenced, it keeps every connection open and passes no bytes either way, as a network that
/// drops packets without a reset looks to its clients: nothing fails, nothing answers.
final class OutageProxy: Sendable {
    /// The loopback port clients connect to.
    let port: Int
    private let listener: any Channel
    private let state = NIOLockedValueBox<(cut: Bool, silent: Bool, holdingQueries: Bool, heldQueries: Int, open: [ObjectIdentifier: any Channel])>((false, false, false, 0, [:]))

    private init(listener: any Channel) {
        self.listener = listener
        self.port = listener.localAddress?.port ?? 0
    }

    /// Starts a proxy to `host`:`port` on a free loopback port.
    static func start(to host: String, port: Int) async throws -> OutageProxy {
        let box = NIOLockedValueBox<OutageProxy?>(nil)
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                guard let proxy = box.withLockedValue({ $0 }), proxy.admit(inbound) else {
                    return inbound.close()
                }
                return ClientBootstrap(group: inbound.eventLoop)
                    .channelInitializer { outbound in
                        outbound.eventLoop.makeCompletedFuture {
                            try outbound.pipeline.syncOperations.addHandler(Forwarder(partner: inbound, proxy: proxy, fromClient: false))
                        }
                    }
                    .connect(host: host, port: port)
                    .flatMapThrowing { outbound in
                        guard proxy.admit(outbound) else {
                            outbound.close(promise: nil)
                            throw ChannelError.ioOnClosedChannel
                        }
                        try inbound.pipeline.syncOperations.addHandler(Forwarder(partner: outbound, proxy: proxy, fromClient: true))
                        inbound.setOption(.autoRead, value: true).whenComplete { _ in }
                    }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let proxy = OutageProxy(listener: listener)
        box.withLockedValue { $0 = proxy }
        return proxy
    }

    /// Tracks `channel` while the proxy is up; false (the channel must be closed) while cut.
    private func admit(_ channel: any Channel) -> Bool {
        let admitted = state.withLockedValue { state in
            guard !state.cut else { return false }
            state.open[ObjectIdentifier(channel)] = channel
            return true
        }
        if admitted {
            channel.closeFuture.whenComplete { [state] _ in _ = state.withLockedValue { $0.open.removeValue(forKey: ObjectIdentifier(channel)) } }
        }
        return admitted
    }

    /// Closes every proxied connection and refuses new ones until ``restore()``.
    func cut() async {
        let open = state.withLockedValue { state in
            state.cut = true
            return Array(state.open.values)
        }
        for channel in open { try? await channel.close() }
    }

    /// Stops passing bytes either way, keeping every connection open and accepting new ones:
    /// a network that drops packets without a reset. What is sent meanwhile is lost.
    func silence() {
        state.withLockedValue { $0.silent = true }
    }

    /// Whether bytes are being dropped (``silence()``).
    var isSilent: Bool { state.withLockedValue { $0.silent } }

    /// Lets logins through but never passes on a query (what a client sends that starts with
    /// a Parse or Query message): a pooler that takes logins and holds every query while the
    /// database behind it is down.
    func holdQueries() {
        state.withLockedValue { $0.holdingQueries = true }
    }

    /// How many queries ``holdQueries()`` has held so far.
    var heldQueries: Int { state.withLockedValue { $0.heldQueries } }

    /// Whether `chunk`, sent by a client, is to be dropped (``silence()``, ``holdQueries()``).
    fileprivate func drops(clientChunk chunk: ByteBuffer) -> Bool {
        let (silent, holding) = state.withLockedValue { ($0.silent, $0.holdingQueries) }
        if silent { return true }
        guard holding, let first = chunk.getInteger(at: chunk.readerIndex, as: UInt8.self) else { return false }
        guard first == UInt8(ascii: "P") || first == UInt8(ascii: "Q") else { return false }
        state.withLockedValue { $0.heldQueries += 1 }
        return true
    }

    /// Lets connections and bytes through again.
    func restore() {
        state.withLockedValue { state in
            state.cut = false
            state.silent = false
            state.holdingQueries = false
        }
    }

    /// Stops listening and closes every connection.
    func stop() async {
        await cut()
        try? await listener.close()
    }
}

/// Writes what one side of a proxied connection reads to the other side, and closes the
/// other side when this one closes.
private final class Forwarder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let partner: any Channel
    let proxy: OutageProxy
    /// Whether this side reads what the client sends.
    let fromClient: Bool

    init(partner: any Channel, proxy: OutageProxy, fromClient: Bool) {
        self.partner = partner
        self.proxy = proxy
        self.fromClient = fromClient
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let chunk = unwrapInboundIn(data)
        if fromClient ? proxy.drops(clientChunk: chunk) : proxy.isSilent { return }
        partner.writeAndFlush(chunk, promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

extension PostgresURL {
    /// This database reached through `proxy`.
    func through(_ proxy: OutageProxy) -> PostgresURL {
        var proxied = self
        proxied.host = "127.0.0.1"
        proxied.port = proxy.port
        return proxied
    }
}
