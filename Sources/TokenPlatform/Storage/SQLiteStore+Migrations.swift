import GRDB

extension SQLiteStore {
    /// The schema, as named migrations applied in order.
    package static var migrator: DatabaseMigrator { migrator(onApplied: { _ in }) }

    /// The schema's migrations, calling `onApplied` with each one's name once its transaction
    /// has committed (so a migration another process applied first is never reported here).
    static func migrator(onApplied: @escaping @Sendable (String) -> Void) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        func register(_ name: String, _ body: @escaping @Sendable (Database) throws -> Void) {
            migrator.registerMigration(name) { db in
                try body(db)
                db.afterNextTransaction(onCommit: { _ in onApplied(name) })
            }
        }
        register("v1") { db in
            try db.execute(sql: """
                CREATE TABLE card (
                    external_card_id TEXT PRIMARY KEY NOT NULL,
                    user_id TEXT NOT NULL,
                    encrypted_pan TEXT NOT NULL,
                    pan_lookup_hash TEXT NOT NULL UNIQUE,
                    pan_last4 TEXT NOT NULL,
                    pan_unique_reference TEXT NOT NULL UNIQUE,
                    expiration TEXT NOT NULL,
                    cardholder_name TEXT NOT NULL,
                    network TEXT NOT NULL,
                    product_title TEXT NOT NULL,
                    art_id TEXT,
                    status TEXT NOT NULL CHECK (status IN ('ACTIVE', 'BLOCKED', 'CLOSED')),
                    created_at DATETIME NOT NULL,
                    updated_at DATETIME NOT NULL
                );
                CREATE INDEX card_user ON card(user_id);

                CREATE TABLE token (
                    token_unique_reference TEXT PRIMARY KEY NOT NULL,
                    external_card_id TEXT NOT NULL REFERENCES card(external_card_id),
                    pan_unique_reference TEXT NOT NULL,
                    user_id TEXT NOT NULL,
                    device_type TEXT NOT NULL CHECK (device_type IN ('PHONE', 'WATCH')),
                    status TEXT NOT NULL CHECK (status IN ('ACTIVE', 'INACTIVE', 'SUSPENDED', 'DEACTIVATED')),
                    authorization_path TEXT NOT NULL,
                    suspended_by TEXT,
                    token_last4 TEXT,
                    created_at DATETIME NOT NULL,
                    updated_at DATETIME NOT NULL
                );
                CREATE INDEX token_card ON token(external_card_id);
                CREATE INDEX token_user ON token(user_id, token_unique_reference);

                CREATE TABLE token_event (
                    event_id TEXT PRIMARY KEY NOT NULL,
                    token_unique_reference TEXT NOT NULL,
                    received_at DATETIME NOT NULL
                );

                CREATE TABLE provisioning_attempt (
                    activation_data_id TEXT PRIMARY KEY NOT NULL,
                    external_card_id TEXT NOT NULL,
                    user_id TEXT NOT NULL,
                    device_type TEXT NOT NULL,
                    nonce_hash TEXT NOT NULL,
                    leaf_fingerprint TEXT NOT NULL,
                    created_at DATETIME NOT NULL,
                    expires_at DATETIME NOT NULL
                );

                CREATE TABLE activation_data_use (
                    activation_data_id TEXT PRIMARY KEY NOT NULL,
                    used_at DATETIME NOT NULL
                );

                CREATE TABLE tokenization_decision (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    request_id TEXT NOT NULL,
                    pan_unique_reference TEXT,
                    device_type TEXT NOT NULL,
                    decision TEXT NOT NULL,
                    reason TEXT NOT NULL,
                    decided_at DATETIME NOT NULL
                );
                CREATE INDEX tokenization_decision_card ON tokenization_decision(pan_unique_reference, device_type, decided_at);

                CREATE TABLE card_art (
                    art_id TEXT PRIMARY KEY NOT NULL,
                    content_type TEXT NOT NULL,
                    data BLOB NOT NULL,
                    updated_at DATETIME NOT NULL
                );

                CREATE TABLE audit_event (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    at DATETIME NOT NULL,
                    actor TEXT NOT NULL,
                    action TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    detail TEXT NOT NULL
                );
                CREATE INDEX audit_subject ON audit_event(subject, id);
                """)
        }
        // A seal's audit entry is its provisioning attempt (signed-cards stores that one row):
        // index attempts by card for the trail, and drop the audit rows that repeated them. Each
        // was written in the same transaction as its attempt, so nothing is lost.
        register("v2") { db in
            try db.execute(sql: """
                CREATE INDEX provisioning_attempt_card ON provisioning_attempt(external_card_id, created_at);
                DELETE FROM audit_event WHERE action = 'card.seal';
                """)
        }
        // Since when each token has been at odds with its card's status (a token service command
        // is owed), so that commands never sent or never confirmed are found and sent again.
        // Tokens already at odds start their clock at the upgrade.
        register("v3") { db in
            try db.execute(sql: """
                ALTER TABLE token ADD COLUMN at_odds_since DATETIME;
                CREATE INDEX token_at_odds ON token(at_odds_since) WHERE at_odds_since IS NOT NULL;
                UPDATE token SET at_odds_since = strftime('%Y-%m-%d %H:%M:%f', 'now') WHERE \(AtOddsSQL.predicateBeforeV7);
                """)
        }
        // When the newest applied event of each token happened at the token service, so that
        // an older event delivered later is recognised as stale.
        register("v4") { db in
            try db.execute(sql: "ALTER TABLE token ADD COLUMN last_event_ms INTEGER")
        }
        // The pan-unique references cards had before their PAN was replaced, so that a token the
        // token service reports for an old PAN is recognised, recorded and deactivated; and
        // decisions by request id, so that a retried tokenization request gets its answer again.
        register("v5") { db in
            try db.execute(sql: """
                CREATE TABLE retired_pan_reference (
                    pan_unique_reference TEXT PRIMARY KEY NOT NULL,
                    external_card_id TEXT NOT NULL REFERENCES card(external_card_id),
                    retired_at DATETIME NOT NULL
                );
                CREATE INDEX tokenization_decision_request ON tokenization_decision(request_id, id);
                """)
        }
        // What each event id was used for (the event type), so that an id the token service
        // reuses for another event of the same token is refused instead of taken for a
        // duplicate; and the activation data each decision used up, so that only a retry of
        // the same request gets its answer again. Rows from before are NULL: an event id is
        // then a duplicate for its own token whatever the event, as before; a decision is not
        // found for a retry, which is declined as a replay (fails closed).
        register("v6") { db in
            try db.execute(sql: """
                ALTER TABLE token_event ADD COLUMN event TEXT;
                ALTER TABLE tokenization_decision ADD COLUMN activation_data_id TEXT;
                """)
        }
        // A command each token owes the token service that it has not confirmed and that the
        // token's state does not already show as owed (`PendingTokenCommand`): a suspension
        // to send again, or a deactivation of a token the card's previous owner activated.
        // Such a token counts as at odds, so the realignment sends it again.
        register("v7") { db in
            try db.execute(sql: "ALTER TABLE token ADD COLUMN pending_command TEXT CHECK (pending_command IN ('SUSPEND', 'DEACTIVATE'))")
        }
        // Which instance's token service command for a token is in progress, until when
        // (`TMPStore.takeTokenCommandLease`): instances sharing a database hold one token's
        // commands in line through it. A row lives while its command runs.
        register("v8") { db in
            try db.execute(sql: """
                CREATE TABLE token_command_lease (
                    token_unique_reference TEXT PRIMARY KEY NOT NULL,
                    holder TEXT NOT NULL,
                    expires_at TEXT NOT NULL
                )
                """)
        }
        // When suspensions for the card's block were sent for an ACTIVE token without their
        // outcome being recorded, the first and the last (milliseconds since 1970, TMP's clock;
        // `TokenRecord.blockSuspensionsSent`): a suspension the token service reports around
        // then is their echo, taken as the block's also once the card is unblocked.
        register("v9") { db in
            try db.execute(sql: """
                ALTER TABLE token ADD COLUMN block_suspension_first_sent_ms INTEGER;
                ALTER TABLE token ADD COLUMN block_suspension_last_sent_ms INTEGER;
                """)
        }
        // When each event said it happened (`occurredAt`, milliseconds since 1970): an event id
        // the token service reuses for another event of the same kind and token, at another
        // time, is refused instead of taken for a duplicate. Rows from before are NULL (and so
        // are rows an instance not yet upgraded writes during a rolling upgrade): such an id
        // stays a duplicate for its token's event at any time, as before.
        register("v10") { db in
            try db.execute(sql: "ALTER TABLE token_event ADD COLUMN occurred_ms INTEGER")
        }
        return migrator
    }
}
