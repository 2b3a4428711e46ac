import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import ProvisioningModels

/// The card-art check's verdicts on files it has checked, by their SHA-256 and declared
/// content type, so a file is checked once per process and not on every request.
///
/// `GET cards/{id}/art` serves stored art only if it passes the card-art rules as they are
/// now, and a PDF of a few megabytes with tens of thousands of objects takes the check a
/// good part of a second: checked on every request, a handful of cardholders fetching such
/// art kept the server's other connections waiting. The rules change only with the code, so
/// a verdict holds for the process's life. A miss is checked on SwiftNIO's thread pool for
/// blocking work, not on an event loop (with `--executor event-loops` Swift's own tasks run
/// on the event loops too), and once: calls that miss on the same file together wait for the
/// one check. Refusals are kept too. At most ``capacity`` verdicts are kept;
/// the oldest goes first.
final class CardArtVerdicts: Sendable {
    /// The most verdicts kept.
    let capacity: Int

    private struct Key: Hashable {
        let digest: SHA256Digest
        let declaredContentType: String?
    }

    private struct State {
        var verdicts: [Key: Task<Result<CardArtInfo, CardArtError>, Never>] = [:]
        /// Keys in the order they were added, oldest first.
        var order: [Key] = []
        var checks = 0
        var calls = 0
    }

    private let state = NIOLockedValueBox(State())

    /// The check itself (``CardArtValidator/validate(_:declaredContentType:)``; tests hold it).
    private let validate: @Sendable (Data, String?) -> Result<CardArtInfo, CardArtError>

    /// Creates an empty set of verdicts keeping at most `capacity` (positive).
    init(capacity: Int = 256, validate: @escaping @Sendable (Data, String?) -> Result<CardArtInfo, CardArtError> = { CardArtValidator.validate($0, declaredContentType: $1) }) {
        precondition(capacity > 0, "the card-art verdict capacity must be positive")
        self.capacity = capacity
        self.validate = validate
    }

    /// How many files were checked so far (calls that found a verdict not counted).
    var checks: Int { state.withLockedValue { $0.checks } }

    /// How many verdicts were asked for so far, found or checked.
    var calls: Int { state.withLockedValue { $0.calls } }

    /// ``CardArtValidator/validate(_:declaredContentType:)``'s verdict on `data` sent as
    /// `declaredContentType`: the one found for the same bytes and type, or a new check's.
    func verdict(on data: Data, declaredContentType: String?) async -> Result<CardArtInfo, CardArtError> {
        let key = Key(digest: SHA256.hash(data: data), declaredContentType: declaredContentType)
        let validate = self.validate
        let task = state.withLockedValue { state in
            state.calls += 1
            if let found = state.verdicts[key] { return found }
            state.checks += 1
            let check = Task {
                let validate: @Sendable () -> Result<CardArtInfo, CardArtError> = { validate(data, declaredContentType) }
                // The shared pool is never shut down; were it, the check runs here instead.
                return (try? await NIOThreadPool.singleton.runIfActive(validate)) ?? validate()
            }
            state.verdicts[key] = check
            state.order.append(key)
            if state.order.count > capacity { state.verdicts[state.order.removeFirst()] = nil }
            return check
        }
        return await task.value
    }

    /// Keeps `info`, the accepted verdict on `data` checked as sent with another declared type
    /// (none, or one with parameters or capitals), under `mediaType` as well: the type an
    /// upload stores and the art's first GET asks with.
    func keep(_ info: CardArtInfo, on data: Data, declaredContentType mediaType: String) {
        let key = Key(digest: SHA256.hash(data: data), declaredContentType: mediaType)
        state.withLockedValue { state in
            guard state.verdicts[key] == nil else { return }
            state.verdicts[key] = Task { .success(info) }
            state.order.append(key)
            if state.order.count > capacity { state.verdicts[state.order.removeFirst()] = nil }
        }
    }
}
