import Foundation
import GRDB
import ProvisioningModels

/// ``TMPStore`` on SQLite through GRDB: WAL for a file database, named migrations, and one
/// write transaction per state change (with its audit entry).
public struct SQLiteStore: TMPStore {
    private let writer: any DatabaseWriter

    /// Opens (creating if needed) a database file in WAL mode.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        writer = try DatabasePool(path: path, configuration: configuration)
    }

    /// A private in-memory database (tests).
    public static func inMemory() throws -> SQLiteStore {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA foreign_keys = ON") }
        return SQLiteStore(writer: try DatabaseQueue(configuration: configuration))
    }

    private init(writer: any DatabaseWriter) {
        self.writer = writer
    }

    /// Applies the named migrations; returns those this call applied.
    @discardableResult
    public func migrate() async throws -> [String] {
        let migrator = SQLiteStore.migrator
        let before = try await writer.read { db in try migrator.appliedIdentifiers(db) }
        try migrator.migrate(writer)
        let after = try await writer.read { db in try migrator.appliedIdentifiers(db) }
        return migrator.migrations.filter { after.contains($0) && !before.contains($0) }
    }

    /// The named migrations not yet applied.
    public func pendingMigrations() async throws -> [String] {
        let migrator = SQLiteStore.migrator
        let applied = try await writer.read { db in try migrator.appliedIdentifiers(db) }
        return migrator.migrations.filter { !applied.contains($0) }
    }

    /// Runs a trivial query.
    public func ping() async throws {
        _ = try await writer.read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    // MARK: Cards

    public func card(externalCardId: String) async throws -> CardRecord? {
        try await writer.read { db in try Row.fetchOne(db, sql: "SELECT * FROM card WHERE external_card_id = ?", arguments: [externalCardId]).map(CardRecord.init(row:)) }
    }

    public func card(panLookupHash: String) async throws -> CardRecord? {
        try await writer.read { db in try Row.fetchOne(db, sql: "SELECT * FROM card WHERE pan_lookup_hash = ?", arguments: [panLookupHash]).map(CardRecord.init(row:)) }
    }

    public func card(panUniqueReference: String) async throws -> CardRecord? {
        try await writer.read { db in try Row.fetchOne(db, sql: "SELECT * FROM card WHERE pan_unique_reference = ?", arguments: [panUniqueReference]).map(CardRecord.init(row:)) }
    }

    public func cards(ownedBy userId: String) async throws -> [CardRecord] {
        try await writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM card WHERE user_id = ? ORDER BY external_card_id", arguments: [userId]).map(CardRecord.init(row:))
        }
    }

    public func putCard(_ card: CardRecord, audit: AuditEntry) async throws -> CardRecord? {
        try await writer.write { db in
            if let other = try String.fetchOne(db, sql: "SELECT external_card_id FROM card WHERE pan_lookup_hash = ? AND external_card_id != ?", arguments: [card.panLookupHash, card.externalCardId]) {
                throw StoreError.duplicatePAN(existingCardId: other)
            }
            let previous = try Row.fetchOne(db, sql: "SELECT * FROM card WHERE external_card_id = ?", arguments: [card.externalCardId]).map(CardRecord.init(row:))
            try db.execute(
                sql: """
                    INSERT INTO card (external_card_id, user_id, encrypted_pan, pan_lookup_hash, pan_last4, pan_unique_reference,
                        expiration, cardholder_name, network, product_title, art_id, status, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(external_card_id) DO UPDATE SET
                        user_id = excluded.user_id, encrypted_pan = excluded.encrypted_pan, pan_lookup_hash = excluded.pan_lookup_hash,
                        pan_last4 = excluded.pan_last4, pan_unique_reference = excluded.pan_unique_reference, expiration = excluded.expiration,
                        cardholder_name = excluded.cardholder_name, network = excluded.network, product_title = excluded.product_title,
                        art_id = excluded.art_id, status = excluded.status, updated_at = excluded.updated_at
                    """,
                arguments: [
                    card.externalCardId, card.userId, card.encryptedPAN, card.panLookupHash, card.panLast4, card.panUniqueReference,
                    card.expiration.text, card.cardholderName, card.network.rawValue, card.productTitle, card.artId, card.status.rawValue,
                    card.createdAt, card.updatedAt,
                ]
            )
            // Tokens follow the card's owner, and die with the PAN they were made for.
            try db.execute(sql: "UPDATE token SET user_id = ? WHERE external_card_id = ?", arguments: [card.userId, card.externalCardId])
            if let previous, previous.panUniqueReference != card.panUniqueReference {
                let live = try String.fetchAll(db, sql: "SELECT token_unique_reference FROM token WHERE external_card_id = ? AND status != 'DEACTIVATED'", arguments: [card.externalCardId])
                try db.execute(
                    sql: "UPDATE token SET status = 'DEACTIVATED', suspended_by = NULL, updated_at = ? WHERE external_card_id = ? AND status != 'DEACTIVATED'",
                    arguments: [card.updatedAt, card.externalCardId]
                )
                for reference in live {
                    try insertAudit(db, AuditEntry(at: audit.at, actor: audit.actor, action: "token.deactivate", subject: "token:\(reference)", detail: "card replaced with a different PAN"))
                }
            }
            try insertAudit(db, audit)
            return previous
        }
    }

    public func setCardStatus(externalCardId: String, status: CardStatus, at: Date, audit: AuditEntry) async throws -> CardRecord? {
        try await writer.write { db in
            try db.execute(sql: "UPDATE card SET status = ?, updated_at = ? WHERE external_card_id = ?", arguments: [status.rawValue, at, externalCardId])
            guard db.changesCount > 0 else { return nil }
            try insertAudit(db, audit)
            return try Row.fetchOne(db, sql: "SELECT * FROM card WHERE external_card_id = ?", arguments: [externalCardId]).map(CardRecord.init(row:))
        }
    }

    // MARK: Tokens

    public func token(reference: String) async throws -> TokenRecord? {
        try await writer.read { db in try Row.fetchOne(db, sql: "SELECT * FROM token WHERE token_unique_reference = ?", arguments: [reference]).map(TokenRecord.init(row:)) }
    }

    public func tokens(externalCardId: String) async throws -> [TokenRecord] {
        try await writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM token WHERE external_card_id = ? ORDER BY created_at, token_unique_reference", arguments: [externalCardId]).map(TokenRecord.init(row:))
        }
    }

    public func tokens(references: [String], ownedBy userId: String) async throws -> [TokenRecord] {
        guard !references.isEmpty else { return [] }
        return try await writer.read { db in
            let placeholders = databaseQuestionMarks(count: references.count)
            return try Row.fetchAll(
                db,
                sql: "SELECT * FROM token WHERE user_id = ? AND token_unique_reference IN (\(placeholders)) ORDER BY token_unique_reference",
                arguments: StatementArguments([userId] + references)
            ).map(TokenRecord.init(row:))
        }
    }

    public func updateToken(reference: String, audit: AuditEntry, _ decide: @Sendable (TokenRecord, CardRecord?) -> TokenChange) async throws -> TokenUpdateResult {
        try await writer.write { db in
            guard let before = try Row.fetchOne(db, sql: "SELECT * FROM token WHERE token_unique_reference = ?", arguments: [reference]).map(TokenRecord.init(row:)) else {
                return .notFound
            }
            let card = try Row.fetchOne(db, sql: "SELECT * FROM card WHERE external_card_id = ?", arguments: [before.externalCardId]).map(CardRecord.init(row:))
            let (write, result) = decide(before, card).resolve(before, at: audit.at)
            if let after = write {
                try db.execute(
                    sql: "UPDATE token SET status = ?, suspended_by = ?, updated_at = ? WHERE token_unique_reference = ?",
                    arguments: [after.status.rawValue, after.suspendedBy?.rawValue, after.updatedAt, reference]
                )
                try insertAudit(db, audit)
            }
            return result
        }
    }

    public func applyTokenEvent(eventId: String, tokenReference: String, audit: AuditEntry, _ decide: @Sendable (TokenRecord?) -> TokenEventEffect) async throws -> TokenEventApplication {
        try await writer.write { db in
            let current = try Row.fetchOne(db, sql: "SELECT * FROM token WHERE token_unique_reference = ?", arguments: [tokenReference]).map(TokenRecord.init(row:))
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM token_event WHERE event_id = ?", arguments: [eventId]) != nil {
                return .duplicate(current)
            }
            let result: TokenRecord
            switch decide(current).resolve(current, at: audit.at) {
            case .reject(let message):
                return .rejected(message)
            case .insert(let token):
                try db.execute(
                    sql: """
                        INSERT INTO token (token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status,
                            authorization_path, suspended_by, token_last4, created_at, updated_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        token.tokenUniqueReference, token.externalCardId, token.panUniqueReference, token.userId, token.deviceType.rawValue,
                        token.status.rawValue, token.authorizationPath.rawValue, token.suspendedBy?.rawValue, token.tokenLast4, token.createdAt, token.updatedAt,
                    ]
                )
                result = token
            case .update(let token):
                try db.execute(
                    sql: "UPDATE token SET status = ?, suspended_by = ?, token_last4 = ?, updated_at = ? WHERE token_unique_reference = ?",
                    arguments: [token.status.rawValue, token.suspendedBy?.rawValue, token.tokenLast4, token.updatedAt, tokenReference]
                )
                result = token
            }
            try db.execute(sql: "INSERT INTO token_event (event_id, token_unique_reference, received_at) VALUES (?, ?, ?)", arguments: [eventId, tokenReference, audit.at])
            try insertAudit(db, audit)
            return .applied(result)
        }
    }

    // MARK: Provisioning attempts and decisions

    public func recordProvisioningAttempt(_ attempt: ProvisioningAttempt) async throws {
        try await writer.write { db in
            try db.execute(
                sql: """
                    INSERT INTO provisioning_attempt (activation_data_id, external_card_id, user_id, device_type, nonce_hash, leaf_fingerprint, created_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [attempt.activationDataId, attempt.externalCardId, attempt.userId, attempt.deviceType.rawValue, attempt.nonceHash, attempt.leafFingerprint, attempt.createdAt, attempt.expiresAt]
            )
            try insertAudit(db, AuditEntry(at: attempt.createdAt, actor: "user:\(attempt.userId)", action: "card.seal", subject: "card:\(attempt.externalCardId)", detail: "sealed for \(attempt.deviceType.rawValue); leaf \(attempt.leafFingerprint.prefix(16))"))
        }
    }

    public func provisioningAttempt(activationDataId: String) async throws -> ProvisioningAttempt? {
        try await writer.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM provisioning_attempt WHERE activation_data_id = ?", arguments: [activationDataId]).map { row in
                ProvisioningAttempt(
                    activationDataId: row["activation_data_id"], externalCardId: row["external_card_id"], userId: row["user_id"],
                    deviceType: DeviceType(rawValue: row["device_type"]) ?? .phone, nonceHash: row["nonce_hash"], leafFingerprint: row["leaf_fingerprint"],
                    createdAt: row["created_at"], expiresAt: row["expires_at"]
                )
            }
        }
    }

    public func consumeActivationData(id: String, at: Date) async throws -> Bool {
        try await writer.write { db in
            try db.execute(sql: "INSERT INTO activation_data_use (activation_data_id, used_at) VALUES (?, ?) ON CONFLICT DO NOTHING", arguments: [id, at])
            return db.changesCount == 1
        }
    }

    public func recordTokenizationDecision(_ decision: TokenizationDecisionRecord) async throws {
        try await writer.write { db in
            try db.execute(
                sql: "INSERT INTO tokenization_decision (request_id, pan_unique_reference, device_type, decision, reason, decided_at) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [decision.requestId, decision.panUniqueReference, decision.deviceType.rawValue, decision.decision.rawValue, decision.reason, decision.decidedAt]
            )
        }
    }

    public func latestTokenizationDecision(panUniqueReference: String, deviceType: DeviceType) async throws -> TokenizationDecisionRecord? {
        try await writer.read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT * FROM tokenization_decision WHERE pan_unique_reference = ? AND device_type = ? ORDER BY decided_at DESC, id DESC LIMIT 1",
                arguments: [panUniqueReference, deviceType.rawValue]
            ).map { row in
                TokenizationDecisionRecord(
                    requestId: row["request_id"], panUniqueReference: row["pan_unique_reference"], deviceType: DeviceType(rawValue: row["device_type"]) ?? .phone,
                    decision: TokenizationDecision(rawValue: row["decision"]) ?? .declined, reason: row["reason"], decidedAt: row["decided_at"]
                )
            }
        }
    }

    // MARK: Card art and audit

    public func putCardArt(_ art: CardArtRecord, audit: AuditEntry) async throws {
        try await writer.write { db in
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

    public func cardArt(id: String) async throws -> CardArtRecord? {
        try await writer.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM card_art WHERE art_id = ?", arguments: [id]).map { row in
                CardArtRecord(artId: row["art_id"], contentType: row["content_type"], data: row["data"], updatedAt: row["updated_at"])
            }
        }
    }

    public func auditEntries(subject: String) async throws -> [AuditEntry] {
        try await writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM audit_event WHERE subject = ? ORDER BY id", arguments: [subject]).map { row in
                AuditEntry(at: row["at"], actor: row["actor"], action: row["action"], subject: row["subject"], detail: row["detail"])
            }
        }
    }

    private func insertAudit(_ db: Database, _ entry: AuditEntry) throws {
        try db.execute(
            sql: "INSERT INTO audit_event (at, actor, action, subject, detail) VALUES (?, ?, ?, ?, ?)",
            arguments: [entry.at, entry.actor, entry.action, entry.subject, entry.detail]
        )
    }
}

