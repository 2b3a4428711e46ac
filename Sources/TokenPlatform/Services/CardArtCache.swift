import Foundation
import NIOConcurrencyHelpers
import NIOCore
import ProvisioningModels

/// Card art as `GET cards/{id}/art` serves it: one buffer per stored file, shared by every
/// request for it.
///
/// Without it, each request read the file (up to 4 MB) from the database, hashed it to find
/// the card-art check's verdict, and copied it into a response buffer of its own. A cardholder
/// could then hold about 4 MB of the server's memory per connection by reading slowly, up to
/// the connection limit, and spend about 10 ms of its CPU per request on the hash. Now a
/// request reads only the art's ``CardArtVersion`` (its content type, size and upload time);
/// while that matches the cached file's, the request is answered with the cached buffer,
/// which every connection writes without copying. A version the cache does not hold is
/// loaded once, however many requests ask for it together.
///
/// The cache holds at most ``byteBudget`` bytes of art and ``entryLimit`` entries; the entry
/// used least recently goes first. A file larger than the budget is served but not kept.
/// Refusals (stored art that fails the current card-art rules) are kept too, without bytes.
final class CardArtCache: Sendable {
    /// The most bytes of art kept.
    let byteBudget: Int
    /// The most entries kept, served or refused.
    let entryLimit: Int

    /// What a load found.
    enum Outcome: Sendable {
        /// The stored file passes the rules: its content type and the shared buffer.
        case served(contentType: String, body: ByteBuffer)
        /// The stored file fails the current rules.
        case refused(CardArtError)
    }

    private struct Loaded: Sendable {
        /// The version of the file actually read (newer than the one asked for when an upload
        /// came in between).
        let version: CardArtVersion
        let outcome: Outcome

        var byteCount: Int {
            if case .served(_, let body) = outcome { return body.readableBytes }
            return 0
        }
    }

    private struct Entry {
        var version: CardArtVersion
        /// Nil result: the art is no longer stored.
        let load: Task<Result<Loaded?, any Error>, Never>
        /// Whether the load has finished and been counted (``settle(id:task:result:)``).
        var settled = false
        /// The buffer's bytes, once settled.
        var byteCount = 0
        var lastUse: UInt64
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var byteCount = 0
        var clock: UInt64 = 0
        var loads = 0
        var requests = 0
    }

    private let state = NIOLockedValueBox(State())

    /// Creates an empty cache. Both limits must be positive.
    init(byteBudget: Int = 64 << 20, entryLimit: Int = 1024) {
        precondition(byteBudget > 0 && entryLimit > 0, "the card-art cache's limits must be positive")
        self.byteBudget = byteBudget
        self.entryLimit = entryLimit
    }

    /// How many requests asked so far, served from the cache or not.
    var requests: Int { state.withLockedValue { $0.requests } }

    /// How many times a file was read from the store so far.
    var loads: Int { state.withLockedValue { $0.loads } }

    /// The bytes of art held now.
    var byteCount: Int { state.withLockedValue { $0.byteCount } }

    /// The art `id` as stored at `version` (which the caller has just read): the cached
    /// outcome when the cache holds that version, otherwise what `load` reads, checked with
    /// `verdicts`. Nil when the art is no longer stored. A failed load is thrown to every
    /// request waiting for it and not kept.
    func art(
        id: String, version: CardArtVersion, verdicts: CardArtVerdicts,
        load: @escaping @Sendable () async throws -> CardArtRecord?
    ) async throws -> Outcome? {
        let task = state.withLockedValue { state -> Task<Result<Loaded?, any Error>, Never> in
            state.clock += 1
            state.requests += 1
            if var entry = state.entries[id], entry.version == version {
                entry.lastUse = state.clock
                state.entries[id] = entry
                return entry.load
            }
            if let stale = state.entries.removeValue(forKey: id) { state.byteCount -= stale.byteCount }
            state.loads += 1
            let task = Task { () -> Result<Loaded?, any Error> in
                do {
                    guard let record = try await load() else { return .success(nil) }
                    let outcome: Outcome
                    switch await verdicts.verdict(on: record.data, declaredContentType: record.contentType) {
                    case .success: outcome = .served(contentType: record.contentType, body: ByteBuffer(bytes: record.data))
                    case .failure(let refusal): outcome = .refused(refusal)
                    }
                    return .success(Loaded(version: record.version, outcome: outcome))
                } catch {
                    return .failure(error)
                }
            }
            state.entries[id] = Entry(version: version, load: task, lastUse: state.clock)
            return task
        }
        let result = await task.value
        settle(id: id, task: task, result: result)
        return try result.get()?.outcome
    }

    /// Drops the cached copy of `id`: called after this server stored a new file under it, so
    /// a replacement with the same version (``CardArtVersion``) is still read.
    func forget(id: String) {
        state.withLockedValue { state in
            if let entry = state.entries.removeValue(forKey: id) { state.byteCount -= entry.byteCount }
        }
    }

    /// Once `task` has finished: files its entry under the version read and counts its bytes,
    /// or drops it (a failure, art no longer stored, a file over the budget), then trims the
    /// cache to its limits. Every waiter calls this; only the first changes anything.
    private func settle(id: String, task: Task<Result<Loaded?, any Error>, Never>, result: Result<Loaded?, any Error>) {
        state.withLockedValue { state in
            guard var entry = state.entries[id], entry.load == task, !entry.settled else { return }
            guard case .success(let loaded?) = result, loaded.byteCount <= byteBudget else {
                state.entries[id] = nil
                return
            }
            entry.version = loaded.version
            entry.byteCount = loaded.byteCount
            entry.settled = true
            state.entries[id] = entry
            state.byteCount += loaded.byteCount
            while state.byteCount > byteBudget || state.entries.count > entryLimit {
                // The least recently used settled entry other than this one; loads still
                // running settle (and trim) themselves.
                var victim: (id: String, lastUse: UInt64)?
                for (key, candidate) in state.entries where key != id && candidate.settled && candidate.lastUse < (victim?.lastUse ?? .max) {
                    victim = (key, candidate.lastUse)
                }
                guard let victim else { break }
                state.byteCount -= state.entries.removeValue(forKey: victim.id)?.byteCount ?? 0
            }
        }
    }
}

extension CardArtRecord {
    /// The stored file's version (``CardArtVersion``).
    public var version: CardArtVersion {
        CardArtVersion(contentType: contentType, byteCount: data.count, updatedAt: updatedAt)
    }
}
