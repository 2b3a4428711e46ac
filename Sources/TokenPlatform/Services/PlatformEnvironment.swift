import Foundation
import Logging
import ProvisioningCrypto
import ProvisioningModels

/// Where and how new activation data ends up on the green or yellow path.
public enum ActivationPolicy: String, Sendable, Hashable, CaseIterable {
    /// Valid activation data → yellow: the token is created inactive and the app activates it;
    /// green when the card's token on the cardholder's other device is already active (the
    /// cardholder activated this card in the app before, e.g. adding it to the Watch after
    /// the iPhone).
    case inApp = "in-app"
    /// Valid activation data → green: the token is active at once.
    case immediate
}

/// What every service shares: storage, keys, the token service, the clock.
///
/// Clock and randomness come in from outside so tests are deterministic.
public struct PlatformEnvironment: Sendable {
    /// Storage.
    public var store: any TMPStore
    /// PAN encryption and lookup.
    public var vault: PANVault
    /// Apple's certificate-chain policy with the configured anchors.
    public var chainValidator: AppleChainValidator
    /// Activation-data signing keys, newest first: the first signs, all verify.
    public var activationKeys: [SigningKey]
    /// Green or yellow for valid activation data.
    public var activationPolicy: ActivationPolicy
    /// The token service provider. Services call it through ``tokenService``, which limits
    /// each command to ``connectorTimeout``.
    public var connector: any TokenServiceConnector
    /// The most one token service command may take; a command still running then is cancelled
    /// and counts as failed.
    public var connectorTimeout: Duration
    /// Measures time limits (``connectorTimeout``); tests pass a clock they move themselves.
    public var clock: any Clock<Duration>
    /// The current time.
    public var now: @Sendable () -> Date
    /// Random identifiers (pan-unique references).
    public var makeIdentifier: @Sendable () -> String
    /// Where services log (never PANs).
    public var logger: Logger
    /// The card-art check's verdicts on files checked before, shared by every copy of this
    /// environment.
    let cardArtVerdicts = CardArtVerdicts()
    /// Card art as served, one buffer per stored file, shared by every copy of this
    /// environment.
    let cardArtCache = CardArtCache()
    /// Tokens with a token service command given up at its limit and still running, shared by
    /// every copy of this environment: ``tokenService`` holds back their further commands.
    let abandonedCommands = AbandonedCommands()
    /// Holds each token's token service commands in line, from decision to record, shared by
    /// every copy of this environment.
    let tokenCommandOrder: TokenCommandOrder
    /// This instance, as the holder of token command leases in a shared database.
    let instanceIdentifier = UUID().uuidString
    /// Lets one line a second through for each reason `signed-cards` refuses a certificate
    /// chain, shared by every copy of this environment: a cardholder may send bad chains at
    /// request rate.
    var chainRefusalLog = KeyedWarningThrottle(interval: .seconds(1))

