import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import ProvisioningCrypto
import ProvisioningModels

/// ``TMPStore`` on PostgreSQL through postgres-nio, for several TMP instances sharing one
/// database.
///
/// A connection pool of configurable size runs in a task the store owns until ``close()``.
/// Every state change is one transaction with its audit entry. Read-decide-write changes lock
/// the rows they decide on (`SELECT … FOR UPDATE`), single-use facts are primary keys
/// (`INSERT … ON CONFLICT DO NOTHING`), and a transaction that lost a race on a unique key,
/// a deadlock or a serialization check is retried from the start, so it decides again on
/// what the winner committed: the end state is one that a single instance would reach.
/// Every query binds its values; no value is ever spliced into SQL text.
public struct PostgresStore: TMPStore {
    /// The connection pool, renewed when the database answers again before the pool's
    /// back-off lets it try (``RenewablePool``).
    let pool: RenewablePool
    let logger: Logger
    /// How long a query waits for a pooled connection before it fails as
    /// ``DatabaseUnavailable`` (``DatabaseConfiguration/connectionWait``).
    let connectionWait: Duration
    /// How long a database call may run on its connection
    /// (``DatabaseConfiguration/statementTimeout``).
    let statementTimeout: Duration
    /// ``silenceGrace``, unless a test set another.
    let callGrace: Duration
    /// The most table blocks (8 KiB each) one pruning batch looks at (``defaultHistoryScanBlocks``
    /// unless a test sets fewer).
    var historyScanBlocks = PostgresStore.defaultHistoryScanBlocks
    /// 8,192 blocks, 64 MiB of table: a scan of that many takes well under a second on any
    /// server, far inside the statement timeout.
    static let defaultHistoryScanBlocks = 8_192
    /// Whether a connection the pool lends can be used: not closed (a test may say otherwise).
    let isUsable: @Sendable (PostgresConnection) -> Bool

    /// Attempts per transaction before a lost race is reported as an error.
    static let maximumAttempts = 8
    /// Provisioning attempts inserted together while an insert is in flight (``InsertBatch``).
    let attempts: InsertBatch<ProvisioningAttempt>

    /// Connects to `url` and starts a pool of at most `poolSize` connections.
    ///
    /// One connection is opened and closed first, so unreachable servers, wrong credentials and
    /// missing databases fail here with the server's reason (never the password).
    ///
    /// - Parameters:
    ///   - schema: A schema to work in (its `search_path`); nil for the user's default. It
    ///     must exist. Tests use it to isolate themselves inside one database.
    ///   - connectionWait: How long a query waits for a pooled connection (all busy, or the
    ///     server unreachable) before it fails as ``DatabaseUnavailable``.
    ///   - statementTimeout: How long one statement may run, and a transaction stay idle: the
    ///     server cancels what runs longer (`statement_timeout`,
    ///     `idle_in_transaction_session_timeout`, sent as startup parameters). A database call
    ///     (a statement, or a transaction with all its statements) still unanswered
    ///     ``silenceGrace`` after this, counted from when it got its connection (a network that
    ///     drops packets without a reset, or a transaction of several long statements), has its
    ///     connection closed. Either way the call fails as ``DatabaseUnavailable``. Migrations
    ///     are not bounded.
    public static func connect(
        url: PostgresURL,
        poolSize: Int = DatabaseConfiguration.defaultPoolSize,
        connectionWait: Duration = DatabaseConfiguration.defaultConnectionWait,
        statementTimeout: Duration = DatabaseConfiguration.defaultStatementTimeout,
        schema: String? = nil,
        logger: Logger
    ) async throws -> PostgresStore {
        try await connect(url: url, poolSize: poolSize, connectionWait: connectionWait, statementTimeout: statementTimeout, silenceGrace: silenceGrace, schema: schema, logger: logger)
    }

