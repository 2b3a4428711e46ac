import Foundation
import NIOConcurrencyHelpers
import NIOCore
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import TestSupport
import Testing
@testable import TokenPlatform

/// `GET cards/{id}/art` reads a stored file once and answers every request for it from one
/// shared buffer, bounded by the cache's limits.
@Suite("Card-art cache")
struct CardArtCacheTests {
    /// A valid card-art PNG carrying a one-letter comment: files of the same size that differ.
    static func png(comment: String) -> Data {
        var bytes = TestPNG.bytes(width: 1536, height: 969)
        bytes.insert(contentsOf: TestPNG.chunk("tEXt", Array("Comment\0\(comment)".utf8)), at: bytes.count - 12)
        return Data(bytes)
    }

    static let now = TestTMP.start

    static func record(_ id: String, _ data: Data, at date: Date = now) -> CardArtRecord {
        CardArtRecord(artId: id, contentType: "image/png", data: data, updatedAt: date)
    }

    /// Counts the loads it runs and answers them from a dictionary.
    final class Shelf: Sendable {
        let files: NIOLockedValueBox<[String: CardArtRecord]>
        let loads = NIOLockedValueBox(0)

        init(_ records: [CardArtRecord]) {
            files = NIOLockedValueBox(Dictionary(uniqueKeysWithValues: records.map { ($0.artId, $0) }))
        }

        func load(_ id: String) -> @Sendable () async throws -> CardArtRecord? {
            { [self] in
                loads.withLockedValue { $0 += 1 }
                return files.withLockedValue { $0[id] }
            }
        }

        func version(_ id: String) -> CardArtVersion { files.withLockedValue { $0[id]!.version } }
    }

    static func address(of outcome: CardArtCache.Outcome?) -> UInt? {
        guard case .served(_, let body)? = outcome else { return nil }
        return body.withUnsafeReadableBytes { $0.baseAddress.map { UInt(bitPattern: $0) } }
    }

    /// Requests for one stored file read it from the store once; every answer is the same
    /// buffer, not a copy of it.
    @Test func everyRequestForOneFileSharesOneBuffer() async throws {
        let cache = CardArtCache()
        let verdicts = CardArtVerdicts()
        let shelf = Shelf([Self.record("a1", Self.png(comment: "A"))])
        var addresses: Set<UInt?> = []
        for _ in 0..<3 {
            let outcome = try await cache.art(id: "a1", version: shelf.version("a1"), verdicts: verdicts, load: shelf.load("a1"))
            guard case .served(let type, let body)? = outcome else {
                Issue.record("not served: \(String(describing: outcome))")
                return
            }
            #expect(type == "image/png" && Data(body.readableBytesView) == Self.png(comment: "A"))
            addresses.insert(Self.address(of: outcome))
        }
        #expect(addresses.count == 1 && addresses.first! != nil)
        #expect(shelf.loads.withLockedValue { $0 } == 1)
        #expect(cache.byteCount == Self.png(comment: "A").count)
    }

