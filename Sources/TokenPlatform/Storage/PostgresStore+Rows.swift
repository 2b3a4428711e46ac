import Foundation
import PostgresNIO
import ProvisioningModels

extension PostgresStore {
    /// The card columns, in the order ``CardRecord/init(postgres:)`` and inserts use.
    static let cardColumns = "external_card_id, user_id, encrypted_pan, pan_lookup_hash, pan_last4, pan_unique_reference, expiration, cardholder_name, network, product_title, art_id, status, created_at, updated_at"
    /// The token columns, in the order ``TokenRecord/init(postgres:)`` and inserts use.
    static let tokenColumns = "token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status, authorization_path, suspended_by, token_last4, created_at, updated_at, last_event_ms, pending_command, block_suspension_first_sent_ms, block_suspension_last_sent_ms"
    /// ``tokenColumns`` qualified with the table's name, for statements that join another table.
    static let qualifiedTokenColumns = tokenColumns.split(separator: ",").map { "token." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")
}

// Unknown enum values map to the same safe defaults as in SQLiteStore's row readers.

extension CardRecord {
    init(postgres row: PostgresRow) throws {
        let (id, user, pan, hash, last4, pur, expiration, name, network, title, art, status, created, updated) =
            try row.decode((String, String, String, String, String, String, String, String, String, String, String?, String, Date, Date).self)
        self.init(
            externalCardId: id, userId: user, encryptedPAN: pan, panLookupHash: hash, panLast4: last4, panUniqueReference: pur,
            expiration: try CardExpiration(expiration), cardholderName: name, network: CardNetwork(rawValue: network) ?? .visa, productTitle: title,
            artId: art, status: CardStatus(rawValue: status) ?? .blocked, createdAt: created, updatedAt: updated
        )
    }
}

extension TokenRecord {
    init(postgres row: PostgresRow) throws {
        let (reference, card, pur, user, device, status, path, suspendedBy, last4, created, updated, lastEvent, pending, firstSuspensionSent, lastSuspensionSent) =
            try row.decode((String, String, String, String, String, String, String, String?, String?, Date, Date, Int64?, String?, Int64?, Int64?).self)
        self.init(
            tokenUniqueReference: reference, externalCardId: card, panUniqueReference: pur, userId: user,
            deviceType: DeviceType(rawValue: device) ?? .phone, status: TokenStatus(rawValue: status) ?? .deactivated,
            authorizationPath: AuthorizationPath(rawValue: path) ?? .yellow, suspendedBy: suspendedBy.flatMap(SuspensionSource.init(rawValue:)),
            tokenLast4: last4, createdAt: created, updatedAt: updated, lastEventAt: lastEvent.map(EventTime.init(millisecondsSince1970:)),
            pendingCommand: pending.flatMap(PendingTokenCommand.init(rawValue:)),
            blockSuspensionsSent: TokenRecord.note(first: firstSuspensionSent, last: lastSuspensionSent)
        )
    }
}

extension ProvisioningAttempt {
    init(postgres row: PostgresRow) throws {
        let (id, card, user, device, nonceHash, fingerprint, created, expires) = try row.decode((String, String, String, String, String, String, Date, Date).self)
        self.init(activationDataId: id, externalCardId: card, userId: user, deviceType: DeviceType(rawValue: device) ?? .phone, nonceHash: nonceHash, leafFingerprint: fingerprint, createdAt: created, expiresAt: expires)
    }
}

extension TokenizationDecisionRecord {
    init(postgres row: PostgresRow) throws {
        let (request, pur, device, decision, reason, decided, activationDataId) = try row.decode((String, String?, String, String, String, Date, String?).self)
        self.init(
            requestId: request, panUniqueReference: pur, deviceType: DeviceType(rawValue: device) ?? .phone, decision: TokenizationDecision(rawValue: decision) ?? .declined,
            reason: reason, decidedAt: decided, activationDataId: activationDataId
        )
    }
}

extension CardArtRecord {
    init(postgres row: PostgresRow) throws {
        let (id, contentType, data, updated) = try row.decode((String, String, Data, Date).self)
        self.init(artId: id, contentType: contentType, data: data, updatedAt: updated)
    }
}

extension AuditEntry {
    init(postgres row: PostgresRow) throws {
        let (at, actor, action, subject, detail) = try row.decode((Date, String, String, String, String).self)
        self.init(at: at, actor: actor, action: action, subject: subject, detail: detail)
    }
}
