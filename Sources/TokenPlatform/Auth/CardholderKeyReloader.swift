import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import ProvisioningCrypto
import ServiceLifecycle

/// Watches the identity provider's JWKS file (`PUSHPROV_JWKS`) and puts a changed key set in
/// force without a restart.
///
/// Identity providers rotate their signing keys: they publish a new key, sign with it, and
/// later withdraw the old one. Every ``interval`` this service looks at the file (its device,
/// inode, size and times, following symbolic links, so a Kubernetes ConfigMap or Secret swapped
/// under a mount is seen too); when it changed, or changed less than ``settlingTime`` before the
/// last look (a rewrite within one tick of the file system's clock keeps the same times), the
/// file is read with the rules start-up applies (owned by this process's user or root, not
/// writable by group or others, a JSON Web Key Set, at least one P-256 key with a `kid`, no
/// `kid` twice). A set that passes and differs from the one in force replaces it
/// (``Authenticator/replaceCardholderKeys(_:)``): tokens signed with a withdrawn key are refused
/// from then on, even ones accepted before. A file that fails is logged once, as an error, and
/// the keys in force stay: a half-written or emptied file does not sign every cardholder out.
/// In the embedded run the development key stays in the set beside the file's keys.
public final class CardholderKeyReloader: Service, Sendable {
    /// The default time between two looks at the file.
    public static let defaultInterval: Duration = .seconds(10)

    /// The JWKS file.
    public let path: String
    /// Time between two looks at the file.
    public let interval: Duration
    let developmentKey: JSONWebKey?
    let authenticator: Authenticator
    let logger: Logger
    /// What the last look saw.
    private struct Seen {
        /// The file as last looked at; nil before the first look.
        var identity: FileIdentity?
        /// Whether to read the file at the next look even if it looks the same: it changed too
        /// recently for its times to tell a rewrite within the same clock tick (same size, same
        /// times), or the last read failed for a reason that may pass (an I/O error).
        var readAgain = false
        /// The reason the last look refused the file, so a refusal read again is not logged again.
        var refusal: String?
    }
    private let seen = NIOLockedValueBox(Seen())

    /// How long after a change the file's times are not trusted to tell a further rewrite.
    static let settlingTime: TimeInterval = 2

    /// Watches `path` every `interval` (positive) for `authenticator`; `developmentKey` (the
    /// embedded run's) stays in force beside the file's keys.
    public init(path: String, interval: Duration = CardholderKeyReloader.defaultInterval, developmentKey: JSONWebKey?, authenticator: Authenticator, logger: Logger) {
        precondition(interval > .zero, "the JWKS reload interval must be positive")
        self.path = path
        self.interval = interval
        self.developmentKey = developmentKey
        self.authenticator = authenticator
        self.logger = logger
    }

    /// What one look at the file did.
    public enum Outcome: Sendable, Equatable {
        /// The file is as last seen, or holds the keys already in force.
        case unchanged
        /// A new set is in force: the key ids that are new or whose key changed, and those
        /// withdrawn or whose key changed.
        case reloaded(added: [String], removed: [String])
        /// The file cannot be used; the keys in force stay. The reason, as logged.
        case refused(String)
    }

    /// Looks at the file every ``interval`` until the service group shuts down gracefully or
    /// the task is cancelled.
    public func run() async throws {
        logger.notice("cardholder keys are reloaded when their file changes", metadata: ["file": "\(path)", "interval": "\(interval.formattedSeconds)"])
        await runPeriodically(every: interval) {
            // Off the event loops (`serve` runs Swift concurrency on them): a file on a slow
            // mount must not hold up requests.
            (try? await NIOThreadPool.singleton.runIfActive { self.checkOnce() }) != nil
        }
    }

