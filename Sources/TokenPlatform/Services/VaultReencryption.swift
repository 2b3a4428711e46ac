import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// Encrypts every stored PAN that is not under the vault's current key again under it, a
/// batch at a time, so an older key can be withdrawn from the key file. `pushprov vault
/// reencrypt` runs it.
///
/// Each card's PAN is decrypted with the key it names, checked against the card's lookup hash
/// (a key file whose lookup key is not the database's stops the run before anything is
/// written), and encrypted under the current key for the same card. A batch is stored in one
/// transaction, each card only if it still holds the value read (a card replaced meanwhile
/// already has its PAN under the current key, since the servers encrypt with it), with an
/// audit entry per card (`vault.reencrypt`, naming both key ids, never the PAN). A run may go
/// on while servers serve; a failure keeps the batches already stored, and running it again
/// goes on from there. The lookup key is not rotated: that would change every lookup hash.
public struct VaultReencryption: Sendable {
    /// Cards per transaction by default.
    public static let defaultBatchSize = 500

    /// The store whose cards are encrypted again.
    public let store: any TMPStore
    /// The vault: its current key encrypts, every key it holds decrypts.
    public let vault: PANVault
    /// Cards per transaction.
    public let batchSize: Int
    /// The time of the audit entries.
    public let now: @Sendable () -> Date

    /// Re-encrypts `store`'s cards with `vault`, `batchSize` (positive) cards per transaction.
    public init(store: any TMPStore, vault: PANVault, batchSize: Int = defaultBatchSize, now: @escaping @Sendable () -> Date = { Date() }) {
        precondition(batchSize > 0, "a re-encryption batch must hold at least one card")
        self.store = store
        self.vault = vault
        self.batchSize = batchSize
        self.now = now
    }

    /// Why a run stopped before the end; the message names the card (its id redacted), never
    /// a PAN.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// What went wrong.
        public var message: String
        /// The message.
        public var description: String { message }
    }

    /// What a run did.
    public struct Totals: Sendable, Hashable {
        /// Cards whose PAN is now under the current key.
        public var reencrypted = 0
        /// Cards that changed while the run read them (replaced: under the current key already).
        public var changedMeanwhile = 0

        /// No card yet.
        public init() {}
    }

    /// How many cards hold a PAN under a key other than the current one.
    public func count() async throws -> Int {
        try await store.countCards(notEncryptedUnder: vault.keys.currentEncryptionKeyID)
    }

    /// Encrypts every card's PAN not under the current key again, calling `progress` with the
    /// running totals after every batch; returns the totals.
    ///
    /// - Throws: ``Failure`` for a card whose stored value is unreadable, under a key the vault
    ///   does not hold, or whose PAN does not match its lookup hash (nothing of that batch is
    ///   stored); the store's error when it fails.
    @discardableResult
    public func run(progress: (Totals) -> Void = { _ in }) async throws -> Totals {
        let current = vault.keys.currentEncryptionKeyID
        var totals = Totals()
        var after: String?
        while true {
            let cards = try await store.cards(notEncryptedUnder: current, after: after, limit: batchSize)
            guard let last = cards.last else { break }
            let changes = try cards.map(change)
            let changed = try await store.replaceEncryptedPANs(changes)
            totals.reencrypted += changed.count
            totals.changedMeanwhile += cards.count - changed.count
            progress(totals)
            after = last.externalCardId
            if cards.count < batchSize { break }
        }
        return totals
    }

    /// What a run would do, without writing: every card not under the current key is read and
    /// checked as ``run(progress:)`` checks it (its PAN opens with the key it names and matches
    /// its lookup hash), a batch at a time. Returns how many cards a run would encrypt again.
    ///
    /// - Throws: the ``Failure`` a run would stop with; the store's error when it fails.
    public func check() async throws -> Int {
        let current = vault.keys.currentEncryptionKeyID
        var checked = 0
        var after: String?
        while true {
            let cards = try await store.cards(notEncryptedUnder: current, after: after, limit: batchSize)
            guard let last = cards.last else { break }
            _ = try cards.map(change)
            checked += cards.count
            after = last.externalCardId
            if cards.count < batchSize { break }
        }
        return checked
    }

    /// The change that puts `card`'s PAN under the current key.
    private func change(_ card: CardRecord) throws -> EncryptedPANChange {
        let id = Redaction.identifier(card.externalCardId)
        guard let stored = EncryptedPAN(serialized: card.encryptedPAN) else {
            throw Failure(message: "card \(id)'s stored card number is unreadable; the database may be damaged")
        }
        let pan: PrimaryAccountNumber
        do {
            pan = try vault.decrypt(stored, cardID: card.externalCardId)
        } catch PANVaultError.unknownKeyID(let keyID) {
            throw Failure(message: "card \(id) is encrypted under key \(keyID), which the key file does not hold: add it to the key file (beside the current key) and run again")
        } catch {
            throw Failure(message: "card \(id)'s stored card number does not open with key \(stored.keyID) of the key file; the key or the database is not the one it was stored with")
        }
        guard constantTimeEquals(vault.lookupHash(pan), card.panLookupHash) else {
            throw Failure(message: "the key file's lookup key is not the one card \(id) was indexed with; use the key file that goes with this database")
        }
        let replacement = try vault.encrypt(pan, cardID: card.externalCardId)
        let audit = AuditEntry(
            at: now(), actor: "operator", action: "vault.reencrypt", subject: "card:\(card.externalCardId)",
            detail: "PAN encrypted again from key \(stored.keyID) to key \(replacement.keyID)"
        )
        return EncryptedPANChange(externalCardId: card.externalCardId, expected: card.encryptedPAN, replacement: replacement.serialized, audit: audit)
    }
}
