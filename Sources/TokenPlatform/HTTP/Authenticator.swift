import Crypto
import Foundation
import NIOConcurrencyHelpers
import Hummingbird
import Logging
import ProvisioningModels

/// Who is calling, once authenticated.
public enum Caller: Sendable, Hashable {
    /// A cardholder, by user id (JWT `sub`).
    case cardholder(userId: String)
    /// The issuer back office.
    case issuer
    /// The token service provider.
    case tsp
    /// The metrics scraper (``Authenticator/metricsKey``).
    case metrics
}

/// Checks the `Authorization: Bearer …` credential a route requires.
public struct Authenticator: Sendable {
    /// Verifies cardholder JWTs: the one in force now. Its keys change only through
    /// ``replaceCardholderKeys(_:)`` (the identity provider's JWKS file reloaded), which also
    /// forgets every token verified before; its issuer, audience and type are fixed.
    public var cardholderTokens: CardholderTokenVerifier { verified.verifier }
    /// The issuer back office's key.
    public var issuerKey: APIKey
    /// The token service provider's key.
    public var tspKey: APIKey
    /// The key `GET /metrics` requires (`PUSHPROV_METRICS_API_KEY`); nil: it answers anyone.
    public var metricsKey: APIKey?
    /// The current time.
    public var now: @Sendable () -> Date
    /// The verifier in force and the tokens whose signature it already verified, so a reused
    /// token costs a lookup, not an ECDSA verification. Shared by copies of this authenticator.
    private let verified: VerifiedTokenCache
    /// At most one `credential refused` line a second for each kind of refusal, counting the
    /// ones held back: a caller sending bad credentials at request rate does not flood the log.
    private let refusals = KeyedWarningThrottle(interval: .seconds(1))

    /// Creates an authenticator.
    public init(cardholderTokens: CardholderTokenVerifier, issuerKey: APIKey, tspKey: APIKey, metricsKey: APIKey? = nil, now: @escaping @Sendable () -> Date = { Date() }) {
        self.verified = VerifiedTokenCache(verifier: cardholderTokens, capacity: 4096)
        self.issuerKey = issuerKey
        self.tspKey = tspKey
        self.metricsKey = metricsKey
        self.now = now
    }

    /// The longest `Authorization` header read; a longer one is refused unread.
    static let maximumHeaderLength = 8192

    /// Whether the header starts with the `Bearer` scheme and a space; the scheme name is
    /// case-insensitive (RFC 9110 §11.1).
    static func hasBearerScheme(_ header: String) -> Bool {
        let scheme = "bearer ".utf8
        guard header.utf8.count >= scheme.count else { return false }
        return zip(header.utf8, scheme).allSatisfy { byte, expected in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte) == expected
        }
    }

    /// The credential after `Bearer `, without the optional white space (space, tab) HTTP
    /// allows around it. Byte-wise: this runs on every request.
    static func credential(afterScheme bytes: Substring.UTF8View) -> String {
        func isOptionalWhiteSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !isOptionalWhiteSpace($0) }),
              let last = bytes.lastIndex(where: { !isOptionalWhiteSpace($0) })
        else { return "" }
        return String(Substring(bytes[first...last]))
    }

    /// The caller, or a 401 that says nothing about what was wrong. Each refusal is logged
    /// (at notice, with the credential expected and why, never the credential itself), since
    /// failed attempts at access are part of the audit trail.
    func authenticate(_ request: Request, as requirement: AuthRequirement, logger: Logger) throws(TMPError) -> Caller? {
        if requirement == .none || (requirement == .metrics && metricsKey == nil) { return nil }
        guard let header = request.headers[.authorization], header.utf8.count <= Self.maximumHeaderLength, Self.hasBearerScheme(header) else {
            let header = request.headers[.authorization]
            logRefusal(logger, expected: requirement.rawValue, reason: header == nil ? "missing" : header!.utf8.count > Self.maximumHeaderLength ? "too_long" : "not_bearer")
            throw TMPError.unauthorized
        }
        let credential = Self.credential(afterScheme: header.utf8.dropFirst("Bearer ".utf8.count))
        switch requirement {
        case .cardholder:
            let claims: Result<CardholderTokenVerifier.VerifiedClaims, CardholderTokenVerifier.Refusal>
            if !credential.utf8.allSatisfy({ $0 < 0x80 }) {
                // A compact JWS is ASCII. Refused before the cache, whose String keys compare by
                // Unicode equivalence: a "K" changed to KELVIN SIGN would find the real token.
                claims = .failure(.malformed)
            } else {
                claims = verified.claims(for: credential)
            }
            // The time checks depend only on the clock skew, which no key change touches.
            switch claims.flatMap({ verified.check($0, now: now()) }) {
            case .success(let userId): return .cardholder(userId: userId)
            case .failure(let refusal):
                logRefusal(logger, expected: "cardholder", reason: refusal.rawValue)
                throw TMPError.unauthorized
            }
        case .issuer:
            guard issuerKey.matches(credential) else {
                logRefusal(logger, expected: "issuer", reason: "wrong_key")
                throw TMPError.unauthorized
            }
            return .issuer
        case .tsp:
            guard tspKey.matches(credential) else {
                logRefusal(logger, expected: "tsp", reason: "wrong_key")
                throw TMPError.unauthorized
            }
            return .tsp
        case .metrics:
            guard metricsKey?.matches(credential) == true else {
                logRefusal(logger, expected: "metrics", reason: "wrong_key")
                throw TMPError.unauthorized
            }
            return .metrics
        case .none:
            return nil
        }
    }
}