    /// One look at the file: reloads it if it changed since the last look (the first look
    /// always reads it), and logs what changed or why it cannot be used.
    @discardableResult
    public func checkOnce(now: Date = Date()) -> Outcome {
        // Taken before the file is read: a write after this look changes it again, so the next
        // look reads the file once more.
        let identity = FileIdentity(path: path)
        let last = seen.withLockedValue { $0 }
        guard identity != last.identity || last.readAgain else { return .unchanged }
        let inForce = authenticator.cardholderTokens.keys
        let keys: [String: P256.Signing.PublicKey]
        do {
            let (file, read) = try ServerSettings.readJWKS(path)
            keys = ServerSettings.cardholderKeySet(development: developmentKey, file: file).p256KeysByID
            let unsettled = read != identity || now.timeIntervalSince1970 - identity.modifiedSeconds < Self.settlingTime
            seen.withLockedValue { $0 = Seen(identity: identity, readAgain: unsettled, refusal: nil) }
        } catch {
            let reason = (error as? ConfigurationError)?.message ?? "\(error)"
            // A file that stat sees but that cannot be read now (EIO, EMFILE) is read again at
            // the next look; a file that breaks a rule waits for its next change.
            let passing = identity.error == 0 && reason.contains(" cannot be read (")
            seen.withLockedValue { $0 = Seen(identity: identity, readAgain: passing, refusal: reason) }
            if identity != last.identity || reason != last.refusal {
                logger.error(
                    "cardholder keys not reloaded: the keys in force stay",
                    metadata: ["file": "\(path)", "reason": "\(reason)", "keys_in_force": "\(inForce.keys.sorted().joined(separator: ","))"]
                )
            }
            return .refused(reason)
        }
        func differs(_ id: String, _ one: [String: P256.Signing.PublicKey], _ other: [String: P256.Signing.PublicKey]) -> Bool {
            other[id].map { $0.rawRepresentation != one[id]!.rawRepresentation } ?? true
        }
        let added = keys.keys.filter { differs($0, keys, inForce) }.sorted()
        let removed = inForce.keys.filter { differs($0, inForce, keys) }.sorted()
        guard !added.isEmpty || !removed.isEmpty else { return .unchanged }
        authenticator.replaceCardholderKeys(keys)
        logger.notice(
            "cardholder keys reloaded",
            metadata: [
                "file": "\(path)", "keys": "\(keys.keys.sorted().joined(separator: ","))",
                "added": "\(added.joined(separator: ","))", "removed": "\(removed.joined(separator: ","))",
            ]
        )
        return .reloaded(added: added, removed: removed)
    }
}

/// What tells one state of a file from another without reading it.
struct FileIdentity: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: timespec
    var changed: timespec
    /// The `errno` of a failed `stat`, 0 when it succeeded.
    var error: Int32

    /// The file at `path`, through symbolic links.
    init(path: String) {
        var info = stat()
        if stat(path, &info) == 0 {
            self.init(info)
        } else {
            let failure = errno
            self.init(stat())
            error = failure
        }
    }

    /// The file `info` describes.
    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        #if canImport(Darwin)
        modified = info.st_mtimespec
        changed = info.st_ctimespec
        #else
        modified = info.st_mtim
        changed = info.st_ctim
        #endif
        error = 0
    }

    /// The later of its modification and status-change times, in seconds since 1970.
    var modifiedSeconds: TimeInterval {
        max(Double(modified.tv_sec) + Double(modified.tv_nsec) / 1e9, Double(changed.tv_sec) + Double(changed.tv_nsec) / 1e9)
    }

    static func == (lhs: FileIdentity, rhs: FileIdentity) -> Bool {
        lhs.device == rhs.device && lhs.inode == rhs.inode && lhs.size == rhs.size && lhs.error == rhs.error
            && lhs.modified.tv_sec == rhs.modified.tv_sec && lhs.modified.tv_nsec == rhs.modified.tv_nsec
            && lhs.changed.tv_sec == rhs.changed.tv_sec && lhs.changed.tv_nsec == rhs.changed.tv_nsec
    }
}