    /// ``connect(url:poolSize:connectionWait:statementTimeout:schema:logger:)`` with another
    /// ``silenceGrace`` (tests that need the server's cancel to come well before the close).
    ///
    /// `firstPool`, for tests: where the first pool connects instead of `url` (a database that
    /// is down), while the start-up check, the probes and renewed pools use `url`.
    /// `poolCheckWait` and `probeQueryTimeout`, for tests: the pool's check after a probe
    /// succeeded, and the bound of a probe's query (``RenewablePool``). `isUsable`, for tests:
    /// whether a lent connection can be used (by default, whether it is still open).
    static func connect(
        url: PostgresURL,
        poolSize: Int = DatabaseConfiguration.defaultPoolSize,
        connectionWait: Duration = DatabaseConfiguration.defaultConnectionWait,
        statementTimeout: Duration,
        silenceGrace: Duration,
        schema: String? = nil,
        probeInterval: Duration = RenewablePool.defaultProbeInterval,
        poolCheckWait: Duration = RenewablePool.defaultPoolCheckWait,
        probeQueryTimeout: TimeAmount = RenewablePool.probeQueryTimeout,
        firstPool: PostgresURL? = nil,
        isUsable: @escaping @Sendable (PostgresConnection) -> Bool = { !$0.isClosed },
        logger: Logger
    ) async throws -> PostgresStore {
        precondition(statementTimeout > .zero, "the statement timeout must be positive")
        let startup = schema.map { [("search_path", $0)] } ?? []
        // postgres-nio writes the rows it reads (their first and last bytes: card ids, user ids,
        // names) into its trace lines: the store's logger stops at `info` whatever the server's
        // level, so LOG_LEVEL=trace puts no stored data in the log.
        var logger = logger
        if logger.logLevel < .info { logger.logLevel = .info }
        // The server ends what runs past the bound itself, releasing its locks at once (a
        // connection closed by the client alone is noticed by the server only when it next
        // writes to it).
        let bound = String(statementTimeout.wholeMilliseconds)
        let parameters = startup + [("statement_timeout", bound), ("idle_in_transaction_session_timeout", bound)]
        // The check at start and the probes of an outage connect as the pool does, startup
        // parameters included: a pooler that refuses them fails the start with its reason.
        let tlsConfiguration = try tlsConfiguration(for: url)
        var probe = PostgresConnection.Configuration(host: url.host, port: url.port, username: url.username, password: url.password, database: url.database, tls: try connectionTLS(url.tls, tlsConfiguration))
        probe.options.additionalStartupParameters = parameters
        let check = probe
        probe.options.connectTimeout = RenewablePool.probeQueryTimeout
        do {
            let connection = try await PostgresConnection.connect(configuration: check, id: 0, logger: logger)
            try await connection.close()
        } catch {
            throw ConfigurationError("cannot connect to database \(url): \(reason(error))")
        }
        let (tls, probeConfiguration, poolLogger) = (clientTLS(url.tls, tlsConfiguration), probe, logger)
        let pool = RenewablePool(probeInterval: probeInterval, poolCheckWait: poolCheckWait, logger: poolLogger) { generation in
            let target = generation == 0 ? firstPool ?? url : url
            var configuration = PostgresClient.Configuration(host: target.host, port: target.port, username: url.username, password: url.password, database: url.database, tls: tls)
            configuration.options.maximumConnections = poolSize
            configuration.options.additionalStartupParameters = parameters
            return PostgresClient(configuration: configuration, backgroundLogger: poolLogger)
        } probe: {
            // A login alone could be a pooler's answer with the database behind it still down.
            let connection = try await PostgresConnection.connect(configuration: probeConfiguration, id: 0, logger: poolLogger)
            // postgres-nio bounds neither a query's wait nor its cancellation, and a pooler
            // may take the login and then hold the query (PgBouncer's query_wait_timeout): the
            // query gets the connect's 5 s, and a cancelled check (close) does not wait for it.
            // Closing the connection fails the query.
            let bound = connection.eventLoop.scheduleTask(in: probeQueryTimeout) { () -> Void in let _: EventLoopFuture<Void> = connection.close() }
            defer { bound.cancel() }
            do {
                try await withTaskCancellationHandler {
                    _ = try await connection.query("SELECT 1", logger: poolLogger).collect()
                } onCancel: {
                    let _: EventLoopFuture<Void> = connection.close()
                }
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
        }
        return PostgresStore(pool: pool, connectionWait: connectionWait, statementTimeout: statementTimeout, silenceGrace: silenceGrace, isUsable: isUsable, logger: logger)
    }

    private init(pool: RenewablePool, connectionWait: Duration, statementTimeout: Duration, silenceGrace: Duration, isUsable: @escaping @Sendable (PostgresConnection) -> Bool, logger: Logger) {
        self.isUsable = isUsable
        self.pool = pool
        self.connectionWait = connectionWait
        self.attempts = InsertBatch(queueWait: connectionWait)
        self.statementTimeout = statementTimeout
        self.callGrace = silenceGrace
        self.logger = logger
    }

    /// Shuts the pool down and closes its connections; call it once requests have stopped.
    public func close() async {
        await pool.close()
    }

    /// Runs a trivial query.
    public func ping() async throws {
        _ = try await rows("SELECT 1")
    }

    // MARK: Cards

    /// Implements ``TMPStore/card(externalCardId:)``.
    public func card(externalCardId: String) async throws -> CardRecord? {
        try await rows("SELECT \(unescaped: Self.cardColumns) FROM card WHERE external_card_id = \(externalCardId)").first.map(CardRecord.init(postgres:))
    }

    /// Implements ``TMPStore/card(externalCardId:ownedBy:)``.
    public func card(externalCardId: String, ownedBy userId: String) async throws -> CardRecord? {
        try await rows("SELECT \(unescaped: Self.cardColumns) FROM card WHERE external_card_id = \(externalCardId) AND user_id = \(userId)").first.map(CardRecord.init(postgres:))
    }

    /// Implements ``TMPStore/card(panLookupHash:)``.
    public func card(panLookupHash: String) async throws -> CardRecord? {
        try await rows("SELECT \(unescaped: Self.cardColumns) FROM card WHERE pan_lookup_hash = \(panLookupHash)").first.map(CardRecord.init(postgres:))
    }

    /// Implements ``TMPStore/holdsCard(panLookupHashes:)``.
    public func holdsCard(panLookupHashes: [String]) async throws -> Bool {
        guard !panLookupHashes.isEmpty else { return false }
        return try await !rows("SELECT 1 FROM card WHERE pan_lookup_hash = ANY(\(panLookupHashes)) LIMIT 1").isEmpty
    }

    /// Implements ``TMPStore/card(panUniqueReference:)``.
    public func card(panUniqueReference: String) async throws -> CardRecord? {
        try await rows("SELECT \(unescaped: Self.cardColumns) FROM card WHERE pan_unique_reference = \(panUniqueReference)").first.map(CardRecord.init(postgres:))
    }

    /// Implements ``TMPStore/card(retiredPanUniqueReference:)``.
    public func card(retiredPanUniqueReference: String) async throws -> CardRecord? {
        try await rows(
            "SELECT \(unescaped: Self.cardColumns) FROM card WHERE external_card_id = (SELECT external_card_id FROM retired_pan_reference WHERE pan_unique_reference = \(retiredPanUniqueReference))"
        ).first.map(CardRecord.init(postgres:))
    }

    /// Implements ``TMPStore/cards(ownedBy:)``.
    public func cards(ownedBy userId: String) async throws -> [CardRecord] {
        try await rows("SELECT \(unescaped: Self.cardColumns) FROM card WHERE user_id = \(userId) ORDER BY external_card_id").map(CardRecord.init(postgres:))
    }

    /// Implements ``TMPStore/putCard(_:audit:)``.
    public func putCard(_ card: CardRecord, audit: @Sendable (_ previous: CardRecord?) -> AuditEntry) async throws -> CardRecord? {
        try await transaction { connection in
            if let other = try await connection.all("SELECT external_card_id FROM card WHERE pan_lookup_hash = \(card.panLookupHash) AND external_card_id <> \(card.externalCardId)", logger: logger).first {
                throw StoreError.duplicatePAN(existingCardId: try other.decode(String.self))
            }
            // A row lock holds nothing while the card does not exist yet: two first PUTs of one
            // card would both see no previous version. This lock on the card's id (its hash, in
            // a key space of its own) makes every PUT of the card wait for the one before it.
            _ = try await connection.all("SELECT pg_advisory_xact_lock(\(Self.cardPutLockSpace), hashtext(\(card.externalCardId)))", logger: logger)
            let previous = try await connection.all("SELECT \(unescaped: Self.cardColumns) FROM card WHERE external_card_id = \(card.externalCardId) FOR NO KEY UPDATE", logger: logger).first.map(CardRecord.init(postgres:))
            let audit = audit(previous)
            // The PAN's reference as the stored card decides it (see TMPStore.putCard).
            let retired = try await connection.all(
                "SELECT EXISTS (SELECT 1 FROM retired_pan_reference WHERE pan_unique_reference = \(card.panUniqueReference))", logger: logger
            ).first?.decode(Bool.self) ?? false
            let put = try CardRecord.replacing(previous, with: card, referenceIsRetired: retired)
            try await connection.run(
                """
                INSERT INTO card (\(unescaped: Self.cardColumns))
                VALUES (\(put.externalCardId), \(put.userId), \(put.encryptedPAN), \(put.panLookupHash), \(put.panLast4), \(put.panUniqueReference),
                    \(put.expiration.text), \(put.cardholderName), \(put.network.rawValue), \(put.productTitle), \(put.artId), \(put.status.rawValue),
                    \(put.createdAt), \(put.updatedAt))
                ON CONFLICT (external_card_id) DO UPDATE SET
                    user_id = excluded.user_id, encrypted_pan = excluded.encrypted_pan, pan_lookup_hash = excluded.pan_lookup_hash,
                    pan_last4 = excluded.pan_last4, pan_unique_reference = excluded.pan_unique_reference, expiration = excluded.expiration,
                    cardholder_name = excluded.cardholder_name, network = excluded.network, product_title = excluded.product_title,
                    art_id = excluded.art_id, updated_at = excluded.updated_at
                """,
                logger: logger
            )
            // Tokens follow the card's owner; those of a replaced PAN are at odds with it below.
            try await connection.run("UPDATE token SET user_id = \(put.userId) WHERE external_card_id = \(put.externalCardId)", logger: logger)
            if let previous, previous.panUniqueReference != put.panUniqueReference {
                try await connection.run(
                    """
                    INSERT INTO retired_pan_reference (pan_unique_reference, external_card_id, retired_at)
                    VALUES (\(previous.panUniqueReference), \(put.externalCardId), \(audit.at)) ON CONFLICT DO NOTHING
                    """,
                    logger: logger
                )
                try await recomputeAtOdds(connection, externalCardId: put.externalCardId, at: audit.at)
            }
            try await insertAudit(connection, audit)
            return previous
        }
    }

    /// Implements ``TMPStore/setCardStatus(externalCardId:status:at:audit:)``.
    public func setCardStatus(externalCardId: String, status: CardStatus, at: Date, audit: @Sendable (_ previous: CardStatus) -> AuditEntry) async throws -> CardStatusUpdate {
        try await transaction { connection in
            // The row lock makes a concurrent status change (or putCard) wait until this one
            // commits, and then read what it committed: the decision is on the card as stored.
            let stored = try await connection.all(
                "SELECT \(unescaped: Self.cardColumns) FROM card WHERE external_card_id = \(externalCardId) FOR NO KEY UPDATE",
                logger: logger
            ).first.map(CardRecord.init(postgres:))
            guard let stored else { return .notFound }
            let (write, result) = CardStatusUpdate.resolve(stored, to: status, at: at)
            guard let after = write else { return result }
            // RETURNING: the card exactly as a later read returns it (dates at the stored precision).
            let updated = try await connection.all(
                "UPDATE card SET status = \(after.status.rawValue), updated_at = \(after.updatedAt) WHERE external_card_id = \(externalCardId) RETURNING \(unescaped: Self.cardColumns)",
                logger: logger
            ).first.map(CardRecord.init(postgres:))
            try await recomputeAtOdds(connection, externalCardId: externalCardId, at: at)
            try await insertAudit(connection, audit(stored.status))
            return .updated(previous: stored.status, card: updated ?? after)
        }
    }

    // MARK: Tokens

    /// Implements ``TMPStore/token(reference:)``.
    public func token(reference: String) async throws -> TokenRecord? {
        try await rows("SELECT \(unescaped: Self.tokenColumns) FROM token WHERE token_unique_reference = \(reference)").first.map(TokenRecord.init(postgres:))
    }

    /// Implements ``TMPStore/tokens(externalCardId:)``.
    public func tokens(externalCardId: String) async throws -> [TokenRecord] {
        try await rows("SELECT \(unescaped: Self.tokenColumns) FROM token WHERE external_card_id = \(externalCardId) ORDER BY created_at, token_unique_reference").map(TokenRecord.init(postgres:))
    }

    /// Implements ``TMPStore/tokens(references:ownedBy:)``.
    public func tokens(references: [String], ownedBy userId: String) async throws -> [TokenRecord] {
        guard !references.isEmpty else { return [] }
        return try await rows(
            "SELECT \(unescaped: Self.tokenColumns) FROM token WHERE user_id = \(userId) AND token_unique_reference = ANY(\(references)) ORDER BY token_unique_reference"
        ).map(TokenRecord.init(postgres:))
    }

    /// Implements ``TMPStore/updateToken(reference:audit:_:)``.
    public func updateToken(reference: String, audit: AuditEntry, _ decide: @Sendable (TokenRecord, CardRecord?) -> TokenChange) async throws -> TokenUpdateResult {
        try await transaction { connection in
            // Card first, then token, as putCard locks them: a concurrent card change waits for
            // this one (or this one for it), and `decide` sees what the other committed.
            let card = try await connection.all(
                """
                SELECT \(unescaped: Self.cardColumns) FROM card
                WHERE external_card_id = (SELECT external_card_id FROM token WHERE token_unique_reference = \(reference)) FOR SHARE
                """,
                logger: logger
            ).first.map(CardRecord.init(postgres:))
            guard let before = try await lockToken(connection, reference) else { return .notFound }
            // The token was created (by another instance) between the two reads, so its card was
            // not read: start over, and `decide` sees the card this time (every token has one).
            if card == nil { throw LostRace() }
            let (write, result) = decide(before, card).resolve(before, at: audit.at)
            if let after = write {
                try await connection.run(
                    "UPDATE token SET status = \(after.status.rawValue), suspended_by = \(after.suspendedBy?.rawValue), updated_at = \(after.updatedAt), pending_command = \(after.pendingCommand?.rawValue), block_suspension_first_sent_ms = \(after.blockSuspensionsSent?.lowerBound.millisecondsSince1970), block_suspension_last_sent_ms = \(after.blockSuspensionsSent?.upperBound.millisecondsSince1970) WHERE token_unique_reference = \(reference)",
                    logger: logger
                )
                try await recomputeAtOdds(connection, tokenReference: reference, at: audit.at)
                try await insertAudit(connection, audit)
            }
            return result
        }
    }

    /// Implements ``TMPStore/applyTokenEvent(eventId:event:tokenReference:occurredAt:audit:_:)``.
    public func applyTokenEvent(eventId: String, event: TokenEventType, tokenReference: String, occurredAt: EventTime?, audit: AuditEntry, _ decide: @Sendable (TokenRecord?, CardRecord?) -> TokenEventEffect) async throws -> TokenEventApplication {
        // Two instances racing on one event id (or on creating one token) both get past the
        // checks below while the other's insert is uncommitted; the loser's insert then fails
        // on the primary key, and the retry finds the winner's event or token.
        try await transaction { connection in
            // Card before token, as updateToken and setCardStatus lock them: a status change of
            // the card and this event then wait for each other instead of deadlocking, and
            // whichever commits second sees the other's write when it decides whether the token
            // is at odds with its card.
            let locked = try await connection.all(
                "SELECT \(unescaped: Self.cardColumns) FROM card WHERE external_card_id = (SELECT external_card_id FROM token WHERE token_unique_reference = \(tokenReference)) FOR SHARE",
                logger: logger
            ).first.map(CardRecord.init(postgres:))
            let current = try await lockToken(connection, tokenReference)
            // The token was created (by another instance) between the two reads, so its card was
            // not locked: start over, and the card is locked first this time.
            if current != nil, locked == nil { throw LostRace() }
            if let row = try await connection.all("SELECT token_unique_reference, event, occurred_ms FROM token_event WHERE event_id = \(eventId)", logger: logger).first {
                let (appliedTo, earlierEvent, earlierTime) = try row.decode((String, String?, Int64?).self)
                let use = TokenEventIdUse(tokenReference: appliedTo, event: earlierEvent, occurredMilliseconds: earlierTime)
                guard use.isSame(event, for: tokenReference, occurredAt: occurredAt) else { return .eventIdReused(tokenReference: use.tokenReference, event: use.event) }
                // A token missing above may have been created by that event, committed between
                // the two reads: read it again, as of now.
                if let current { return .duplicate(current) }
                return .duplicate(try await lockToken(connection, tokenReference))
            }
            var result: TokenRecord
            // The card locked above is the token's: a token never moves to another card.
            switch decide(current, current == nil ? nil : locked).resolve(current, at: audit.at) {
            case .reject(let message):
                return .rejected(message)
            case .insert(let token, let owed):
                _ = try await connection.all("SELECT 1 FROM card WHERE external_card_id = \(token.externalCardId) FOR SHARE", logger: logger)
                try await connection.run(
                    """
                    INSERT INTO token (\(unescaped: Self.tokenColumns))
                    VALUES (\(token.tokenUniqueReference), \(token.externalCardId), \(token.panUniqueReference), \(token.userId), \(token.deviceType.rawValue),
                        \(token.status.rawValue), \(token.authorizationPath.rawValue), \(token.suspendedBy?.rawValue), \(token.tokenLast4), \(token.createdAt), \(token.updatedAt),
                        \(token.lastEventAt?.millisecondsSince1970), \(token.pendingCommand?.rawValue),
                        \(token.blockSuspensionsSent?.lowerBound.millisecondsSince1970), \(token.blockSuspensionsSent?.upperBound.millisecondsSince1970))
                    """,
                    logger: logger
                )
                // The owner as committed (the card row is locked): it may have changed hands since
                // `token` was made. RETURNING: the token exactly as a later read returns it.
                let stored = try await connection.all(
                    "UPDATE token SET user_id = card.user_id FROM card WHERE card.external_card_id = token.external_card_id AND token.token_unique_reference = \(tokenReference) RETURNING \(unescaped: Self.qualifiedTokenColumns)",
                    logger: logger
                ).first
                result = try stored.map(TokenRecord.init(postgres:)) ?? token
                if let owed {
                    // Judged on that owner, in this transaction: the mark cannot be lost between two writes.
                    let marked = try await connection.all(
                        """
                        UPDATE token SET pending_command = 'DEACTIVATE' WHERE token_unique_reference = \(tokenReference) AND status <> 'DEACTIVATED'
                            AND pending_command IS DISTINCT FROM 'DEACTIVATE' AND user_id <> \(owed.madeFor) RETURNING \(unescaped: Self.tokenColumns)
                        """,
                        logger: logger
                    ).first
                    if let marked {
                        result = try TokenRecord(postgres: marked)
                        try await insertAudit(connection, owed.audit)
                    }
                }
            case .update(let token):
                try await connection.run(
                    """
                    UPDATE token SET status = \(token.status.rawValue), suspended_by = \(token.suspendedBy?.rawValue), token_last4 = \(token.tokenLast4), updated_at = \(token.updatedAt),
                        last_event_ms = \(token.lastEventAt?.millisecondsSince1970), pending_command = \(token.pendingCommand?.rawValue),
                        block_suspension_first_sent_ms = \(token.blockSuspensionsSent?.lowerBound.millisecondsSince1970),
                        block_suspension_last_sent_ms = \(token.blockSuspensionsSent?.upperBound.millisecondsSince1970)
                    WHERE token_unique_reference = \(tokenReference)
                    """,
                    logger: logger
                )
                result = token
            case .stale(let stored, let fillsIn):
                try await connection.run("INSERT INTO token_event (event_id, token_unique_reference, received_at, event, occurred_ms) VALUES (\(eventId), \(tokenReference), \(audit.at), \(event.rawValue), \(occurredAt?.millisecondsSince1970))", logger: logger)
                if let fillsIn {
                    try await connection.run("UPDATE token SET token_last4 = \(fillsIn), updated_at = \(stored.updatedAt) WHERE token_unique_reference = \(tokenReference) AND token_last4 IS NULL", logger: logger)
                    try await insertAudit(connection, audit.staleFillingInTokenLast4)
                }
                return .stale(stored)
            }
            try await recomputeAtOdds(connection, tokenReference: tokenReference, at: audit.at)
            try await connection.run("INSERT INTO token_event (event_id, token_unique_reference, received_at, event, occurred_ms) VALUES (\(eventId), \(tokenReference), \(audit.at), \(event.rawValue), \(occurredAt?.millisecondsSince1970))", logger: logger)
            try await insertAudit(connection, audit)
            return .applied(result)
        }
    }

    /// Implements ``TMPStore/tokensAtOddsWithTheirCard(since:limit:)``.
    public func tokensAtOddsWithTheirCard(since cutoff: Date, limit: Int) async throws -> [TokenRecord] {
        guard limit > 0 else { return [] }
        return try await rows(
            "SELECT \(unescaped: Self.tokenColumns) FROM token WHERE at_odds_since <= \(cutoff) ORDER BY at_odds_since, token_unique_reference LIMIT \(limit)"
        ).map(TokenRecord.init(postgres:))
    }

    /// Implements ``TMPStore/historyCount(_:before:)``: counted a range of
    /// ``historyScanBlocks`` × 4 blocks at a time, each in a statement of its own, so a large
    /// table's count does not run into the statement timeout.
    public func historyCount(_ table: HistoryTable, before cutoff: Date) async throws -> Int {
        var total = 0
        var block = 0
        let step = historyScanBlocks * 4
        while true {
            let (from, to) = ("(\(block),0)", "(\(block + step),0)")
            let row = try await transaction { connection in
                // A TID range scan, as deleteHistory's (an index an operator added on the time
                // column would otherwise be walked over every old row for each range).
                try await connection.run("SET LOCAL enable_indexscan = off", logger: logger)
                try await connection.run("SET LOCAL enable_bitmapscan = off", logger: logger)
                try await connection.run("SET LOCAL enable_indexonlyscan = off", logger: logger)
                return try await connection.all(
                    """
                    SELECT count(*), pg_relation_size('\(unescaped: table.rawValue)'::regclass) / current_setting('block_size')::bigint
                    FROM \(unescaped: table.rawValue)
                    WHERE ctid > \(from)::tid AND ctid < \(to)::tid AND \(unescaped: table.timeColumn) < \(cutoff)
                    """,
                    logger: logger
                ).first
            }
            guard let (count, blocks) = try row?.decode((Int, Int).self) else { return total }
            // `ctid > (block,0)` leaves out no row: tuple offsets start at 1.
            total += count
            block += step
            if block >= blocks { return total }
        }
    }

    /// Implements ``TMPStore/deleteHistory(_:before:limit:after:)``.
    ///
    /// A batch looks at no more than ``historyScanBlocks`` blocks from its position on, and
    /// deletes at most `limit` rows: so each runs well inside the statement timeout however
    /// large the table and however few of its rows are old (the last batches of a pass walk
    /// the young rows that follow the old ones). A range holding no old row still moves the
    /// position on; the pass ends past the table's last block.
    public func deleteHistory(_ table: HistoryTable, before cutoff: Date, limit: Int, after position: HistoryPosition?) async throws -> HistoryBatch {
        guard limit > 0 else { return HistoryBatch(deleted: 0, next: position) }
        let start = position?.value ?? "(0,0)"
        guard let startBlock = Self.block(ofTID: start) else { throw DatabaseUnavailable("a pruning position that is not a row address: \(start)") }
        let end = "(\(startBlock + historyScanBlocks),0)"
        // A TID range scan from `position` on (PostgreSQL 14 and later), so a batch does not
        // pass again over the rows earlier batches deleted (dead until vacuumed). The next
        // batch starts after the largest ctid found, which is right only if the scan returns
        // rows in ctid order: synchronized scans (which may start mid-table), parallel scans
        // and index or bitmap scans (on an index an operator added on the time column) could
        // return them in another order, and rows below that ctid not in this batch would be
        // skipped until the next prune. `ORDER BY ctid` would instead sort every old row left
        // for each batch.
        let row = try await transaction { connection in
            try await connection.run("SET LOCAL synchronize_seqscans = off", logger: logger)
            try await connection.run("SET LOCAL max_parallel_workers_per_gather = 0", logger: logger)
            try await connection.run("SET LOCAL enable_indexscan = off", logger: logger)
            try await connection.run("SET LOCAL enable_bitmapscan = off", logger: logger)
            try await connection.run("SET LOCAL enable_indexonlyscan = off", logger: logger)
            return try await connection.all(
                """
                WITH found AS (
                    SELECT ctid FROM \(unescaped: table.rawValue)
                    WHERE ctid > \(start)::tid AND ctid < \(end)::tid AND \(unescaped: table.timeColumn) < \(cutoff) LIMIT \(limit)
                ), gone AS (
                    DELETE FROM \(unescaped: table.rawValue) WHERE ctid IN (SELECT ctid FROM found) RETURNING ctid
                )
                SELECT (SELECT count(*) FROM found), (SELECT count(*) FROM gone), (SELECT max(ctid)::text FROM found),
                    pg_relation_size('\(unescaped: table.rawValue)'::regclass) / current_setting('block_size')::bigint
                """,
                logger: logger
            ).first
        }
        guard let (found, deleted, last, blocks) = try row?.decode((Int, Int, String?, Int).self) else {
            return HistoryBatch(deleted: 0, next: nil)
        }
        if found == limit, let last { return HistoryBatch(deleted: deleted, next: HistoryPosition(last)) }
        // The range is done: on to the next, unless it was the table's last.
        return HistoryBatch(deleted: deleted, next: startBlock + historyScanBlocks >= blocks ? nil : HistoryPosition(end))
    }

    /// The block number of a row address as PostgreSQL writes it, `(block,offset)`.
    static func block(ofTID text: String) -> Int? {
        guard text.hasPrefix("("), text.hasSuffix(")") else { return nil }
        let parts = text.dropFirst().dropLast().split(separator: ",")
        guard parts.count == 2, let block = Int(parts[0]), block >= 0, Int(parts[1]) != nil else { return nil }
        return block
    }

    /// Implements ``TMPStore/claimTokensAtOddsWithTheirCard(since:limit:at:)``.
    public func claimTokensAtOddsWithTheirCard(since cutoff: Date, limit: Int, at now: Date) async throws -> [TokenRecord] {
        guard limit > 0 else { return [] }
        return try await transaction { connection in
            // SKIP LOCKED: rows another instance's claim holds are left to it rather than
            // waited for; once it commits, their restarted clocks keep them out of this round.
            let tokens = try await connection.all(
                "SELECT \(unescaped: Self.tokenColumns) FROM token WHERE at_odds_since <= \(cutoff) ORDER BY at_odds_since, token_unique_reference LIMIT \(limit) FOR UPDATE SKIP LOCKED",
                logger: logger
            ).map(TokenRecord.init(postgres:))
            if !tokens.isEmpty {
                let references = tokens.map(\.tokenUniqueReference)
                try await connection.run("UPDATE token SET at_odds_since = \(now) WHERE token_unique_reference = ANY(\(references))", logger: logger)
            }
            return tokens
        }
    }

    /// Implements ``TMPStore/takeTokenCommandLease(reference:holder:for:)`` (on the database
    /// server's clock).
    public func takeTokenCommandLease(reference: String, holder: String, for duration: Duration) async throws -> Bool {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return try await !rows(
            """
            INSERT INTO token_command_lease (token_unique_reference, holder, expires_at) VALUES (\(reference), \(holder), now() + make_interval(secs => \(seconds)))
            ON CONFLICT (token_unique_reference) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
            WHERE token_command_lease.holder = excluded.holder OR token_command_lease.expires_at <= now()
            RETURNING 1
            """
        ).isEmpty
    }

    /// Implements ``TMPStore/releaseTokenCommandLease(reference:holder:)``.
    public func releaseTokenCommandLease(reference: String, holder: String) async throws {
        _ = try await rows("DELETE FROM token_command_lease WHERE token_unique_reference = \(reference) AND holder = \(holder)")
    }

    /// Implements ``TMPStore/restartAtOddsClock(reference:at:)``.
    public func restartAtOddsClock(reference: String, at time: Date) async throws {
        _ = try await rows("UPDATE token SET at_odds_since = \(time) WHERE token_unique_reference = \(reference) AND at_odds_since IS NOT NULL")
    }

    /// Implements ``TMPStore/noteBlockSuspensionSent(reference:at:)``.
    public func noteBlockSuspensionSent(reference: String, at time: EventTime) async throws {
        let time = time.millisecondsSince1970
        _ = try await rows(
            """
            UPDATE token SET block_suspension_first_sent_ms = LEAST(block_suspension_first_sent_ms, \(time)),
                block_suspension_last_sent_ms = GREATEST(block_suspension_last_sent_ms, \(time))
            WHERE token_unique_reference = \(reference) AND status = 'ACTIVE'
            """
        )
    }

    /// Implements ``TMPStore/replaceBlockSuspensionNote(reference:with:ifItIs:whileStatusIs:)``.
    public func replaceBlockSuspensionNote(reference: String, with note: ClosedRange<EventTime>?, ifItIs expected: ClosedRange<EventTime>?, whileStatusIs status: TokenStatus?) async throws {
        // Any status when none is given: the column compared with itself (NULL for none).
        _ = try await rows(
            """
            UPDATE token SET block_suspension_first_sent_ms = \(note?.lowerBound.millisecondsSince1970), block_suspension_last_sent_ms = \(note?.upperBound.millisecondsSince1970)
            WHERE token_unique_reference = \(reference) AND block_suspension_first_sent_ms IS NOT DISTINCT FROM \(expected?.lowerBound.millisecondsSince1970)
                AND block_suspension_last_sent_ms IS NOT DISTINCT FROM \(expected?.upperBound.millisecondsSince1970)
                AND status = COALESCE(\(status?.rawValue), status)
            """
        )
    }

    /// Implements ``TMPStore/clearBlockSuspensionNote(reference:)``.
    public func clearBlockSuspensionNote(reference: String) async throws {
        _ = try await rows("UPDATE token SET block_suspension_first_sent_ms = NULL, block_suspension_last_sent_ms = NULL WHERE token_unique_reference = \(reference)")
    }

    // MARK: Provisioning attempts and decisions

    /// Implements ``TMPStore/recordProvisioningAttempt(_:)``.
    public func recordProvisioningAttempt(_ attempt: ProvisioningAttempt) async throws {
        // With other calls' attempts that arrive while an insert is in flight: one statement,
        // its own transaction, for all of them.
        try await attempts.insert(attempt) { batch, waitingSince in try await insertAttempts(batch, waitingSince: waitingSince) }
    }

    /// Inserts `batch` in one statement (one transaction): all of its rows or none. The wait
    /// for a connection began `waitingSince` (when its oldest row was queued).
    func insertAttempts(_ batch: [ProvisioningAttempt], waitingSince: ContinuousClock.Instant) async throws {
        _ = try await rows(
            """
            INSERT INTO provisioning_attempt (activation_data_id, external_card_id, user_id, device_type, nonce_hash, leaf_fingerprint, created_at, expires_at)
            SELECT * FROM unnest(\(batch.map(\.activationDataId))::text[], \(batch.map(\.externalCardId))::text[], \(batch.map(\.userId))::text[],
                \(batch.map(\.deviceType.rawValue))::text[], \(batch.map(\.nonceHash))::text[], \(batch.map(\.leafFingerprint))::text[],
                \(batch.map(\.createdAt))::timestamptz[], \(batch.map(\.expiresAt))::timestamptz[])
            """,
            waitingSince: waitingSince
        )
    }

    /// Implements ``TMPStore/provisioningAttempt(activationDataId:)``.
    public func provisioningAttempt(activationDataId: String) async throws -> ProvisioningAttempt? {
        try await rows(
            """
            SELECT activation_data_id, external_card_id, user_id, device_type, nonce_hash, leaf_fingerprint, created_at, expires_at
            FROM provisioning_attempt WHERE activation_data_id = \(activationDataId)
            """
        ).first.map(ProvisioningAttempt.init(postgres:))
    }

    /// Implements ``TMPStore/recordTokenizationDecision(_:consumingActivationData:)``.
    public func recordTokenizationDecision(_ decision: TokenizationDecisionRecord, consumingActivationData id: String?, decidedOn card: DecidedCard?) async throws -> TokenizationDecisionRecording {
        try await transaction { connection in
            if let card {
                // Locked for share until the commit: a change of the card (status, PAN, owner)
                // waits for this decision, or this waits for it and sees its outcome.
                let holds = try await connection.all(
                    """
                    SELECT 1 FROM card WHERE external_card_id = \(card.externalCardId) AND status = 'ACTIVE'
                    AND pan_unique_reference = \(card.panUniqueReference) AND user_id = \(card.userId) FOR SHARE
                    """,
                    logger: logger
                )
                guard !holds.isEmpty else { return .cardChanged }
            }
            if let id {
                // A concurrent use of the same id waits for the first to commit, then does nothing.
                let used = try await connection.all(
                    "INSERT INTO activation_data_use (activation_data_id, used_at) VALUES (\(id), \(decision.decidedAt)) ON CONFLICT DO NOTHING RETURNING activation_data_id",
                    logger: logger
                )
                guard !used.isEmpty else { return .activationDataUsedBefore }
            }
            try await connection.run(
                """
                INSERT INTO tokenization_decision (request_id, pan_unique_reference, device_type, decision, reason, decided_at, activation_data_id)
                VALUES (\(decision.requestId), \(decision.panUniqueReference), \(decision.deviceType.rawValue), \(decision.decision.rawValue), \(decision.reason), \(decision.decidedAt), \(id))
                """,
                logger: logger
            )
            return .recorded
        }
    }

    /// Implements ``TMPStore/tokenizationDecision(requestId:)``.
    public func tokenizationDecision(requestId: String) async throws -> TokenizationDecisionRecord? {
        try await rows(
            """
            SELECT request_id, pan_unique_reference, device_type, decision, reason, decided_at, activation_data_id FROM tokenization_decision
            WHERE request_id = \(requestId) ORDER BY id DESC LIMIT 1
            """
        ).first.map(TokenizationDecisionRecord.init(postgres:))
    }

    /// Implements ``TMPStore/tokenizationDecision(requestId:usingUp:)``.
    public func tokenizationDecision(requestId: String, usingUp activationDataId: String) async throws -> TokenizationDecisionRecord? {
        try await rows(
            """
            SELECT request_id, pan_unique_reference, device_type, decision, reason, decided_at, activation_data_id FROM tokenization_decision
            WHERE request_id = \(requestId) AND activation_data_id = \(activationDataId) ORDER BY id DESC LIMIT 1
            """
        ).first.map(TokenizationDecisionRecord.init(postgres:))
    }

    /// Implements ``TMPStore/latestTokenizationDecision(panUniqueReference:deviceType:)``.
    public func latestTokenizationDecision(panUniqueReference: String, deviceType: DeviceType) async throws -> TokenizationDecisionRecord? {
        try await latestDecision(panUniqueReference: panUniqueReference, deviceType: deviceType, condition: "")
    }

    /// Implements ``TMPStore/latestTokenizingDecision(panUniqueReference:deviceType:)``.
    public func latestTokenizingDecision(panUniqueReference: String, deviceType: DeviceType) async throws -> TokenizationDecisionRecord? {
        try await latestDecision(panUniqueReference: panUniqueReference, deviceType: deviceType, condition: "AND decision <> 'DECLINED'")
    }

    /// The newest decision for a card and device that meets `condition` (SQL, no arguments).
    private func latestDecision(panUniqueReference: String, deviceType: DeviceType, condition: String) async throws -> TokenizationDecisionRecord? {
        try await rows(
            """
            SELECT request_id, pan_unique_reference, device_type, decision, reason, decided_at, activation_data_id FROM tokenization_decision
            WHERE pan_unique_reference = \(panUniqueReference) AND device_type = \(deviceType.rawValue) \(unescaped: condition)
            ORDER BY decided_at DESC, id DESC LIMIT 1
            """
        ).first.map(TokenizationDecisionRecord.init(postgres:))
    }

    // MARK: Card art and audit

    /// Implements ``TMPStore/putCardArt(_:audit:)``.
    public func putCardArt(_ art: CardArtRecord, audit: AuditEntry) async throws {
        try await transaction { connection in
            try await connection.run(
                """
                INSERT INTO card_art (art_id, content_type, data, updated_at) VALUES (\(art.artId), \(art.contentType), \(art.data), \(art.updatedAt))
                ON CONFLICT (art_id) DO UPDATE SET content_type = excluded.content_type, data = excluded.data, updated_at = excluded.updated_at
                """,
                logger: logger
            )
            try await insertAudit(connection, audit)
        }
    }

    /// Implements ``TMPStore/cardArt(id:)``.
    public func cardArt(id: String) async throws -> CardArtRecord? {
        try await rows("SELECT art_id, content_type, data, updated_at FROM card_art WHERE art_id = \(id)").first.map(CardArtRecord.init(postgres:))
    }

    /// Implements ``TMPStore/cardArtVersion(id:)``. `octet_length` of a `bytea` reads its size
    /// from the value's header, not the file.
    public func cardArtVersion(id: String) async throws -> CardArtVersion? {
        try await rows("SELECT content_type, octet_length(data)::bigint, updated_at FROM card_art WHERE art_id = \(id)").first.map { row in
            let (contentType, size, updated) = try row.decode((String, Int64, Date).self)
            return CardArtVersion(contentType: contentType, byteCount: Int(size), updatedAt: updated)
        }
    }

    /// Implements ``TMPStore/anyCard()``.
    public func anyCard() async throws -> CardRecord? {
        try await rows("SELECT \(unescaped: Self.cardColumns) FROM card LIMIT 1").first.map(CardRecord.init(postgres:))
    }

    /// Implements ``TMPStore/recordAudit(_:)``.
    public func recordAudit(_ entry: AuditEntry) async throws {
        try await transaction { connection in try await insertAudit(connection, entry) }
    }

    /// Implements ``TMPStore/countCards(notEncryptedUnder:)``.
    public func countCards(notEncryptedUnder keyID: String) async throws -> Int {
        let prefix = EncryptedPAN.storedPrefix(keyID: keyID)
        let rows = try await rows("SELECT count(*) FROM card WHERE NOT starts_with(encrypted_pan, \(prefix))")
        return try rows.first?.decode(Int.self) ?? 0
    }

    /// Implements ``TMPStore/cards(notEncryptedUnder:after:limit:)``.
    public func cards(notEncryptedUnder keyID: String, after externalCardId: String?, limit: Int) async throws -> [CardRecord] {
        guard limit > 0 else { return [] }
        let prefix = EncryptedPAN.storedPrefix(keyID: keyID)
        return try await rows(
            "SELECT \(unescaped: Self.cardColumns) FROM card WHERE external_card_id > \(externalCardId ?? "") AND NOT starts_with(encrypted_pan, \(prefix)) ORDER BY external_card_id LIMIT \(limit)"
        ).map(CardRecord.init(postgres:))
    }

    /// Implements ``TMPStore/replaceEncryptedPANs(_:)``: two statements whatever the batch's
    /// size (the cards, then their audit entries), not two round trips per card, so a batch
    /// of thousands fits the statement time limit and holds its cards' rows briefly.
    public func replaceEncryptedPANs(_ changes: [EncryptedPANChange]) async throws -> [String] {
        guard !changes.isEmpty else { return [] }
        return try await transaction { connection in
            let updated = try await connection.all(
                """
                UPDATE card SET encrypted_pan = input.replacement
                FROM unnest(\(changes.map(\.externalCardId))::text[], \(changes.map(\.expected))::text[], \(changes.map(\.replacement))::text[])
                    AS input(id, expected, replacement)
                WHERE card.external_card_id = input.id AND card.encrypted_pan = input.expected
                RETURNING card.external_card_id
                """,
                logger: logger
            )
            let changedIds = Set(try updated.map { try $0.decode(String.self) })
            // In the batch's order, each card once.
            var seen: Set<String> = []
            let changed = changes.filter { changedIds.contains($0.externalCardId) && seen.insert($0.externalCardId).inserted }
            guard !changed.isEmpty else { return [] }
            let audits = changed.map(\.audit)
            try await connection.run(
                """
                INSERT INTO audit_event (at, actor, action, subject, detail)
                SELECT entry.at, entry.actor, entry.action, entry.subject, entry.detail FROM unnest(\(audits.map(\.at))::timestamptz[], \(audits.map(\.actor))::text[], \(audits.map(\.action))::text[],
                    \(audits.map(\.subject))::text[], \(audits.map(\.detail))::text[]) WITH ORDINALITY AS entry(at, actor, action, subject, detail, position)
                ORDER BY position
                """,
                logger: logger
            )
            return changed.map(\.externalCardId)
        }
    }

    /// Implements ``TMPStore/auditEntries(subject:)``.
    public func auditEntries(subject: String) async throws -> [AuditEntry] {
        // One snapshot for both reads, so the trail is of one moment.
        try await transaction { connection in
            try await connection.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            let events = try await connection.all("SELECT at, actor, action, subject, detail FROM audit_event WHERE subject = \(subject) ORDER BY id", logger: logger)
                .map(AuditEntry.init(postgres:))
            guard subject.hasPrefix("card:") else { return events }
            let card = String(subject.dropFirst("card:".count))
            let seals = try await connection.all(
                """
                SELECT activation_data_id, external_card_id, user_id, device_type, nonce_hash, leaf_fingerprint, created_at, expires_at
                FROM provisioning_attempt WHERE external_card_id = \(card) ORDER BY created_at, activation_data_id
                """,
                logger: logger
            ).map(ProvisioningAttempt.init(postgres:))
            return AuditEntry.trail(events: events, seals: seals)
        }
    }

    // MARK: Plumbing

    /// Keeps `at_odds_since` of one card's tokens in step with the rule (see ``AtOddsSQL``).
    private func recomputeAtOdds(_ connection: PostgresConnection, externalCardId: String, at time: Date) async throws {
        try await connection.run(
            "UPDATE token SET at_odds_since = CASE WHEN \(unescaped: AtOddsSQL.predicate) THEN COALESCE(at_odds_since, \(time)) ELSE NULL END WHERE external_card_id = \(externalCardId)",
            logger: logger
        )
    }

    /// Keeps `at_odds_since` of one token in step with the rule (see ``AtOddsSQL``).
    private func recomputeAtOdds(_ connection: PostgresConnection, tokenReference: String, at time: Date) async throws {
        try await connection.run(
            "UPDATE token SET at_odds_since = CASE WHEN \(unescaped: AtOddsSQL.predicate) THEN COALESCE(at_odds_since, \(time)) ELSE NULL END WHERE token_unique_reference = \(tokenReference)",
            logger: logger
        )
    }

    private func lockToken(_ connection: PostgresConnection, _ reference: String) async throws -> TokenRecord? {
        try await connection.all("SELECT \(unescaped: Self.tokenColumns) FROM token WHERE token_unique_reference = \(reference) FOR UPDATE", logger: logger).first.map(TokenRecord.init(postgres:))
    }

    private func insertAudit(_ connection: PostgresConnection, _ entry: AuditEntry) async throws {
        try await connection.run(
            "INSERT INTO audit_event (at, actor, action, subject, detail) VALUES (\(entry.at), \(entry.actor), \(entry.action), \(entry.subject), \(entry.detail))",
            logger: logger
        )
    }

    /// Runs one statement outside a transaction and collects its rows.
    private func rows(_ query: PostgresQuery, waitingSince: ContinuousClock.Instant? = nil) async throws -> [PostgresRow] {
        try await withConnection(waitingSince: waitingSince) { connection in try await connection.all(query, logger: logger) }
    }

    /// Runs `body` on a pooled connection, waiting at most ``connectionWait`` for one.
    ///
    /// postgres-nio's pool keeps a request waiting while it cannot open connections, for up to
    /// a minute before its circuit breaker fails it: a request during a database outage would
    /// hang past every client's patience (Apple gives the app's whole `signed-cards` round trip
    /// 20 s). Here the wait is bounded, and a request the pool cannot serve fails as
    /// ``DatabaseUnavailable`` (503). `body` never starts once the wait is over, so a timed-out
    /// request has run nothing. A call that found no connection also has ``pool`` check whether
    /// the database answers again while the pool waits out its back-off (``RenewablePool``);
    /// a call waiting in a pool that is replaced moves to the new one within its wait, and a
    /// connection lent already closed (the pool not yet told) is given back and another leased.
    ///
    /// Once leased, `body` is bounded: the server cancels each statement running longer than
    /// ``statementTimeout`` (SQLSTATE 57014, an outage like the others), and if `body` as a
    /// whole is still unanswered ``silenceGrace`` after that, its connection is closed, what it
    /// waits for fails, and the call throws ``DatabaseUnavailable``; the connection goes back
    /// to the pool only once closed, and the pool opens a new one in its place. A cancelled
    /// call ends its wait, but not this bound: a body already running (it may wait on a
    /// silent network whatever its caller wants) is still closed at its limit. Without this, a statement on a connection that goes silent (a network that drops
    /// packets without a reset) would wait for TCP to give up, minutes later. A `body` that
    /// finished is never reported as failed, even if its connection is closed just after.
    /// `bounded: false` (migrations) lets `body` run as long as it takes. `waitingSince`: when
    /// the wait began, if before this call (a row queued for a batched insert, whose time in
    /// the queue counts as waiting for a connection).
    func withConnection<Value: Sendable>(bounded: Bool = true, waitingSince: ContinuousClock.Instant? = nil, _ body: @Sendable (PostgresConnection) async throws -> Value) async throws -> Value {
        let (pool, wait, logger, isUsable) = (pool, connectionWait, logger, isUsable)
        let limit = bounded ? statementTimeout + callGrace : nil
        let lease = NIOLockedValueBox(Lease())
        // The task group ends only once both tasks have, so `body` does not outlive the call.
        return try await withoutActuallyEscaping(body) { body in try await withThrowingTaskGroup(of: Value?.self) { group in
            group.addTask {
                var current = pool.current
                var closedLends = 0
                while true {
                    let generation = current.generation
                    do {
                        return try await current.client.withConnection { connection in
                            // A pool replaced meanwhile is being shut down: its connection is
                            // not used, and the call leases again from the new pool.
                            // A connection that closed while idle (the server restarted, a
                            // proxy or firewall dropped it) can be lent before the pool has
                            // learned of the close. Nothing was sent on it, so the call leases
                            // again, within its wait, instead of failing with 503 (and the lend
                            // is not counted as one: the pool has not served the call).
                            guard isUsable(connection) else { throw LentClosed() }
                            guard pool.claim(generation: generation) else { throw RenewablePool.Retired() }
                            let leasedAt = ContinuousClock.now
                            let started: (ok: Bool, timerGone: Bool) = lease.withLockedValue { lease in
                                guard lease.phase == .waiting else { return (false, lease.timerGone) }
                                lease.phase = .leased(connection, at: leasedAt)
                                return (true, lease.timerGone)
                            }
                            guard started.ok else {
                                pool.returned()
                                throw DatabaseUnavailable.waitRanOut(wait)
                            }
                            // The timer already ended (the call was cancelled while waiting):
                            // the connection's event loop keeps the call's bound instead.
                            if started.timerGone, let limit {
                                Self.closeAtLimit(lease, connection, deadline: leasedAt + limit, limit: limit, logger: logger)
                            }
                            // The body ends the lease's bound before the connection goes back to the
                            // pool. If the timer closed the connection meanwhile, the close completes
                            // first, so the pool never lends on a connection about to close.
                            let result: Result<Value, any Error>
                            do { result = .success(try await body(connection)) } catch { result = .failure(error) }
                            let silenced = lease.withLockedValue { lease in
                                defer { lease.phase = .finished }
                                return lease.phase == .silenced
                            }
                            defer { pool.returned() }
                            guard silenced else { return try result.get() }
                            try? await connection.close()
                            // A body that finished is never reported as failed.
                            if case .success(let value) = result { return value }
                            throw DatabaseUnavailable("the database did not answer within \((limit ?? .zero).formattedSeconds); its connection was closed")
                        }
                    } catch is LentClosed {
                        // Cancelled meanwhile: the call ends as a cancelled call does.
                        if Task.isCancelled { throw CancellationError() }
                        logger.debug("the pool lent a connection already closed; leasing another")
                        closedLends += 1
                        // The pool may lend the same connection again until its close has
                        // reached it: a short pause, growing, keeps this from spinning.
                        try? await Task.sleep(for: .milliseconds(min(closedLends, 20)))
                        // Cancelled during the pause (the wait ran out): no further lease asked.
                        if Task.isCancelled { throw CancellationError() }
                        continue
                    } catch let error where !lease.withLockedValue({ $0.phase.wasLent }) && !(error is DatabaseUnavailable) && !Task.isCancelled {
                        // The pool gave up before lending a connection, or lent one after it
                        // was replaced: it was replaced (the call moves to the new one, within
                        // its wait), or it is closed, or its circuit breaker is open after a
                        // minute of failed connects.
                        let next = pool.current
                        if next.generation != current.generation, lease.withLockedValue({ $0.phase == .waiting }) {
                            current = next
                            continue
                        }
                        pool.starved()
                        throw DatabaseUnavailable("no database connection: \(Self.reason(error))")
                    }
                }
            }
            group.addTask {
                // One timer for both bounds: the wait for a connection, then (once one is
                // lent) the call's `limit`. It wakes at least every `limit` while waiting, so
                // a call lent its connection late is still closed on time. Cancelled (the
                // caller was, or the call ended first): the lease task's outcome decides, so a
                // body that committed is never reported as failed. A cancelled caller does not
                // lift the bound of a body already running (or lent its connection later):
                // that body may wait on a silent network whatever the caller wants, holding a
                // pooled connection, so the connection's event loop closes it at the limit.
                let started = waitingSince ?? ContinuousClock.now
                let waitEnds = started + wait
                var wake = limit.map { min(waitEnds, started + $0) } ?? waitEnds
                while true {
                    do { try await Task.sleep(until: wake, clock: .continuous) } catch {
                        Self.handOverBound(lease, limit: limit, logger: logger)
                        return nil
                    }
                    if Task.isCancelled {
                        Self.handOverBound(lease, limit: limit, logger: logger)
                        return nil
                    }
                    let now = ContinuousClock.now
                    let step: TimerStep = lease.withLockedValue { lease in
                        switch lease.phase {
                        case .waiting:
                            if now >= waitEnds {
                                lease.phase = .expired
                                return .expire
                            }
                            return .sleep(until: limit.map { min(waitEnds, now + $0) } ?? waitEnds)
                        case .leased(let connection, let leasedAt):
                            guard let limit else { return .stop }
                            if now >= leasedAt + limit {
                                lease.phase = .silenced
                                return .close(connection)
                            }
                            return .sleep(until: leasedAt + limit)
                        case .expired, .silenced, .finished:
                            return .stop
                        }
                    }
                    switch step {
                    case .expire:
                        pool.starved()
                        throw DatabaseUnavailable.waitRanOut(wait)
                    case .sleep(let until): wake = until
                    case .stop: return nil
                    case .close(let connection):
                        logger.warning("closing a database connection that has not answered", metadata: ["waited": "\((limit ?? .zero).formattedSeconds)"])
                        try? await connection.close()
                        return nil
                    }
                }
            }
            while let result = try await group.next() {
                if let value = result {
                    group.cancelAll()
                    return value
                }
            }
            // Both tasks ended and neither produced a value: only cancellation does that.
            throw CancellationError()
        } }
    }

    /// Where one ``withConnection(bounded:_:)`` call stands, shared by its lease and its timer.
    private struct Lease: Sendable {
        enum Phase: Sendable, Equatable {
            /// Waiting for the pool to lend a connection.
            case waiting
            /// Running on `connection`, lent at `at`.
            case leased(PostgresConnection, at: ContinuousClock.Instant)
            /// The wait ended first: the call fails and its body never runs.
            case expired
            /// The call's limit passed: its connection is being closed.
            case silenced
            /// The body returned.
            case finished

            /// Whether the pool lent a connection (the body may have run).
            var wasLent: Bool {
                switch self {
                case .waiting, .expired: false
                case .leased, .silenced, .finished: true
                }
            }

            static func == (lhs: Phase, rhs: Phase) -> Bool {
                switch (lhs, rhs) {
                case (.waiting, .waiting), (.expired, .expired), (.silenced, .silenced), (.finished, .finished): true
                case (.leased(let a, _), .leased(let b, _)): a === b
                default: false
                }
            }
        }

        var phase = Phase.waiting
        /// The timer ended early (the call was cancelled); the bound is kept elsewhere.
        var timerGone = false
    }

    /// The timer of a ``withConnection(bounded:_:)`` call ends early (cancelled): a body
    /// running keeps its bound on its connection's event loop, and a body lent its connection
    /// later is bounded there by the lease task (`timerGone`).
    private static func handOverBound(_ lease: NIOLockedValueBox<Lease>, limit: Duration?, logger: Logger) {
        let running: (PostgresConnection, ContinuousClock.Instant)? = lease.withLockedValue { lease in
            lease.timerGone = true
            guard case .leased(let connection, let leasedAt) = lease.phase else { return nil }
            return (connection, leasedAt)
        }
        guard let limit, let (connection, leasedAt) = running else { return }
        closeAtLimit(lease, connection, deadline: leasedAt + limit, limit: limit, logger: logger)
    }

    /// At `deadline`, closes `connection` if the call is still running on it (as the timer
    /// does); a call that ended by then is left alone.
    private static func closeAtLimit(_ lease: NIOLockedValueBox<Lease>, _ connection: PostgresConnection, deadline: ContinuousClock.Instant, limit: Duration, logger: Logger) {
        let (seconds, attoseconds) = max(deadline - .now, .zero).components
        let delay = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        connection.eventLoop.scheduleTask(in: delay) {
            let silence = lease.withLockedValue { lease in
                guard case .leased(let leased, _) = lease.phase, leased === connection else { return false }
                lease.phase = .silenced
                return true
            }
            guard silence else { return }
            logger.warning("closing a database connection that has not answered", metadata: ["waited": "\(limit.formattedSeconds)", "caller": "cancelled"])
            let _: EventLoopFuture<Void> = connection.close()
        }
    }

    /// What the timer of ``withConnection(bounded:_:)`` does next.
    private enum TimerStep {
        case expire, stop
        case sleep(until: ContinuousClock.Instant)
        case close(PostgresConnection)
    }

    /// The pool lent a connection already closed; the call leases again.
    private struct LentClosed: Error {}

    /// How long after ``statementTimeout`` (when the server would have cancelled a statement
    /// and answered) a call still unanswered has its connection closed.
    static let silenceGrace: Duration = .seconds(1)

    /// Runs `body` in a transaction on one pooled connection: commits what it returns, rolls
    /// back what it throws, and starts over (at most ``maximumAttempts`` times) when it lost a
    /// race that a retry resolves.
    ///
    /// `bounded: false` (migrations) lifts ``statementTimeout`` for this transaction, on the
    /// server and in ``withConnection(bounded:_:)``.
    func transaction<Value: Sendable>(bounded: Bool = true, _ body: @Sendable (PostgresConnection) async throws -> Value) async throws -> Value {
        var attempt = 1
        while true {
            do {
                return try await withConnection(bounded: bounded) { connection in
                    try await connection.run("BEGIN", logger: logger)
                    do {
                        if !bounded {
                            // Statements run as long as they take; a transaction left idle
                            // (its client stopped or wedged while holding the migration's
                            // advisory lock and ACCESS EXCLUSIVE table locks, which every
                            // other instance's queries queue behind) is still ended by the
                            // server, after at least a minute.
                            try await connection.run("SET LOCAL statement_timeout = 0", logger: logger)
                            try await connection.run(PostgresQuery(unsafeSQL: "SET LOCAL idle_in_transaction_session_timeout = \(Self.unboundedIdleTimeout(statementTimeout).wholeMilliseconds)"), logger: logger)
                        }
                        let value = try await body(connection)
                        try await connection.run("COMMIT", logger: logger)
                        return value
                    } catch {
                        _ = try? await connection.run("ROLLBACK", logger: logger)
                        throw error
                    }
                }
            } catch let error as PSQLError where Self.isLostRace(error) {
                // Past the last attempt: a deadlock or a serialization failure every time means
                // rows that busy, and the client tries again (503). A unique key taken every
                // time stays what it is (500): more likely a bug than a race lost eight times.
                guard attempt < Self.maximumAttempts else {
                    if error.serverInfo?[.sqlState] == "23505" { throw error }
                    throw DatabaseUnavailable.contention(attempts: attempt)
                }
                attempt += 1
                logger.debug("retrying a transaction that lost a race", metadata: ["sqlstate": "\(error.serverInfo?[.sqlState] ?? "")", "attempt": "\(attempt)"])
            } catch is LostRace {
                guard attempt < Self.maximumAttempts else { throw DatabaseUnavailable.contention(attempts: attempt) }
                attempt += 1
                logger.debug("retrying a transaction that read a row another committed meanwhile", metadata: ["attempt": "\(attempt)"])
            }
        }
    }

    /// How long a transaction that lifts the statement timeout (migrations) may stay idle
    /// before the server ends it: the store's statement timeout, and at least a minute, so a
    /// slow client between two statements is not mistaken for one that stopped.
    static func unboundedIdleTimeout(_ statementTimeout: Duration) -> Duration {
        max(statementTimeout, .seconds(60))
    }

    /// The first key of the advisory locks that serialize the PUTs of one card (the second
    /// is the hash of its id).
    static let cardPutLockSpace: Int32 = 0x7063_6172

    /// A transaction saw another's commit between two of its reads in a way that breaks what
    /// it decides on; running it again settles it.
    struct LostRace: Error {}

    /// unique_violation, serialization_failure, deadlock_detected: another transaction
    /// committed first; deciding again on its result settles it.
    static func isLostRace(_ error: PSQLError) -> Bool {
        ["23505", "40001", "40P01"].contains(error.serverInfo?[.sqlState] ?? "")
    }

    /// The server's reason for a failure (e.g. `password authentication failed for user "x"`).
    static func reason(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] { return message }
        if error.code == .sslUnsupported { return "the server does not offer TLS, which sslmode=require, verify-ca and verify-full demand" }
        if let underlying = error.underlying { return "\(underlying)" }
        return error.code.description
    }