extension Authenticator {
    /// Whether the request whose `Authorization` header is `header` may be let in as a
    /// cardholder: the HTTP front's verdict from the head, before any body is held, without an
    /// ECDSA verification (the head is read on an event loop, which serves other connections
    /// meanwhile). A token remembered as accepted or refused is judged so (with the time
    /// checks); another is refused when its form, key id or unproven times already refuse it,
    /// and let through to its route, which verifies it (and remembers the verdict), otherwise.
    /// Logs nothing: the route, judging again, logs a refusal once.
    func admitsCardholder(authorization header: String?) -> Bool {
        guard let header, header.utf8.count <= Self.maximumHeaderLength, Self.hasBearerScheme(header) else { return false }
        let credential = Self.credential(afterScheme: header.utf8.dropFirst("Bearer ".utf8.count))
        guard credential.utf8.allSatisfy({ $0 < 0x80 }) else { return false }
        let now = now()
        switch verified.remembered(credential) {
        case .some(.success(let claims)):
            if case .success = verified.check(claims, now: now) { return true }
            return false
        case .some(.failure):
            return false
        case .none:
            return verified.verifier.precheck(credential, now: now) == nil
        }
    }

    /// How many cardholder-token verifications this authenticator (and its copies) ran.
    var cardholderVerifications: Int { verified.verifications }

    /// Puts `keys` in force for cardholder JWTs, in this authenticator and every copy of it, and
    /// forgets the tokens verified so far: a token signed with a key no longer listed is
    /// refused from the next request on, even if it was accepted before.
    public func replaceCardholderKeys(_ keys: [String: P256.Signing.PublicKey]) {
        verified.replaceKeys(keys)
    }

    private func logRefusal(_ logger: Logger, expected: String, reason: String) {
        guard let held = refusals.admit("\(expected) \(reason)") else { return }
        var metadata: Logger.Metadata = ["expected": "\(expected)", "reason": "\(reason)"]
        if held > 0 { metadata["refused_since_last_line"] = "\(held)" }
        logger.notice("credential refused", metadata: metadata)
    }
}

/// ``WarningThrottle`` for each of a small, fixed set of keys.
final class KeyedWarningThrottle: Sendable {
    let interval: Duration
    private let throttles = NIOLockedValueBox<[String: WarningThrottle]>([:])

    init(interval: Duration) {
        self.interval = interval
    }

    /// ``WarningThrottle/admit(now:)`` for `key`.
    func admit(_ key: String, now: ContinuousClock.Instant = .now) -> Int? {
        let throttle = throttles.withLockedValue { throttles in
            if let existing = throttles[key] { return existing }
            let made = WarningThrottle(interval: interval)
            throttles[key] = made
            return made
        }
        return throttle.admit(now: now)
    }
}

