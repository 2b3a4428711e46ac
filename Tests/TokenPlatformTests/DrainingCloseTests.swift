import Foundation
import NIOCore
import NIOPosix
import SDKTestSupport
import Testing

@testable import TokenPlatform

/// ``DrainingClose`` on real sockets: a server whose send buffer is small writes 4 MB and asks to
/// close the connection at once (as the idle timer does once a response is written), while the
/// client reads at its own pace.
@Suite("Draining close", .serialized)
struct DrainingCloseTests {
    static let size = 4 << 20

    /// Writes `size` bytes when the connection opens, then asks to close it after 100 ms
    /// (abandoning the drain first when `abandon`); records when the close was asked for and
    /// when the channel closed.
    final class Sender: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let abandon: Bool
        let asked = Locked<ContinuousClock.Instant?>(nil)
        let closed = Locked<ContinuousClock.Instant?>(nil)
        /// Whether the handlers after the drain were told the connection is closing.
        let toldClosing = Locked(false)

        init(abandon: Bool) { self.abandon = abandon }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is DrainingClose.Closing { toldClosing.withValue { $0 = true } }
            context.fireUserInboundEventTriggered(event)
        }

        func channelActive(context: ChannelHandlerContext) {
            var buffer = context.channel.allocator.buffer(capacity: DrainingCloseTests.size)
            buffer.writeRepeatingByte(0x5A, count: DrainingCloseTests.size)
            context.writeAndFlush(NIOAny(buffer), promise: nil)
            let channel = context.channel
            let (asked, closed, abandon) = (asked, closed, abandon)
            channel.closeFuture.whenComplete { _ in closed.withValue { $0 = .now } }
            context.eventLoop.scheduleTask(in: .milliseconds(100)) {
                asked.withValue { $0 = .now }
                if abandon { channel.triggerUserOutboundEvent(DrainingClose.Abandon(), promise: nil) }
                channel.close(promise: nil)
            }
            context.fireChannelActive()
        }
    }

    /// Serves one `Sender` behind a ``DrainingClose`` with `patience`; `client` gets the port.
    static func serve(patience: TimeAmount, limit: TimeAmount? = nil, abandon: Bool = false, _ client: @escaping @Sendable (Int) throws -> [UInt8]) async throws -> (received: Int, sender: Sender) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let sender = Sender(abandon: abandon)
        let server = try await ServerBootstrap(group: group)
            .childChannelOption(.socketOption(.so_sndbuf), value: 8_192)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(DrainingClose(patience: patience, limit: limit ?? .seconds(60)))
                    try channel.pipeline.syncOperations.addHandler(sender)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = server.localAddress!.port!
        let received = try await blocking { try client(port) }
        try await server.close()
        try await group.shutdownGracefully()
        return (received.count, sender)
    }

    @Test func aResponseStillBeingTakenIsSentWholeBeforeTheConnectionCloses() async throws {
        let (received, sender) = try await Self.serve(patience: .seconds(2)) { port in
            let connection = try RawConnection(port: port, receiveTimeout: .seconds(20), receiveBuffer: 4_096)
            // A few kilobytes every 2 ms (the receive buffer bounds each read): seconds for all
            // of it, well past the close asked for at 100 ms.
            connection.pacing = (32_768, .milliseconds(2))
            return try connection.readToEnd()
        }
        #expect(received == Self.size)
        let asked = try #require(sender.asked.current)
        let closed = try #require(sender.closed.current)
        #expect(closed - asked > .milliseconds(500), "the close waited for the bytes to leave")
        // Told while it waited, so no request read meanwhile is carried out (its answer would
        // be cut off by the close).
        #expect(sender.toldClosing.current)
    }

    @Test func aClientThatStopsTakingLosesTheConnectionAfterThePatience() async throws {
        let started = ContinuousClock.now
        let (received, sender) = try await Self.serve(patience: .seconds(2)) { port in
            let connection = try RawConnection(port: port, receiveTimeout: .seconds(20), receiveBuffer: 4_096)
            // Takes nothing for 6 s: the close goes ahead about 2 s after the last progress.
            Thread.sleep(forTimeInterval: 6)
            return (try? connection.readToEnd()) ?? []
        }
        #expect(received < Self.size)
        let closed = try #require(sender.closed.current)
        #expect(closed - started < .seconds(5), "closed after the patience, not when the client came back")
    }

    /// A client that takes a little now and then never stalls for the patience, but cannot
    /// hold the connection (and a graceful shutdown, which waits for it) past the limit.
    @Test func aClientThatTakesALittleAtATimeLosesTheConnectionAtTheLimit() async throws {
        let started = ContinuousClock.now
        let (received, sender) = try await Self.serve(patience: .seconds(2), limit: .seconds(2)) { port in
            let connection = try RawConnection(port: port, receiveTimeout: .seconds(20), receiveBuffer: 4_096)
            // 4 KB every 300 ms: progress at every check, and 4 MB would take over 5 minutes.
            connection.pacing = (4_096, .milliseconds(300))
            return (try? connection.readToEnd()) ?? []
        }
        #expect(received < Self.size)
        let asked = try #require(sender.asked.current)
        let closed = try #require(sender.closed.current)
        #expect(closed - asked < .seconds(5) && closed - started < .seconds(8), "closed at the limit, \(closed - asked) after it was asked for")
    }

    @Test func anAbandonedDrainClosesAtOnce() async throws {
        let (received, sender) = try await Self.serve(patience: .seconds(30), abandon: true) { port in
            let connection = try RawConnection(port: port, receiveTimeout: .seconds(20), receiveBuffer: 4_096)
            Thread.sleep(forTimeInterval: 1)
            return (try? connection.readToEnd()) ?? []
        }
        #expect(received < Self.size)
        let asked = try #require(sender.asked.current)
        let closed = try #require(sender.closed.current)
        #expect(closed - asked < .milliseconds(500))
        // Not held back: closed at once, nothing to tell.
        #expect(!sender.toldClosing.current)
    }
}