    /// Creates an environment.
    ///
    /// `connectorTimeout` must be positive. `serializingTokenCommands` false lets one token's
    /// commands run at the same time, as two instances sharing a database run them (tests of
    /// those races); a server keeps the default.
    public init(
        store: any TMPStore,
        vault: PANVault,
        chainValidator: AppleChainValidator,
        activationKeys: [SigningKey],
        activationPolicy: ActivationPolicy = .inApp,
        connector: any TokenServiceConnector = UnconfiguredTokenServiceConnector(),
        connectorTimeout: Duration = TimeLimitedTokenServiceConnector.defaultLimit,
        clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date() },
        makeIdentifier: @escaping @Sendable () -> String = { UUID().uuidString.replacingOccurrences(of: "-", with: "") },
        logger: Logger = Logger(label: "pushprov.tmp"),
        serializingTokenCommands: Bool = true
    ) {
        precondition(!activationKeys.isEmpty, "at least one activation signing key is required")
        precondition(connectorTimeout > .zero, "the connector timeout must be positive")
        self.store = store
        self.vault = vault
        self.chainValidator = chainValidator
        self.activationKeys = activationKeys
        self.activationPolicy = activationPolicy
        self.connector = connector
        self.connectorTimeout = connectorTimeout
        self.clock = clock
        self.now = now
        self.makeIdentifier = makeIdentifier
        self.logger = logger
        self.tokenCommandOrder = TokenCommandOrder(enabled: serializingTokenCommands)
    }

    /// ``connector`` with ``connectorTimeout`` on every command: what services call. Every
    /// connector it gives shares one record of commands given up and still running, so no
    /// command for a token overtakes one of them, whichever request or round sends it.
    var tokenService: TimeLimitedTokenServiceConnector {
        TimeLimitedTokenServiceConnector(connector, limit: connectorTimeout, clock: clock, abandoned: abandonedCommands)
    }

    /// How many tokens have a token service command given up at its limit that has not
    /// returned yet; their further commands are held back until it does.
    public var unfinishedTokenServiceCommands: Int { abandonedCommands.count }

    /// Runs `body` in `reference`'s place in line (``TokenCommandOrder``): once the token's
    /// earlier commands in this process are recorded, and then those of other instances
    /// sharing the database (``tokenCommandLease``). Each wait is at most three connector time
    /// limits (a command, and the corrections its outcome may call for); a command that waited
    /// longer, or whose caller was cancelled meanwhile, sends nothing and is
    /// `503 token_service_unavailable`.
    func inTokenOrder<T>(_ reference: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
        do {
            return try await tokenCommandOrder.run(reference, patience: connectorTimeout * 3, clock: clock, lease: tokenCommandLease, isolation: isolation, body)
        } catch let refused as TokenCommandOrder.TurnNotReached {
            throw TMPError(.unavailable, "token_service_unavailable", "token \(Redaction.identifier(reference)): \(refused); nothing was sent, try again")
        }
    }

    /// A token's place in line in the database (for instances sharing it): it lasts longer
    /// than a command and the corrections its outcome may call for.
    var tokenCommandLease: TokenCommandOrder.Lease {
        let abandoned = abandonedCommands
        return TokenCommandOrder.Lease(
            store: store, holder: instanceIdentifier, duration: connectorTimeout * 3 + .seconds(5),
            abandoned: { abandoned.contains($0) }, logger: logger
        )
    }

    /// How many token service commands are waiting for an earlier command for the same token
    /// to be sent and recorded (one token's commands run one at a time in this process).
    public var tokenServiceCommandsWaiting: Int { tokenCommandOrder.waiting }

    /// Issues activation data with the newest key.
    var activationIssuer: ActivationDataIssuer { ActivationDataIssuer(signingKey: activationKeys[0]) }

    /// Verifies activation data with every published key.
    var activationVerifier: ActivationDataVerifier {
        ActivationDataVerifier(keys: Dictionary(activationKeys.map { ($0.id, $0.privateKey.publicKey) }, uniquingKeysWith: { first, _ in first }))
    }

    /// The published verification keys.
    public var activationKeySet: JSONWebKeySet { JSONWebKeySet(keys: activationKeys.map(\.publicJWK)) }
}

extension PlatformEnvironment {
    /// The audit action of a command the token service carried out that left TMP's record as
    /// it was (``auditUnrecorded(_:token:actor:why:)``).
    static let commandNotRecorded = "token.command_not_recorded"

    /// Records in the audit trail that the token service carried out `command` (`activate`,
    /// `suspend`, `resume`, `deactivate`) for a token while TMP's record of it did not change,
    /// and why: every command the token service carried out leaves an entry, also one TMP
    /// then refused to record (the card changed meanwhile) or found recorded already.
    func auditUnrecorded(_ command: String, token reference: String, actor: String, why: String) async {
        let entry = AuditEntry(
            at: now(), actor: actor, action: Self.commandNotRecorded, subject: "token:\(reference)",
            detail: "\(command) confirmed by the token service; TMP's record not changed: \(why)"
        )
        do {
            try await recordCommandAudit(entry)
        } catch {
            logger.error(
                "could not record a token service command in the audit trail",
                metadata: ["token": "\(Redaction.prefix(reference))", "command": "\(command)", "error": "\(DatabaseUnavailable.reason(error))"]
            )
        }
    }

    /// ``TMPStore/updateToken(reference:audit:_:)`` for the outcome of a command the token
    /// service answered, run in a task of its own: a caller cancelled after that answer (a
    /// shutdown past its grace, say) still records what the token service now holds, and its
    /// audit entry, rather than leave them to the token service's event and the realignment —
    /// a store may refuse a cancelled task's work. (A caller cancelled while its command is
    /// with the token service is answered at once, the command not confirmed: see
    /// ``TimeLimitedTokenServiceConnector``.)
    func recordCommandOutcome(reference: String, audit: AuditEntry, _ decide: @escaping @Sendable (TokenRecord, CardRecord?) -> TokenChange) async throws -> TokenUpdateResult {
        let store = store
        return try await Task { try await store.updateToken(reference: reference, audit: audit, decide) }.value
    }

    /// ``TMPStore/recordAudit(_:)`` for a command the token service answered, in a task of its
    /// own as ``recordCommandOutcome(reference:audit:_:)``.
    func recordCommandAudit(_ entry: AuditEntry) async throws {
        let store = store
        try await Task { try await store.recordAudit(entry) }.value
    }