/// The cardholder-token verifier in force, a bounded map from a token's exact text to the
/// claims its signature proved under that verifier's keys, and a smaller one from the SHA-256
/// of a token to why those keys refused it.
///
/// A hit can only be the very same token; the time checks still run on every request.
/// Refusals are remembered because the HTTP front judges a token from the request's head and
/// its route judges it again: a token with a bad signature costs one ECDSA verification, not
/// two. Both maps are keyed by the token's SHA-256 digest: a stream of distinct 8 KiB garbage
/// tokens keeps at most 32 bytes of each, and a credential sent is never compared with the
/// text of a valid one (the comparison of two digests tells nothing of either token). Eviction is first-in-first-out. Replacing the keys empties both maps, and
/// a verification that began under the keys before does not store its result (each change of
/// keys starts a new generation).
final class VerifiedTokenCache: @unchecked Sendable {
    // @unchecked: every stored property but the constant `timeRules` is only touched while
    // holding `lock`.
    private let lock = NSLock()
    private var current: CardholderTokenVerifier
    private var generation: UInt64 = 0
    private var entries: FirstInFirstOutMap<SHA256Digest, CardholderTokenVerifier.VerifiedClaims>
    private var refusals: FirstInFirstOutMap<SHA256Digest, CardholderTokenVerifier.Refusal>
    /// The time rules, which a key change leaves as they are.
    private let timeRules: CardholderTokenVerifier

    init(verifier: CardholderTokenVerifier, capacity: Int, refusalCapacity: Int = 1024) {
        self.current = verifier
        self.timeRules = verifier
        self.entries = FirstInFirstOutMap(capacity: max(1, capacity))
        self.refusals = FirstInFirstOutMap(capacity: max(1, refusalCapacity))
    }

    /// The verifier in force.
    var verifier: CardholderTokenVerifier { lock.withLock { current } }

    /// How many verifications this cache has run (tests: a token judged twice is verified once).
    var verifications: Int { lock.withLock { verificationCount } }
    private var verificationCount = 0

    /// The verdict remembered for `token` under the keys in force, if any; never verifies.
    func remembered(_ token: String) -> Result<CardholderTokenVerifier.VerifiedClaims, CardholderTokenVerifier.Refusal>? {
        let digest = SHA256.hash(data: Data(token.utf8))
        return lock.withLock { entries[digest].map { .success($0) } ?? refusals[digest].map { .failure($0) } }
    }

    /// The claims `token` proves, or why it is refused: remembered, or verified now (and
    /// remembered). `afterVerifying` runs between a verification and the storing of its result
    /// (tests: a key change there).
    func claims(for token: String, afterVerifying: () -> Void = {}) -> Result<CardholderTokenVerifier.VerifiedClaims, CardholderTokenVerifier.Refusal> {
        let digest = SHA256.hash(data: Data(token.utf8))
        let (verifier, generation, cached) = lock.withLock { (current, self.generation, entries[digest]) }
        if let cached { return .success(cached) }
        if let refusal = lock.withLock({ self.generation == generation ? refusals[digest] : nil }) { return .failure(refusal) }
        let result = verifier.verify(token)
        afterVerifying()
        lock.withLock {
            verificationCount += 1
            // Keys replaced meanwhile: this result is of keys no longer in force.
            guard self.generation == generation else { return }
            switch result {
            case .success(let claims): entries.insert(claims, for: digest)
            case .failure(let refusal): refusals.insert(refusal, for: digest)
            }
        }
        return result
    }

    /// ``CardholderTokenVerifier/check(_:now:)`` with the time rules in force.
    func check(_ claims: CardholderTokenVerifier.VerifiedClaims, now: Date) -> Result<String, CardholderTokenVerifier.Refusal> {
        timeRules.check(claims, now: now)
    }

    /// Puts `keys` in force and forgets every token verified so far.
    func replaceKeys(_ keys: [String: P256.Signing.PublicKey]) {
        lock.withLock {
            current.keys = keys
            generation &+= 1
            entries.removeAll()
            refusals.removeAll()
        }
    }
}