    /// The largest `sslrootcert` file read (a bundle of a few hundred roots fits).
    static let maximumRootCertificatesFileSize = 1 << 20

    /// The TLS settings `url` asks for: for `prefer`, TLS without checking the server's
    /// certificate (as libpq); for `verify-ca`, its chain; for `require` and `verify-full`,
    /// its chain and host name; against `sslrootcert`'s certificates when given, else the
    /// system's roots.
    ///
    /// - Throws: ``ConfigurationError`` when `sslrootcert` cannot be read or holds no PEM
    ///   certificate.
    static func tlsConfiguration(for url: PostgresURL) throws(ConfigurationError) -> TLSConfiguration {
        if url.tls == .verifyCA, url.rootCertificatesPath == nil {
            throw ConfigurationError(PostgresURL.verifyCANeedsRoots)
        }
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch url.tls {
        case .disable, .prefer: configuration.certificateVerification = .none
        case .verifyCA: configuration.certificateVerification = .noHostnameVerification
        case .require, .verifyFull: configuration.certificateVerification = .fullVerification
        }
        if let path = url.rootCertificatesPath {
            // Read without blocking and within a bound, as every file the server is given: a
            // FIFO would hold the start for a writer, a huge file would be loaded whole.
            let pem: Data
            // Guarded: whoever can change it could put in a certificate authority of their own
            // and read and rewrite everything between this server and its database.
            switch BoundedFile.read(path, limit: maximumRootCertificatesFileSize, guarded: true) {
            case .success(let data): pem = data
            case .failure(.writableByOthers(let mode)):
                throw ConfigurationError("database URL sslrootcert \(path) can be written by group or others (mode \(String(mode, radix: 8))); whoever can change it can put in a certificate authority of their own: chmod go-w \(path)")
            case .failure(.foreignOwner(let owner)):
                throw ConfigurationError("database URL sslrootcert \(path) belongs to user id \(owner), neither this process's user (\(geteuid())) nor root; whoever owns it can put in a certificate authority of their own: chown it")
            case .failure(.cannotOpen(let reason)): throw ConfigurationError("database URL sslrootcert \(path) cannot be opened (\(reason))")
            case .failure(.notRegular(let kind)): throw ConfigurationError("database URL sslrootcert \(path) is \(kind), not a file of PEM certificates")
            case .failure(.tooLarge(let size, let limit)): throw ConfigurationError("database URL sslrootcert \(path) is too large (\(size) bytes; at most \(limit - 1) are read as PEM certificates)")
            case .failure(.cannotRead): throw ConfigurationError("database URL sslrootcert \(path) cannot be read")
            }
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMBytes(Array(pem))
            } catch {
                throw ConfigurationError("database URL sslrootcert \(path) cannot be read as PEM certificates (\(error))")
            }
            guard !certificates.isEmpty else {
                throw ConfigurationError("database URL sslrootcert \(path) holds no PEM certificate")
            }
            configuration.trustRoots = .certificates(certificates)
        }
        return configuration
    }

    private static func connectionTLS(_ mode: PostgresURL.TLSMode, _ configuration: TLSConfiguration) throws -> PostgresConnection.Configuration.TLS {
        switch mode {
        case .disable: .disable
        case .prefer: .prefer(try NIOSSLContext(configuration: configuration))
        case .require, .verifyCA, .verifyFull: .require(try NIOSSLContext(configuration: configuration))
        }
    }

    private static func clientTLS(_ mode: PostgresURL.TLSMode, _ configuration: TLSConfiguration) -> PostgresClient.Configuration.TLS {
        switch mode {
        case .disable: .disable
        case .prefer: .prefer(configuration)
        case .require, .verifyCA, .verifyFull: .require(configuration)
        }
    }
}