    /// Through the route: three GETs of a card's art, one read of the file.
    @Test func theArtRouteReadsTheFileOnce() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let png = Self.png(comment: "A")
            try await platform.putAliceCard(showing: png, contentType: "image/png", as: "art-1", through: api)
            for _ in 0..<3 {
                #expect(try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice")).body == png)
            }
            #expect(platform.environment.cardArtCache.loads == 1)
        }
    }

    /// A file this server stores under an id replaces the cached one even when its version
    /// is the same (same size, same millisecond: the test's clock stands still).
    @Test func thisServersUploadReplacesTheCachedFileOfTheSameVersion() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let (first, second) = (Self.png(comment: "A"), Self.png(comment: "B"))
            #expect(first.count == second.count && first != second)
            try await platform.putAliceCard(showing: first, contentType: "image/png", as: "art-1", through: api)
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice")).body == first)
            let upload = try await api.send(.put, "/lifecycle/card-art/art-1", as: .issuer, raw: second, contentType: "image/png")
            #expect(upload.status == .ok)
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice")).body == second)
            #expect(platform.environment.cardArtCache.loads == 2)
        }
    }

    /// A file stored by another instance (a newer version) is read again.
    @Test func aNewerVersionIsReadAgain() async throws {
        let cache = CardArtCache()
        let verdicts = CardArtVerdicts()
        let shelf = Shelf([Self.record("a1", Self.png(comment: "A"))])
        _ = try await cache.art(id: "a1", version: shelf.version("a1"), verdicts: verdicts, load: shelf.load("a1"))
        shelf.files.withLockedValue { $0["a1"] = Self.record("a1", Self.png(comment: "B"), at: Self.now + 1) }
        let outcome = try await cache.art(id: "a1", version: shelf.version("a1"), verdicts: verdicts, load: shelf.load("a1"))
        guard case .served(_, let body)? = outcome else {
            Issue.record("not served")
            return
        }
        #expect(Data(body.readableBytesView) == Self.png(comment: "B"))
        #expect(shelf.loads.withLockedValue { $0 } == 2)
        #expect(cache.byteCount == Self.png(comment: "B").count, "the older file's bytes are no longer counted")
    }

    /// A load that finds a newer file than the version asked for (an upload came in between)
    /// serves it and keeps it under the version it read.
    @Test func aLoadKeepsTheVersionItRead() async throws {
        let cache = CardArtCache()
        let verdicts = CardArtVerdicts()
        let shelf = Shelf([Self.record("a1", Self.png(comment: "A"))])
        let asked = shelf.version("a1")
        shelf.files.withLockedValue { $0["a1"] = Self.record("a1", Self.png(comment: "BB"), at: Self.now + 1) }
        _ = try await cache.art(id: "a1", version: asked, verdicts: verdicts, load: shelf.load("a1"))
        let outcome = try await cache.art(id: "a1", version: shelf.version("a1"), verdicts: verdicts, load: shelf.load("a1"))
        #expect(Self.address(of: outcome) != nil)
        #expect(shelf.loads.withLockedValue { $0 } == 1)
    }

    /// Requests that miss together wait for one load.
    @Test func requestsMissingTogetherShareOneLoad() async throws {
        let cache = CardArtCache()
        let verdicts = CardArtVerdicts()
        let shelf = Shelf([Self.record("a1", Self.png(comment: "A"))])
        let gate = AsyncGate()
        let version = shelf.version("a1")
        let load: @Sendable () async throws -> CardArtRecord? = {
            await gate.wait()
            return try await shelf.load("a1")()
        }
        async let first = cache.art(id: "a1", version: version, verdicts: verdicts, load: load)
        async let second = cache.art(id: "a1", version: version, verdicts: verdicts, load: load)
        async let third = cache.art(id: "a1", version: version, verdicts: verdicts, load: load)
        let deadline = ContinuousClock.now + .seconds(60)
        while cache.requests < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        try #require(cache.requests == 3, "the three requests never all asked")
        gate.open()
        let addresses = try await [first, second, third].map(Self.address(of:))
        #expect(Set(addresses).count == 1 && addresses[0] != nil)
        #expect(cache.loads == 1)
        #expect(shelf.loads.withLockedValue { $0 } == 1)
    }

    /// Past the byte budget the file used least recently goes; a file over the budget is
    /// served and not kept.
    @Test func theCacheKeepsToItsByteBudget() async throws {
        let file = Self.png(comment: "A")
        let cache = CardArtCache(byteBudget: file.count * 2 + file.count / 2)
        let verdicts = CardArtVerdicts()
        let shelf = Shelf(["a1", "a2", "a3"].map { Self.record($0, file) } + [Self.record("big", Self.png(comment: String(repeating: "x", count: file.count * 3)))])
        func ask(_ id: String) async throws -> CardArtCache.Outcome? {
            try await cache.art(id: id, version: shelf.version(id), verdicts: verdicts, load: shelf.load(id))
        }
        _ = try await ask("a1")
        _ = try await ask("a2")
        _ = try await ask("a1")  // a2 is now the least recently used
        _ = try await ask("a3")
        #expect(shelf.loads.withLockedValue { $0 } == 3)
        #expect(cache.byteCount == file.count * 2)
        _ = try await ask("a1")
        _ = try await ask("a3")
        #expect(shelf.loads.withLockedValue { $0 } == 3, "a1 and a3 are kept")
        _ = try await ask("a2")
        #expect(shelf.loads.withLockedValue { $0 } == 4, "a2 was dropped")

        // Over the budget: served, not kept, and nothing kept is dropped for it.
        let big = try await ask("big")
        #expect(Self.address(of: big) != nil)
        _ = try await ask("big")
        #expect(shelf.loads.withLockedValue { $0 } == 6)
        #expect(cache.byteCount == file.count * 2)
    }

    /// At most `entryLimit` entries, refusals counted.
    @Test func theCacheKeepsToItsEntryLimit() async throws {
        let cache = CardArtCache(entryLimit: 2)
        let verdicts = CardArtVerdicts()
        let refused = CardArtRecord(artId: "bad", contentType: "image/png", data: Data("not a png".utf8), updatedAt: Self.now)
        let shelf = Shelf([Self.record("a1", Self.png(comment: "A")), Self.record("a2", Self.png(comment: "B")), refused])
        func ask(_ id: String) async throws -> CardArtCache.Outcome? {
            try await cache.art(id: id, version: shelf.version(id), verdicts: verdicts, load: shelf.load(id))
        }
        guard case .refused? = try await ask("bad") else {
            Issue.record("a broken PNG was not refused")
            return
        }
        _ = try await ask("bad")
        #expect(shelf.loads.withLockedValue { $0 } == 1, "a refusal is kept")
        _ = try await ask("a1")
        _ = try await ask("a2")
        #expect(shelf.loads.withLockedValue { $0 } == 3)
        _ = try await ask("bad")
        #expect(shelf.loads.withLockedValue { $0 } == 4, "the refusal was the least recently used of three")
    }

    /// A failed load is thrown and not kept; art no longer stored is nil and not kept.
    @Test func failuresAndMissingArtAreNotKept() async throws {
        struct Broken: Error {}
        let cache = CardArtCache()
        let verdicts = CardArtVerdicts()
        let shelf = Shelf([Self.record("a1", Self.png(comment: "A"))])
        let version = shelf.version("a1")
        await #expect(throws: Broken.self) {
            try await cache.art(id: "a1", version: version, verdicts: verdicts) { throw Broken() }
        }
        #expect(Self.address(of: try await cache.art(id: "a1", version: version, verdicts: verdicts, load: shelf.load("a1"))) != nil)
        #expect(cache.loads == 2)

        #expect(try await cache.art(id: "gone", version: version, verdicts: verdicts) { nil } == nil)
        #expect(try await cache.art(id: "gone", version: version, verdicts: verdicts) { nil } == nil)
        #expect(cache.loads == 4)
        #expect(cache.byteCount == Self.png(comment: "A").count)
    }
}