extension CardRecord {
    init(row: Row) throws {
        self.init(
            externalCardId: row["external_card_id"], userId: row["user_id"], encryptedPAN: row["encrypted_pan"], panLookupHash: row["pan_lookup_hash"],
            panLast4: row["pan_last4"], panUniqueReference: row["pan_unique_reference"], expiration: try CardExpiration(row["expiration"] as String),
            cardholderName: row["cardholder_name"], network: CardNetwork(rawValue: row["network"]) ?? .visa, productTitle: row["product_title"],
            artId: row["art_id"], status: CardStatus(rawValue: row["status"]) ?? .blocked, createdAt: row["created_at"], updatedAt: row["updated_at"]
        )
    }
}

extension TokenRecord {
    init(row: Row) {
        self.init(
            tokenUniqueReference: row["token_unique_reference"], externalCardId: row["external_card_id"], panUniqueReference: row["pan_unique_reference"],
            userId: row["user_id"], deviceType: DeviceType(rawValue: row["device_type"]) ?? .phone, status: TokenStatus(rawValue: row["status"]) ?? .deactivated,
            authorizationPath: AuthorizationPath(rawValue: row["authorization_path"]) ?? .yellow,
            suspendedBy: (row["suspended_by"] as String?).flatMap(SuspensionSource.init(rawValue:)), tokenLast4: row["token_last4"],
            createdAt: row["created_at"], updatedAt: row["updated_at"]
        )
    }
}