    /// Just before a suspension is sent for `token`, as TMP records it in the command's turn.
    ///
    /// For the card's block (`forTheBlock`), notes the time on an ACTIVE token
    /// (``TMPStore/noteBlockSuspensionSent(reference:at:)``), so that the command's echo is
    /// taken as the block's even if its outcome is never recorded and the card is unblocked
    /// first. A database error there is logged and the command goes ahead all the same:
    /// unnoted, the echo after an unblocking is taken as the token service's own suspension,
    /// which keeps the token suspended until customer service resumes it (fails closed).
    ///
    /// For another suspension (customer service's, or one sent again), clears the note the
    /// token has: that suspension's echo is not the block's, and would otherwise be recorded
    /// as the block's and resumed by the realignment. A database error there is thrown, and
    /// the suspension must not be sent.
    ///
    /// Returns the token with its note as it then is, and the time noted (nil when nothing
    /// was).
    func prepareSuspension(of token: TokenRecord, forTheBlock: Bool) async throws -> (token: TokenRecord, noted: EventTime?) {
        let reference = token.tokenUniqueReference
        guard forTheBlock else {
            guard token.blockSuspensionsSent != nil else { return (token, nil) }
            do {
                try await store.clearBlockSuspensionNote(reference: reference)
            } catch {
                logger.error(
                    "could not clear the note of a suspension sent for a card's block; another suspension is not sent, since its echo could be taken as the block's",
                    metadata: ["token": "\(Redaction.prefix(reference))", "error": "\(DatabaseUnavailable.reason(error))"]
                )
                throw error
            }
            return (token.withoutSuspensionNote, nil)
        }
        guard token.status == .active else { return (token, nil) }
        let sentAt = EventTime(now())
        do {
            try await store.noteBlockSuspensionSent(reference: reference, at: sentAt)
        } catch {
            logger.error(
                "could not note a suspension for a card's block before sending it; should its outcome be lost and the card unblocked before its echo, the token stays suspended",
                metadata: ["token": "\(Redaction.prefix(reference))", "error": "\(DatabaseUnavailable.reason(error))"]
            )
            return (token, nil)
        }
        var noted = token
        noted.blockSuspensionsSent = TokenRecord.note(token.blockSuspensionsSent, adding: sentAt)
        return (noted, sentAt)
    }

    /// After a suspension for the card's block noted at `sentAt` failed with `error`: when the
    /// error says it never reached the token service (``TokenServiceCommandOutcome/neverSent(_:)``),
    /// the note is put back as it was before (`before`, the token's note then) — if it is still
    /// what noting this suspension made of it, so another suspension noted since is kept. Any
    /// other error leaves the note. A database error leaves it too, and it then lapses with
    /// its window (logged). The write runs in a task of its own, so a caller cancelled before
    /// its command was sent (``TimeLimitedTokenServiceConnector/CancelledBeforeSending``)
    /// still withdraws the note: the store refuses work for a cancelled task.
    ///
    /// After another suspension (`sentAt` nil) that never reached the token service, the note
    /// ``prepareSuspension(of:forTheBlock:)`` cleared before it (`cleared`) is put back, if the
    /// token has none since and its status is still `status` (an event that changed it cleared
    /// the note as well, and what the token service did since is known): with it gone, the late
    /// echo of the block's suspension it stood for would be taken as the token service's own,
    /// and the token kept suspended on an unblocked card.
    func withdrawSuspensionNote(of reference: String, sentAt: EventTime?, before: ClosedRange<EventTime>?, cleared: ClosedRange<EventTime>? = nil, status: TokenStatus? = nil, after error: any Error) async {
        guard TokenServiceCommandOutcome.neverSent(error) else { return }
        let (note, expected, whileStatusIs): (ClosedRange<EventTime>?, ClosedRange<EventTime>?, TokenStatus?)
        if let sentAt {
            (note, expected, whileStatusIs) = (before, TokenRecord.note(before, adding: sentAt), nil)
        } else if let cleared, let status {
            (note, expected, whileStatusIs) = (cleared, nil, status)
        } else {
            return
        }
        let store = store
        let withdrawal = Task {
            try await store.replaceBlockSuspensionNote(reference: reference, with: note, ifItIs: expected, whileStatusIs: whileStatusIs)
        }
        do {
            try await withdrawal.value
        } catch {
            logger.error(
                "could not withdraw the note of a suspension for a card's block that did not reach the token service; until its window ends, a suspension the token service reports for the token is taken as the block's",
                metadata: ["token": "\(Redaction.prefix(reference))", "error": "\(DatabaseUnavailable.reason(error))"]
            )
        }
    }

    /// After the token service confirmed a command for `token` whose outcome TMP found recorded
    /// already (so no write cleared the note): the token service's state is known, so a note
    /// of suspensions sent for the block the token still has is cleared (logged if it cannot be).
    func clearSuspensionNoteAfterConfirmed(_ token: TokenRecord) async {
        guard token.blockSuspensionsSent != nil else { return }
        let (store, reference) = (store, token.tokenUniqueReference)
        do {
            try await Task { try await store.clearBlockSuspensionNote(reference: reference) }.value
        } catch {
            logger.error(
                "could not clear the note of a suspension sent for a card's block after a confirmed command; until its window ends, a suspension the token service reports for the token is taken as the block's",
                metadata: ["token": "\(Redaction.prefix(token.tokenUniqueReference))", "error": "\(DatabaseUnavailable.reason(error))"]
            )
        }
    }
}