extension PostgresConnection {
    /// Runs `query` and collects every row, refusing a connection already closed.
    ///
    /// postgres-nio drops a statement written to a channel whose handlers have left the
    /// pipeline (which happens one event-loop turn after the channel goes inactive) without
    /// ever answering it, so the call would wait forever (in a debug build the dropped promise
    /// traps instead). Checking `isClosed` from the calling task leaves a window: the channel
    /// can close, and lose its handlers, between the check and the write. Here the check and
    /// the write happen in one turn of the connection's event loop: a channel active then
    /// still has postgres-nio's handler, which answers or fails every statement written to it,
    /// also when the connection closes later; a channel no longer active gets nothing written.
    /// The store writes every statement through this (a connection the statement timeout
    /// closed, then a ROLLBACK or a transaction's next statement, is the common case).
    @discardableResult
    func run(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        try await Self.submit(query, on: self, logger: logger, isActive: { !$0.isClosed }).get().rows
    }

    /// Runs `query` (as ``run(_:logger:)``) and collects every row.
    func all(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        try await run(query, logger: logger)
    }

    /// Writes `query` on `connection`'s event loop, if `isActive` says the connection still
    /// is in that turn of the loop. `isActive` is a parameter only so a test can make the
    /// channel close at that very moment.
    static func submit(
        _ query: PostgresQuery,
        on connection: PostgresConnection,
        logger: Logger,
        isActive: @escaping @Sendable (PostgresConnection) -> Bool
    ) -> EventLoopFuture<PostgresQueryResult> {
        let eventLoop = connection.eventLoop
        return eventLoop.flatSubmit {
            guard isActive(connection) else {
                return eventLoop.makeFailedFuture(DatabaseUnavailable("the database connection was closed"))
            }
            return connection.query(query, logger: logger)
        }
    }
}
