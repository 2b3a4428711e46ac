import Foundation
import GRDB
import NIOConcurrencyHelpers
import ProvisioningCrypto
import ProvisioningModels

/// ``TMPStore`` on SQLite through GRDB: WAL for a file database, named migrations, and one
/// write transaction per state change (with its audit entry).
public struct SQLiteStore: TMPStore {
    private let writer: any DatabaseWriter
    /// Independent inserts (attempts, activation-data use, decisions) committed together.
    private let groupCommit: GroupCommit
    /// The longest a write may wait for its turn on the writer queue (the busy timeout; nil,
    /// no limit, in memory, where no other process can hold the lock).
    private let queueWait: Duration?
    /// When a write last failed for a lock another process held (shared with ``groupCommit``).
    private let busy = WriterBusyRecord()
    /// Read-only connections for the single-statement reads (nil in memory); see `read(_:)`.
    private let readers: ReadConnections?
    /// Every call into the connections passes it; ``close()`` shuts it first.
    private let gate = SQLiteCloseGate()

    /// Opens (creating if needed) a database file in WAL mode.
    ///
    /// - Parameter busyTimeout: How long a statement waits for a lock another process holds
    ///   (a second instance, `pushprov prune`, a backup) before it fails as busy, which the
    ///   API answers with `503 database_unavailable` (``DatabaseConfiguration/connectionWait``).
    public init(path: String, busyTimeout: Duration = DatabaseConfiguration.defaultConnectionWait) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout.seconds)
        // At least one reader per thread of the concurrency pool, so a read never waits for a
        // reader (see `read(_:)`).
        configuration.maximumReaderCount = max(5, ProcessInfo.processInfo.activeProcessorCount + 1)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        writer = try DatabasePool(path: path, configuration: configuration)
        // GRDB's WAL set-up leaves `synchronous = NORMAL`, under which a commit is not synced:
        // a power cut or OS crash could then undo writes already answered (a card block, an
        // activation-data use). FULL syncs the log at each commit; group commit shares that
        // sync among the writes of a batch. Only the writer connection commits.
        try writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        queueWait = busyTimeout
        groupCommit = GroupCommit(writer: writer, queueWait: busyTimeout, busy: busy)
        readers = try ReadConnections(path: path, count: configuration.maximumReaderCount, busyTimeout: busyTimeout)
    }

    /// A private in-memory database (tests).
    public static func inMemory() throws -> SQLiteStore {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA foreign_keys = ON") }
        return SQLiteStore(writer: try DatabaseQueue(configuration: configuration))
    }

    private init(writer: any DatabaseWriter) {
        self.writer = writer
        self.queueWait = nil
        self.groupCommit = GroupCommit(writer: writer, queueWait: nil, busy: busy)
        self.readers = nil
    }

    /// Runs a read on the calling thread.
    ///
    /// Reads here are single indexed lookups of a few rows (tens of microseconds). GRDB's async
    /// `read` hops to a reader's dispatch queue and back, which cost more than the query: about
    /// 0.15 ms of CPU per call on the load benchmark. The synchronous form runs on the caller's
    /// thread and does not wait: in WAL mode readers never wait for the writer, and no more reads
    /// run at once than there are threads running Swift concurrency (one per core, whether the
    /// event loops or Swift's pool), fewer than the database pool's readers, so a reader is
    /// always free.
    ///
    /// Every read in this store is a single statement, which SQLite runs on one consistent
    /// snapshot by itself; GRDB's BEGIN/COMMIT around each read (its isolation for
    /// several statements) would only add two statements, so it is skipped. A read of more
    /// than one statement must not use this function.
    ///
    /// A file database reads through its own read-only connections, taken from a free list
    /// (``ReadConnections``), rather than through the database pool: taking a reader from
    /// GRDB's pool (its semaphore, lock and generic bookkeeping) cost more than the query
    /// itself. In A/B runs of the load benchmark this lowered the CPU per `signed-cards` call
    /// by about 5 %. When every such connection is busy the read goes to the pool as before,
    /// so a read never waits for a connection.
    private func read<T>(_ body: (Database) throws -> T) throws -> T {
        try gate.enter()
        defer { gate.leave() }
        if let readers, let connection = readers.take() {
            defer { readers.give(back: connection) }
            return try connection.inDatabase(body)
        }
        return try writer.unsafeRead(body)
    }

    /// `writer.write` once past the gate: a transaction of its own on the writer queue.
    ///
    /// A write whose turn on the writer queue came more than the queue wait after it was asked
    /// for, when a write failed busy since (another process holds the database's lock past the
    /// busy timeout), fails at once (``DatabaseUnavailable``, `503`) without beginning a
    /// transaction: the ones behind a write that waited out its busy timeout must not each
    /// wait for theirs in turn. A write that merely waited behind slow ones goes ahead.
    private func write<T: Sendable>(_ updates: @Sendable (Database) throws -> T) async throws -> T {
        try gate.enter()
        defer { gate.leave() }
        let asked = ContinuousClock.now
        let (queueWait, busy) = (queueWait, busy)
        do {
            return try await writer.writeWithoutTransaction { db in
                if let queueWait, ContinuousClock.now - asked > queueWait, busy.failed(since: asked) { throw DatabaseUnavailable.writerBusy(queueWait) }
                var result: T?
                try db.inTransaction {
                    result = try updates(db)
                    return .commit
                }
                guard let result else { throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "transaction body did not run") }
                return result
            }
        } catch {
            busy.note(error)
            throw error
        }
    }

    /// `writer.read` (a reader of the pool, for reads of more than one statement) once past the gate.
    private func readInPool<T: Sendable>(_ value: @Sendable (Database) throws -> T) async throws -> T {
        try gate.enter()
        defer { gate.leave() }
        return try await writer.read(value)
    }

    /// `groupCommit.write` once past the gate; the call stays admitted until its batch commits.
    private func commitInGroup<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try gate.enter()
        defer { gate.leave() }
        return try await groupCommit.write(body)
    }

    /// Closes the connections, leaving the database file whole on its own.
    ///
    /// New calls are refused from the start with ``DatabaseUnavailable`` (a request still
    /// arriving is answered 503); calls already running finish first. Then everything
    /// committed is copied from the write-ahead log into the database file and the log is
    /// emptied (a `TRUNCATE` checkpoint), and the connections close, the writer last, which
    /// removes the `-wal` and `-shm` files when no other process has the database open: a
    /// copy of the database file alone then holds all the data. A checkpoint another process's reader holds up leaves the log for SQLite to
    /// apply on the next open; nothing is lost. Calling it again waits for the first call and
    /// does nothing more.
    public func close() async {
        guard await gate.beginClosing() else { return }
        defer { gate.finishClosing() }
        readers?.close()
        // The pool's own readers go too, before the writer: GRDB's `close()` closes the
        // writer first, and SQLite removes the -wal and -shm files only when the last
        // connection to close can write (a read-only one left both behind).
        (writer as? DatabasePool)?.releaseMemory()
        _ = try? await writer.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        try? writer.close()
    }

    /// Applies the named migrations; returns those this call applied.
    ///
    /// GRDB's migrator reads which migrations are applied, then runs each missing one in its
    /// own transaction. Another process migrating the same file at the same time (two
    /// instances started together on a new database) can apply one in between, and this run's
    /// copy then fails (`table … already exists`). So a failure is retried as long as the
    /// applied migrations keep growing, that is, while someone else is making progress; a
    /// failure with nothing new applied is thrown.
    @discardableResult
    public func migrate() async throws -> [String] {
        try gate.enter()
        defer { gate.leave() }
        let ran = NIOLockedValueBox<[String]>([])
        let migrator = SQLiteStore.migrator(onApplied: { name in ran.withLockedValue { $0.append(name) } })
        var applied = try await readInPool { db in try migrator.appliedIdentifiers(db) }
        while true {
            do {
                try migrator.migrate(writer)
                return ran.withLockedValue { $0 }
            } catch {
                // Progress by someone else: applied now, but neither before nor by this call.
                let now = try await readInPool { db in try migrator.appliedIdentifiers(db) }
                let mine = Set(ran.withLockedValue { $0 })
                guard !now.subtracting(applied).subtracting(mine).isEmpty else { throw error }
                applied = now
            }
        }
    }

    /// The named migrations not yet applied.
    public func pendingMigrations() async throws -> [String] {
        let migrator = SQLiteStore.migrator
        let applied = try await readInPool { db in try migrator.appliedIdentifiers(db) }
        return migrator.migrations.filter { !applied.contains($0) }
    }

    /// Migrations applied to the database that this version does not know.
    public func unknownMigrations() async throws -> [String] {
        let migrator = SQLiteStore.migrator
        let known = Set(migrator.migrations)
        let applied = try await readInPool { db in try migrator.appliedIdentifiers(db) }
        return applied.subtracting(known).sorted()
    }

    /// The writer connection's `PRAGMA synchronous` level (2 = FULL: every commit synced).
    package func writerSynchronousLevel() throws -> Int {
        try gate.enter()
        defer { gate.leave() }
        return try writer.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// Runs a trivial query.
    public func ping() async throws {
        _ = try read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    // MARK: Cards

    /// Implements ``TMPStore/card(externalCardId:)``.
    public func card(externalCardId: String) async throws -> CardRecord? {
        try read { db in try firstRow(db.cachedStatement(sql: SQL.cardByExternalId), [externalCardId], CardRecord.init(row:)) }
    }

    /// Implements ``TMPStore/card(externalCardId:ownedBy:)``.
    public func card(externalCardId: String, ownedBy userId: String) async throws -> CardRecord? {
        try read { db in try firstRow(db.cachedStatement(sql: SQL.cardByExternalIdAndOwner), [externalCardId, userId], CardRecord.init(row:)) }
    }

    /// Implements ``TMPStore/card(panLookupHash:)``.
    public func card(panLookupHash: String) async throws -> CardRecord? {
        try read { db in try firstRow(db.cachedStatement(sql: SQL.cardByLookupHash), [panLookupHash], CardRecord.init(row:)) }
    }

    /// Implements ``TMPStore/holdsCard(panLookupHashes:)``.
    public func holdsCard(panLookupHashes: [String]) async throws -> Bool {
        guard !panLookupHashes.isEmpty else { return false }
        // In parts, within SQLite's limit on parameters per statement.
        @Sendable func anyHeld(_ db: Database) throws -> Bool {
            for start in stride(from: 0, to: panLookupHashes.count, by: 500) {
                let part = Array(panLookupHashes[start..<min(start + 500, panLookupHashes.count)])
                let marks = repeatElement("?", count: part.count).joined(separator: ", ")
                if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM card WHERE pan_lookup_hash IN (\(marks)))", arguments: StatementArguments(part)) == true {
                    return true
                }
            }
            return false
        }
        // One statement reads one snapshot by itself; several need the pool's read transaction.
        return panLookupHashes.count <= 500 ? try read(anyHeld) : try await readInPool(anyHeld)
    }

    /// Implements ``TMPStore/card(panUniqueReference:)``.
    public func card(panUniqueReference: String) async throws -> CardRecord? {
        try read { db in try firstRow(db.cachedStatement(sql: SQL.cardByUniqueReference), [panUniqueReference], CardRecord.init(row:)) }
    }

    /// Implements ``TMPStore/card(retiredPanUniqueReference:)``.
    public func card(retiredPanUniqueReference: String) async throws -> CardRecord? {
        try read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT \(CardRecord.columns) FROM card WHERE external_card_id = (SELECT external_card_id FROM retired_pan_reference WHERE pan_unique_reference = ?)",
                arguments: [retiredPanUniqueReference]
            ).map(CardRecord.init(row:))
        }
    }

    /// Implements ``TMPStore/cards(ownedBy:)``.
    public func cards(ownedBy userId: String) async throws -> [CardRecord] {
        try read { db in
            try allRows(db.cachedStatement(sql: SQL.cardsByUser), [userId], CardRecord.init(row:))
        }
    }

    /// Implements ``TMPStore/putCard(_:audit:)``.
    public func putCard(_ card: CardRecord, audit: @Sendable (_ previous: CardRecord?) -> AuditEntry) async throws -> CardRecord? {
        try await write { db in
            if let other = try String.fetchOne(db, sql: "SELECT external_card_id FROM card WHERE pan_lookup_hash = ? AND external_card_id != ?", arguments: [card.panLookupHash, card.externalCardId]) {
                throw StoreError.duplicatePAN(existingCardId: other)
            }
            let previous = try firstRow(db.cachedStatement(sql: SQL.cardByExternalId), [card.externalCardId], CardRecord.init(row:))
            let audit = audit(previous)
            // The PAN's reference as the stored card decides it (see TMPStore.putCard).
            let retired = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM retired_pan_reference WHERE pan_unique_reference = ?)", arguments: [card.panUniqueReference]) ?? false
            let put = try CardRecord.replacing(previous, with: card, referenceIsRetired: retired)
            try db.execute(
                sql: """
                    INSERT INTO card (external_card_id, user_id, encrypted_pan, pan_lookup_hash, pan_last4, pan_unique_reference,
                        expiration, cardholder_name, network, product_title, art_id, status, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(external_card_id) DO UPDATE SET
                        user_id = excluded.user_id, encrypted_pan = excluded.encrypted_pan, pan_lookup_hash = excluded.pan_lookup_hash,
                        pan_last4 = excluded.pan_last4, pan_unique_reference = excluded.pan_unique_reference, expiration = excluded.expiration,
                        cardholder_name = excluded.cardholder_name, network = excluded.network, product_title = excluded.product_title,
                        art_id = excluded.art_id, updated_at = excluded.updated_at
                    """,
                arguments: [
                    put.externalCardId, put.userId, put.encryptedPAN, put.panLookupHash, put.panLast4, put.panUniqueReference,
                    put.expiration.text, put.cardholderName, put.network.rawValue, put.productTitle, put.artId, put.status.rawValue,
                    put.createdAt, put.updatedAt,
                ]
            )
            // Tokens follow the card's owner; those of a replaced PAN are at odds with it below.
            try db.execute(sql: "UPDATE token SET user_id = ? WHERE external_card_id = ?", arguments: [put.userId, put.externalCardId])
            if let previous, previous.panUniqueReference != put.panUniqueReference {
                try db.execute(
                    sql: "INSERT INTO retired_pan_reference (pan_unique_reference, external_card_id, retired_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    arguments: [previous.panUniqueReference, put.externalCardId, audit.at]
                )
                try db.execute(sql: AtOddsSQL.recompute(scope: "external_card_id = ?"), arguments: [audit.at, put.externalCardId])
            }
            try insertAudit(db, audit)
            return previous
        }
    }

    /// Implements ``TMPStore/setCardStatus(externalCardId:status:at:audit:)``.
    public func setCardStatus(externalCardId: String, status: CardStatus, at: Date, audit: @Sendable (_ previous: CardStatus) -> AuditEntry) async throws -> CardStatusUpdate {
        // SQLite has one writer at a time: nothing changes the card between this read and the update.
        try await write { db in
            guard let stored = try firstRow(db.cachedStatement(sql: SQL.cardByExternalId), [externalCardId], CardRecord.init(row:)) else {
                return .notFound
            }
            let (write, result) = CardStatusUpdate.resolve(stored, to: status, at: at)
            guard let after = write else { return result }
            try db.execute(sql: "UPDATE card SET status = ?, updated_at = ? WHERE external_card_id = ?", arguments: [after.status.rawValue, after.updatedAt, externalCardId])
            try db.execute(sql: AtOddsSQL.recompute(scope: "external_card_id = ?"), arguments: [at, externalCardId])
            try insertAudit(db, audit(stored.status))
            // Read back: the card exactly as a later read returns it (dates at the stored precision).
            let card = try firstRow(db.cachedStatement(sql: SQL.cardByExternalId), [externalCardId], CardRecord.init(row:))
            return .updated(previous: stored.status, card: card ?? after)
        }
    }

    // MARK: Tokens

    /// Implements ``TMPStore/token(reference:)``.
    public func token(reference: String) async throws -> TokenRecord? {
        try read { db in try firstRow(db.cachedStatement(sql: SQL.tokenByReference), [reference], TokenRecord.init(row:)) }
    }

    /// Implements ``TMPStore/tokens(externalCardId:)``.
    public func tokens(externalCardId: String) async throws -> [TokenRecord] {
        try read { db in
            try allRows(db.cachedStatement(sql: SQL.tokensByCard), [externalCardId], TokenRecord.init(row:))
        }
    }

    /// Implements ``TMPStore/tokens(references:ownedBy:)``.
    public func tokens(references: [String], ownedBy userId: String) async throws -> [TokenRecord] {
        guard !references.isEmpty else { return [] }
        return try read { db in try allRows(db.cachedStatement(sql: SQL.tokensOwned(count: references.count)), StatementArguments([userId] + references), TokenRecord.init(row:))
        }
    }

    /// Implements ``TMPStore/updateToken(reference:audit:_:)``.
    public func updateToken(reference: String, audit: AuditEntry, _ decide: @Sendable (TokenRecord, CardRecord?) -> TokenChange) async throws -> TokenUpdateResult {
        try await write { db in
            guard let before = try firstRow(db.cachedStatement(sql: SQL.tokenByReference), [reference], TokenRecord.init(row:)) else {
                return .notFound
            }
            let card = try Row.fetchOne(db, sql: "SELECT \(CardRecord.columns) FROM card WHERE external_card_id = ?", arguments: [before.externalCardId]).map(CardRecord.init(row:))
            let (write, result) = decide(before, card).resolve(before, at: audit.at)
            if let after = write {
                try db.execute(
                    sql: "UPDATE token SET status = ?, suspended_by = ?, updated_at = ?, pending_command = ?, block_suspension_first_sent_ms = ?, block_suspension_last_sent_ms = ? WHERE token_unique_reference = ?",
                    arguments: [
                        after.status.rawValue, after.suspendedBy?.rawValue, after.updatedAt, after.pendingCommand?.rawValue,
                        after.blockSuspensionsSent?.lowerBound.millisecondsSince1970, after.blockSuspensionsSent?.upperBound.millisecondsSince1970, reference,
                    ]
                )
                try db.execute(sql: AtOddsSQL.recompute(scope: "token_unique_reference = ?"), arguments: [audit.at, reference])
                try insertAudit(db, audit)
            }
            return result
        }
    }

    /// Implements ``TMPStore/applyTokenEvent(eventId:event:tokenReference:occurredAt:audit:_:)``.
    public func applyTokenEvent(eventId: String, event: TokenEventType, tokenReference: String, occurredAt: EventTime?, audit: AuditEntry, _ decide: @Sendable (TokenRecord?, CardRecord?) -> TokenEventEffect) async throws -> TokenEventApplication {
        try await write { db in
            let current = try firstRow(db.cachedStatement(sql: SQL.tokenByReference), [tokenReference], TokenRecord.init(row:))
            if let earlier = try Row.fetchOne(db, sql: "SELECT token_unique_reference, event, occurred_ms FROM token_event WHERE event_id = ?", arguments: [eventId]) {
                let use = TokenEventIdUse(tokenReference: earlier[0], event: earlier[1], occurredMilliseconds: earlier[2])
                return use.isSame(event, for: tokenReference, occurredAt: occurredAt) ? .duplicate(current) : .eventIdReused(tokenReference: use.tokenReference, event: use.event)
            }
            let card = try current.flatMap { token in
                try firstRow(db.cachedStatement(sql: SQL.cardByExternalId), [token.externalCardId], CardRecord.init(row:))
            }
            let result: TokenRecord
            switch decide(current, card).resolve(current, at: audit.at) {
            case .reject(let message):
                return .rejected(message)
            case .insert(let token, let owed):
                try db.execute(
                    sql: """
                        INSERT INTO token (token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status,
                            authorization_path, suspended_by, token_last4, created_at, updated_at, last_event_ms, pending_command,
                            block_suspension_first_sent_ms, block_suspension_last_sent_ms)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        token.tokenUniqueReference, token.externalCardId, token.panUniqueReference, token.userId, token.deviceType.rawValue,
                        token.status.rawValue, token.authorizationPath.rawValue, token.suspendedBy?.rawValue, token.tokenLast4, token.createdAt, token.updatedAt,
                        token.lastEventAt?.millisecondsSince1970, token.pendingCommand?.rawValue,
                        token.blockSuspensionsSent?.lowerBound.millisecondsSince1970, token.blockSuspensionsSent?.upperBound.millisecondsSince1970,
                    ]
                )
                // The owner as committed: the card may have changed hands since `token` was made.
                try db.execute(sql: "UPDATE token SET user_id = (SELECT user_id FROM card WHERE card.external_card_id = token.external_card_id) WHERE token_unique_reference = ?", arguments: [tokenReference])
                if let owed {
                    // Judged on that owner, in this transaction: the mark cannot be lost between two writes.
                    try db.execute(
                        sql: "UPDATE token SET pending_command = 'DEACTIVATE' WHERE token_unique_reference = ? AND status <> 'DEACTIVATED' AND pending_command IS NOT 'DEACTIVATE' AND user_id <> ?",
                        arguments: [tokenReference, owed.madeFor]
                    )
                    if db.changesCount > 0 { try insertAudit(db, owed.audit) }
                }
                result = try firstRow(db.cachedStatement(sql: SQL.tokenByReference), [tokenReference], TokenRecord.init(row:)) ?? token
            case .update(let token):
                try db.execute(
                    sql: "UPDATE token SET status = ?, suspended_by = ?, token_last4 = ?, updated_at = ?, last_event_ms = ?, pending_command = ?, block_suspension_first_sent_ms = ?, block_suspension_last_sent_ms = ? WHERE token_unique_reference = ?",
                    arguments: [
                        token.status.rawValue, token.suspendedBy?.rawValue, token.tokenLast4, token.updatedAt, token.lastEventAt?.millisecondsSince1970,
                        token.pendingCommand?.rawValue, token.blockSuspensionsSent?.lowerBound.millisecondsSince1970, token.blockSuspensionsSent?.upperBound.millisecondsSince1970, tokenReference,
                    ]
                )
                result = token
            case .stale(let stored, let fillsIn):
                try db.execute(sql: "INSERT INTO token_event (event_id, token_unique_reference, received_at, event, occurred_ms) VALUES (?, ?, ?, ?, ?)", arguments: [eventId, tokenReference, audit.at, event.rawValue, occurredAt?.millisecondsSince1970])
                if let fillsIn {
                    try db.execute(sql: "UPDATE token SET token_last4 = ?, updated_at = ? WHERE token_unique_reference = ? AND token_last4 IS NULL", arguments: [fillsIn, stored.updatedAt, tokenReference])
                    try insertAudit(db, audit.staleFillingInTokenLast4)
                }
                return .stale(stored)
            }
            try db.execute(sql: AtOddsSQL.recompute(scope: "token_unique_reference = ?"), arguments: [audit.at, tokenReference])
            try db.execute(sql: "INSERT INTO token_event (event_id, token_unique_reference, received_at, event, occurred_ms) VALUES (?, ?, ?, ?, ?)", arguments: [eventId, tokenReference, audit.at, event.rawValue, occurredAt?.millisecondsSince1970])
            try insertAudit(db, audit)
            return .applied(result)
        }
    }

    /// Implements ``TMPStore/tokensAtOddsWithTheirCard(since:limit:)``.
    public func tokensAtOddsWithTheirCard(since cutoff: Date, limit: Int) async throws -> [TokenRecord] {
        guard limit > 0 else { return [] }
        return try read { db in
            try allRows(db.cachedStatement(sql: SQL.tokensAtOdds), [cutoff, limit], TokenRecord.init(row:))
        }
    }

    /// Implements ``TMPStore/historyCount(_:before:)``.
    public func historyCount(_ table: HistoryTable, before cutoff: Date) async throws -> Int {
        try await readInPool { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.rawValue) WHERE \(table.timeColumn) < ?", arguments: [SQLiteTimestamp(cutoff)]) ?? 0
        }
    }

    /// Implements ``TMPStore/deleteHistory(_:before:limit:after:)``.
    public func deleteHistory(_ table: HistoryTable, before cutoff: Date, limit: Int, after position: HistoryPosition?) async throws -> HistoryBatch {
        guard limit > 0 else { return HistoryBatch(deleted: 0, next: position) }
        let start = position.flatMap { Int64($0.value) } ?? 0
        // Found on a reader (WAL: the servers' writes go on meanwhile), from `position` on in
        // rowid order, which is the order rows were appended in.
        let found = try await readInPool { db in
            try Int64.fetchAll(
                db, sql: "SELECT rowid FROM \(table.rawValue) WHERE rowid > ? AND \(table.timeColumn) < ? ORDER BY rowid LIMIT ?",
                arguments: [start, SQLiteTimestamp(cutoff), limit]
            )
        }
        guard let first = found.first, let last = found.last else { return HistoryBatch(deleted: 0, next: nil) }
        // The write deletes by rowid range, a B-tree range: only what was found, since rows
        // added meanwhile are new (not before `cutoff`) whatever rowid they got.
        let deleted = try await write { db in
            try db.execute(
                sql: "DELETE FROM \(table.rawValue) WHERE rowid BETWEEN ? AND ? AND \(table.timeColumn) < ?",
                arguments: [first, last, SQLiteTimestamp(cutoff)]
            )
            return db.changesCount
        }
        return HistoryBatch(deleted: deleted, next: found.count < limit ? nil : HistoryPosition(String(last)))
    }

    /// Implements ``TMPStore/claimTokensAtOddsWithTheirCard(since:limit:at:)``.
    public func claimTokensAtOddsWithTheirCard(since cutoff: Date, limit: Int, at now: Date) async throws -> [TokenRecord] {
        guard limit > 0 else { return [] }
        return try await write { db in
            let tokens = try allRows(db.cachedStatement(sql: SQL.tokensAtOdds), [cutoff, limit], TokenRecord.init(row:))
            let restart = try db.cachedStatement(sql: "UPDATE token SET at_odds_since = ? WHERE token_unique_reference = ?")
            for token in tokens {
                try restart.execute(arguments: [now, token.tokenUniqueReference])
            }
            return tokens
        }
    }

    /// Implements ``TMPStore/takeTokenCommandLease(reference:holder:for:)`` (on this process's
    /// clock: instances sharing a SQLite file share its machine).
    public func takeTokenCommandLease(reference: String, holder: String, for duration: Duration) async throws -> Bool {
        try await write { db in
            // Taken when the write runs, not when it was queued: a wait for the writer must
            // not shorten the lease, nor judge another's expiry by a time already past.
            let now = Date()
            let expiry = now.addingTimeInterval(duration.seconds)
            try db.execute(
                sql: """
                    INSERT INTO token_command_lease (token_unique_reference, holder, expires_at) VALUES (?, ?, ?)
                    ON CONFLICT (token_unique_reference) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                    WHERE token_command_lease.holder = excluded.holder OR token_command_lease.expires_at <= ?
                    """,
                arguments: [reference, holder, expiry, now]
            )
            return db.changesCount == 1
        }
    }

    /// Implements ``TMPStore/releaseTokenCommandLease(reference:holder:)``.
    public func releaseTokenCommandLease(reference: String, holder: String) async throws {
        try await write { db in
            try db.execute(sql: "DELETE FROM token_command_lease WHERE token_unique_reference = ? AND holder = ?", arguments: [reference, holder])
        }
    }

    /// Implements ``TMPStore/restartAtOddsClock(reference:at:)``.
    public func restartAtOddsClock(reference: String, at time: Date) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE token SET at_odds_since = ? WHERE token_unique_reference = ? AND at_odds_since IS NOT NULL", arguments: [time, reference])
        }
    }

    /// Implements ``TMPStore/noteBlockSuspensionSent(reference:at:)``.
    public func noteBlockSuspensionSent(reference: String, at time: EventTime) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE token SET block_suspension_first_sent_ms = min(COALESCE(block_suspension_first_sent_ms, ?1), ?1),
                        block_suspension_last_sent_ms = max(COALESCE(block_suspension_last_sent_ms, ?1), ?1)
                    WHERE token_unique_reference = ?2 AND status = 'ACTIVE'
                    """,
                arguments: [time.millisecondsSince1970, reference]
            )
        }
    }

    /// Implements ``TMPStore/replaceBlockSuspensionNote(reference:with:ifItIs:whileStatusIs:)``.
    public func replaceBlockSuspensionNote(reference: String, with note: ClosedRange<EventTime>?, ifItIs expected: ClosedRange<EventTime>?, whileStatusIs status: TokenStatus?) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE token SET block_suspension_first_sent_ms = ?, block_suspension_last_sent_ms = ?
                    WHERE token_unique_reference = ? AND block_suspension_first_sent_ms IS ? AND block_suspension_last_sent_ms IS ?
                        AND (? IS NULL OR status = ?)
                    """,
                arguments: [
                    note?.lowerBound.millisecondsSince1970, note?.upperBound.millisecondsSince1970, reference,
                    expected?.lowerBound.millisecondsSince1970, expected?.upperBound.millisecondsSince1970, status?.rawValue, status?.rawValue,
                ]
            )
        }
    }

    /// Implements ``TMPStore/clearBlockSuspensionNote(reference:)``.
    public func clearBlockSuspensionNote(reference: String) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE token SET block_suspension_first_sent_ms = NULL, block_suspension_last_sent_ms = NULL WHERE token_unique_reference = ?", arguments: [reference])
        }
    }

    // MARK: Provisioning attempts and decisions

    /// Implements ``TMPStore/recordProvisioningAttempt(_:)``.
    public func recordProvisioningAttempt(_ attempt: ProvisioningAttempt) async throws {
        try await commitInGroup { db in
            try db.cachedStatement(
                sql: """
                    INSERT INTO provisioning_attempt (activation_data_id, external_card_id, user_id, device_type, nonce_hash, leaf_fingerprint, created_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(
                arguments: [attempt.activationDataId, attempt.externalCardId, attempt.userId, attempt.deviceType.rawValue, attempt.nonceHash, attempt.leafFingerprint, SQLiteTimestamp(attempt.createdAt), SQLiteTimestamp(attempt.expiresAt)]
            )
        }
    }

    /// Implements ``TMPStore/provisioningAttempt(activationDataId:)``.
    public func provisioningAttempt(activationDataId: String) async throws -> ProvisioningAttempt? {
        try read { db in
            try firstRow(db.cachedStatement(sql: "SELECT * FROM provisioning_attempt WHERE activation_data_id = ?"), [activationDataId], ProvisioningAttempt.init(row:))
        }
    }

    /// Implements ``TMPStore/recordTokenizationDecision(_:consumingActivationData:)``.
    public func recordTokenizationDecision(_ decision: TokenizationDecisionRecord, consumingActivationData id: String?, decidedOn card: DecidedCard?) async throws -> TokenizationDecisionRecording {
        try await commitInGroup { db in
            if let card {
                let holds = try Bool.fetchOne(
                    db, sql: "SELECT EXISTS (SELECT 1 FROM card WHERE external_card_id = ? AND status = 'ACTIVE' AND pan_unique_reference = ? AND user_id = ?)",
                    arguments: [card.externalCardId, card.panUniqueReference, card.userId]
                ) ?? false
                guard holds else { return .cardChanged }
            }
            if let id {
                try db.execute(sql: "INSERT INTO activation_data_use (activation_data_id, used_at) VALUES (?, ?) ON CONFLICT DO NOTHING", arguments: [id, decision.decidedAt])
                guard db.changesCount == 1 else { return .activationDataUsedBefore }
            }
            try db.execute(
                sql: "INSERT INTO tokenization_decision (request_id, pan_unique_reference, device_type, decision, reason, decided_at, activation_data_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                arguments: [decision.requestId, decision.panUniqueReference, decision.deviceType.rawValue, decision.decision.rawValue, decision.reason, decision.decidedAt, id]
            )
            return .recorded
        }
    }

    /// Implements ``TMPStore/tokenizationDecision(requestId:)``.
    public func tokenizationDecision(requestId: String) async throws -> TokenizationDecisionRecord? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM tokenization_decision WHERE request_id = ? ORDER BY id DESC LIMIT 1", arguments: [requestId]).map(Self.decision(row:))
        }
    }

    /// Implements ``TMPStore/tokenizationDecision(requestId:usingUp:)``.
    public func tokenizationDecision(requestId: String, usingUp activationDataId: String) async throws -> TokenizationDecisionRecord? {
        try read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM tokenization_decision WHERE request_id = ? AND activation_data_id = ? ORDER BY id DESC LIMIT 1", arguments: [requestId, activationDataId]
            ).map(Self.decision(row:))
        }
    }

    /// Implements ``TMPStore/latestTokenizationDecision(panUniqueReference:deviceType:)``.
    public func latestTokenizationDecision(panUniqueReference: String, deviceType: DeviceType) async throws -> TokenizationDecisionRecord? {
        try latestDecision(panUniqueReference: panUniqueReference, deviceType: deviceType, condition: "")
    }

    /// Implements ``TMPStore/latestTokenizingDecision(panUniqueReference:deviceType:)``.
    public func latestTokenizingDecision(panUniqueReference: String, deviceType: DeviceType) async throws -> TokenizationDecisionRecord? {
        try latestDecision(panUniqueReference: panUniqueReference, deviceType: deviceType, condition: "AND decision <> 'DECLINED'")
    }

    /// The newest decision for a card and device that meets `condition` (SQL, no arguments).
    private func latestDecision(panUniqueReference: String, deviceType: DeviceType, condition: String) throws -> TokenizationDecisionRecord? {
        try read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT * FROM tokenization_decision WHERE pan_unique_reference = ? AND device_type = ? \(condition) ORDER BY decided_at DESC, id DESC LIMIT 1",
                arguments: [panUniqueReference, deviceType.rawValue]
            ).map(Self.decision(row:))
        }
    }

    private static func decision(row: Row) -> TokenizationDecisionRecord {
        TokenizationDecisionRecord(
            requestId: row["request_id"], panUniqueReference: row["pan_unique_reference"], deviceType: DeviceType(rawValue: row["device_type"]) ?? .phone,
            decision: TokenizationDecision(rawValue: row["decision"]) ?? .declined, reason: row["reason"], decidedAt: row["decided_at"],
            activationDataId: row["activation_data_id"]
        )
    }

    // MARK: Card art and audit

    /// Implements ``TMPStore/putCardArt(_:audit:)``.
    public func putCardArt(_ art: CardArtRecord, audit: AuditEntry) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO card_art (art_id, content_type, data, updated_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT(art_id) DO UPDATE SET content_type = excluded.content_type, data = excluded.data, updated_at = excluded.updated_at
                    """,
                arguments: [art.artId, art.contentType, art.data, art.updatedAt]
            )
            try insertAudit(db, audit)
        }
    }

    /// Implements ``TMPStore/cardArt(id:)``.
    public func cardArt(id: String) async throws -> CardArtRecord? {
        try read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM card_art WHERE art_id = ?"), arguments: [id]).map { row in
                CardArtRecord(artId: row["art_id"], contentType: row["content_type"], data: row["data"], updatedAt: row["updated_at"])
            }
        }
    }

    /// Implements ``TMPStore/cardArtVersion(id:)``. SQLite's `length` of a blob reads the
    /// size from the record, not the file.
    public func cardArtVersion(id: String) async throws -> CardArtVersion? {
        try read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT content_type, length(data) AS size, updated_at FROM card_art WHERE art_id = ?"), arguments: [id]).map { row in
                CardArtVersion(contentType: row["content_type"], byteCount: row["size"], updatedAt: row["updated_at"])
            }
        }
    }

    /// Implements ``TMPStore/anyCard()``.
    public func anyCard() async throws -> CardRecord? {
        try read { db in try firstRow(db.cachedStatement(sql: "SELECT \(CardRecord.columns) FROM card LIMIT 1"), [], CardRecord.init(row:)) }
    }

    /// Implements ``TMPStore/recordAudit(_:)``.
    public func recordAudit(_ entry: AuditEntry) async throws {
        try await write { db in try insertAudit(db, entry) }
    }

    /// Implements ``TMPStore/countCards(notEncryptedUnder:)``.
    public func countCards(notEncryptedUnder keyID: String) async throws -> Int {
        let prefix = EncryptedPAN.storedPrefix(keyID: keyID)
        return try read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM card WHERE substr(encrypted_pan, 1, length(?)) <> ?", arguments: [prefix, prefix]) ?? 0
        }
    }

    /// Implements ``TMPStore/cards(notEncryptedUnder:after:limit:)``.
    public func cards(notEncryptedUnder keyID: String, after externalCardId: String?, limit: Int) async throws -> [CardRecord] {
        guard limit > 0 else { return [] }
        let prefix = EncryptedPAN.storedPrefix(keyID: keyID)
        return try read { db in
            try allRows(
                db.cachedStatement(sql: "SELECT \(CardRecord.columns) FROM card WHERE external_card_id > ? AND substr(encrypted_pan, 1, length(?)) <> ? ORDER BY external_card_id LIMIT ?"),
                [externalCardId ?? "", prefix, prefix, limit], CardRecord.init(row:)
            )
        }
    }

    /// Implements ``TMPStore/replaceEncryptedPANs(_:)``.
    public func replaceEncryptedPANs(_ changes: [EncryptedPANChange]) async throws -> [String] {
        guard !changes.isEmpty else { return [] }
        return try await write { db in
            var changed: [String] = []
            for change in changes {
                try db.execute(sql: "UPDATE card SET encrypted_pan = ? WHERE external_card_id = ? AND encrypted_pan = ?", arguments: [change.replacement, change.externalCardId, change.expected])
                guard db.changesCount == 1 else { continue }
                try insertAudit(db, change.audit)
                changed.append(change.externalCardId)
            }
            return changed
        }
    }

    /// Implements ``TMPStore/auditEntries(subject:)``.
    public func auditEntries(subject: String) async throws -> [AuditEntry] {
        // Two statements: GRDB's read transaction gives them one snapshot.
        try await readInPool { db in
            let events = try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM audit_event WHERE subject = ? ORDER BY id"), arguments: [subject]).map { row in
                AuditEntry(at: row["at"], actor: row["actor"], action: row["action"], subject: row["subject"], detail: row["detail"])
            }
            guard subject.hasPrefix("card:") else { return events }
            let seals = try allRows(db.cachedStatement(sql: "SELECT * FROM provisioning_attempt WHERE external_card_id = ? ORDER BY created_at, activation_data_id"), [String(subject.dropFirst("card:".count))], ProvisioningAttempt.init(row:))
            return AuditEntry.trail(events: events, seals: seals)
        }
    }

    private func insertAudit(_ db: Database, _ entry: AuditEntry) throws {
        try db.cachedStatement(sql: "INSERT INTO audit_event (at, actor, action, subject, detail) VALUES (?, ?, ?, ?, ?)").execute(
            arguments: [SQLiteTimestamp(entry.at), entry.actor, entry.action, entry.subject, entry.detail]
        )
    }
}

/// The first row of `statement`, decoded where it lies.
///
/// GRDB's `Row.fetchOne` copies the row into a new `Row` (every column boxed) before the
/// caller reads it; a cursor's row reads straight from the statement, so decoding it in place
/// saves that copy on every hot read.
private func firstRow<T>(_ statement: Statement, _ arguments: StatementArguments, _ decode: (Row) throws -> T) throws -> T? {
    let rows = try Row.fetchCursor(statement, arguments: arguments)
    return try rows.next().map(decode)
}

/// Every row of `statement`, each decoded where it lies (see ``firstRow(_:_:_:)``).
private func allRows<T>(_ statement: Statement, _ arguments: StatementArguments, _ decode: (Row) throws -> T) throws -> [T] {
    let rows = try Row.fetchCursor(statement, arguments: arguments)
    var decoded: [T] = []
    while let row = try rows.next() { decoded.append(try decode(row)) }
    return decoded
}

/// The store's frequent statements, built once: interpolating the column lists on every call
/// made a new string to hash for GRDB's statement cache each time.
private enum SQL {
    static let cardByExternalId = "SELECT \(CardRecord.columns) FROM card WHERE external_card_id = ?"
    static let cardByExternalIdAndOwner = "SELECT \(CardRecord.columns) FROM card WHERE external_card_id = ? AND user_id = ?"
    static let cardByLookupHash = "SELECT \(CardRecord.columns) FROM card WHERE pan_lookup_hash = ?"
    static let cardByUniqueReference = "SELECT \(CardRecord.columns) FROM card WHERE pan_unique_reference = ?"
    static let cardsByUser = "SELECT \(CardRecord.columns) FROM card WHERE user_id = ? ORDER BY external_card_id"
    static let tokenByReference = "SELECT \(TokenRecord.columns) FROM token WHERE token_unique_reference = ?"
    static let tokensAtOdds = "SELECT \(TokenRecord.columns) FROM token WHERE at_odds_since <= ? ORDER BY at_odds_since, token_unique_reference LIMIT ?"
    static let tokensByCard = "SELECT \(TokenRecord.columns) FROM token WHERE external_card_id = ? ORDER BY created_at, token_unique_reference"

    /// A caller's tokens among `count` references (statements for up to
    /// `TokenSearchRequest.maximumReferences` are built once; more are built on demand).
    static func tokensOwned(count: Int) -> String {
        count < tokensOwnedByCount.count ? tokensOwnedByCount[count] : tokensOwnedSQL(count: count)
    }

    private static let tokensOwnedByCount = (0...TokenSearchRequest.maximumReferences).map(tokensOwnedSQL(count:))

    private static func tokensOwnedSQL(count: Int) -> String {
        "SELECT \(TokenRecord.columns) FROM token WHERE user_id = ? AND token_unique_reference IN (\(databaseQuestionMarks(count: count))) ORDER BY token_unique_reference"
    }
}

extension CardRecord {
    /// The selected columns, in the order ``init(row:)`` reads them by position (cheaper than
    /// GRDB's case-insensitive lookup by name on every column of every row).
    static let columns = """
        external_card_id, user_id, encrypted_pan, pan_lookup_hash, pan_last4, pan_unique_reference, expiration, \
        cardholder_name, network, product_title, art_id, status, created_at, updated_at
        """

    init(row: Row) throws {
        self.init(
            externalCardId: row[0], userId: row[1], encryptedPAN: row[2], panLookupHash: row[3],
            panLast4: row[4], panUniqueReference: row[5], expiration: try CardExpiration(row[6] as String),
            cardholderName: row[7], network: CardNetwork(rawValue: row[8]) ?? .visa, productTitle: row[9],
            artId: row[10], status: CardStatus(rawValue: row[11]) ?? .blocked,
            createdAt: (row[12] as SQLiteTimestamp).date, updatedAt: (row[13] as SQLiteTimestamp).date
        )
    }
}

extension ProvisioningAttempt {
    /// Reads a `SELECT *` row of `provisioning_attempt`.
    init(row: Row) {
        self.init(
            activationDataId: row["activation_data_id"], externalCardId: row["external_card_id"], userId: row["user_id"],
            deviceType: DeviceType(rawValue: row["device_type"]) ?? .phone, nonceHash: row["nonce_hash"], leafFingerprint: row["leaf_fingerprint"],
            createdAt: row["created_at"], expiresAt: row["expires_at"]
        )
    }
}

extension TokenRecord {
    /// The selected columns, in the order ``init(row:)`` reads them by position.
    static let columns = """
        token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status, \
        authorization_path, suspended_by, token_last4, created_at, updated_at, last_event_ms, pending_command, block_suspension_first_sent_ms, block_suspension_last_sent_ms
        """

    init(row: Row) {
        self.init(
            tokenUniqueReference: row[0], externalCardId: row[1], panUniqueReference: row[2],
            userId: row[3], deviceType: DeviceType(rawValue: row[4]) ?? .phone, status: TokenStatus(rawValue: row[5]) ?? .deactivated,
            authorizationPath: AuthorizationPath(rawValue: row[6]) ?? .yellow,
            suspendedBy: (row[7] as String?).flatMap(SuspensionSource.init(rawValue:)), tokenLast4: row[8],
            createdAt: (row[9] as SQLiteTimestamp).date, updatedAt: (row[10] as SQLiteTimestamp).date,
            lastEventAt: (row[11] as Int64?).map(EventTime.init(millisecondsSince1970:)),
            pendingCommand: (row[12] as String?).flatMap(PendingTokenCommand.init(rawValue:)),
            blockSuspensionsSent: TokenRecord.note(first: row[13], last: row[14])
        )
    }
}

/// Read-only connections to a WAL database file, handed out one caller at a time.
///
/// Each is a GRDB `DatabaseQueue` opened read-only on the file the store's pool writes; in WAL
/// mode it sees every committed transaction and never waits for the writer.
final class ReadConnections: Sendable {
    private let free: NIOLockedValueBox<[DatabaseQueue]>

    init(path: String, count: Int, busyTimeout: Duration) throws {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(busyTimeout.seconds)
        free = NIOLockedValueBox(try (0..<count).map { _ in try DatabaseQueue(path: path, configuration: configuration) })
    }

    /// A free connection, or nil when all are in use.
    func take() -> DatabaseQueue? { free.withLockedValue { $0.popLast() } }

    /// Returns a connection taken with ``take()``.
    func give(back connection: DatabaseQueue) { free.withLockedValue { $0.append(connection) } }

    /// Connections not in use (tests).
    var available: Int { free.withLockedValue { $0.count } }

    /// Closes the connections not in use (all of them once no read runs) and takes them out.
    func close() {
        let connections = free.withLockedValue { free in
            defer { free = [] }
            return free
        }
        for connection in connections { try? connection.close() }
    }
}
