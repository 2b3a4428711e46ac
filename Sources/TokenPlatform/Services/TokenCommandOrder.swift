import Foundation

/// Runs the token service commands of one token one at a time in this process, each from the
/// moment it is decided to the moment TMP has recorded its outcome.
///
/// The token service applies commands in the order they reach it; TMP records them in the
/// order their answers come back. Without an order between the two, a customer-service
/// suspension overtaken by a card's block and unblock was recorded last (TMP: suspended by
/// customer service) while the token service had applied the unblock's resumption last (the
/// token pays), and nothing was at odds for the realignment to find. Holding each token's
/// commands in line makes the order they are sent the order they are recorded.
///
/// Different tokens never wait for each other, so a card's status change still sends its
/// tokens' commands concurrently. A command given up at its time limit releases its place when
/// the caller is answered; ``TimeLimitedTokenServiceConnector`` holds back the token's next
/// commands until the abandoned one returns.
///
/// The order is per process: instances sharing a PostgreSQL database do not see each other's
/// place in line, and for their races TMP keeps its corrections (``TokenCorrection``) and the
/// realignment.
final class TokenCommandOrder: @unchecked Sendable {
    // @unchecked: `lines` is only touched while holding `lock`.
    private let lock = NSLock()
    /// Tokens with a command in progress, each with the commands waiting behind it, first
    /// come first. Keyed by the reference's bytes: references are the same only byte for byte.
    private var lines: [[UInt8]: [CheckedContinuation<Void, Never>]] = [:]
    /// Whether commands are held in line at all (off only in tests that stand for two
    /// instances sharing one database, whose commands no process orders).
    let enabled: Bool

    /// The tokens whose place in line the current task holds: a command run while one is held
    /// (a correction a command's outcome calls for) goes ahead in the same place.
    @TaskLocal private static var held: Set<[UInt8]> = []

    init(enabled: Bool = true) {
        self.enabled = enabled
    }

    /// How many commands are waiting behind another command for the same token.
    var waiting: Int { lock.withLock { lines.values.reduce(0) { $0 + $1.count } } }

    /// Runs `body` once every command for `reference` that came before it has been recorded.
    func run<T>(_ reference: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
        let key = Array(reference.utf8)
        guard enabled, !Self.held.contains(key) else { return try await body() }
        await withCheckedContinuation(isolation: isolation) { (place: CheckedContinuation<Void, Never>) in
            let first: Bool = lock.withLock {
                guard lines[key] != nil else {
                    lines[key] = []
                    return true
                }
                lines[key]!.append(place)
                return false
            }
            if first { place.resume() }
        }
        defer { release(key) }
        return try await Self.$held.withValue(Self.held.union([key]), operation: body)
    }

    /// Runs `body` in `reference`'s place if no command for it is in progress or waiting;
    /// nil, without running it, if one is.
    func runIfFree<T>(_ reference: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T? {
        let key = Array(reference.utf8)
        guard enabled, !Self.held.contains(key) else { return try await body() }
        let free: Bool = lock.withLock {
            guard lines[key] == nil else { return false }
            lines[key] = []
            return true
        }
        guard free else { return nil }
        defer { release(key) }
        return try await Self.$held.withValue(Self.held.union([key]), operation: body)
    }

    /// Hands the place to the next command waiting, or frees it.
    private func release(_ key: [UInt8]) {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            guard var line = lines[key], !line.isEmpty else {
                lines[key] = nil
                return nil
            }
            let next = line.removeFirst()
            lines[key] = line
            return next
        }
        next?.resume()
    }
}
