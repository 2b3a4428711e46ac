import Crypto
import Foundation
import ProvisioningCrypto
import ProvisioningModels
import Testing
import TokenPlatform

/// Stored PANs put under the current key, a batch at a time (``VaultReencryption``).
@Suite("Vault re-encryption")
struct VaultReencryptionTests {
    static let pans = ["4111111111111111", "5555555555554444", "378282246310005", "4012888888881881", "6011111111111117", "30569309025904", "5105105105105100", "4222222222222"]
    let old = SymmetricKey(size: .bits256)
    let new = SymmetricKey(size: .bits256)
    let lookup = SymmetricKey(size: .bits256)

    func vault(_ keys: [String: SymmetricKey], current: String, lookup: SymmetricKey? = nil) throws -> PANVault {
        PANVault(keys: try PANVaultKeys(encryptionKeys: keys, currentEncryptionKeyID: current, lookupKey: lookup ?? self.lookup))
    }

    /// Cards c0…c6 under key `old`, c7 under key `new`.
    func seed(_ store: any TMPStore) async throws {
        let before = try vault(["old": old], current: "old")
        let after = try vault(["new": new], current: "new")
        for (index, digits) in Self.pans.enumerated() {
            let pan = try PrimaryAccountNumber(digits)
            let id = "c\(index)"
            var card = try TMPStoreContractTests.card(id, hash: before.lookupHash(pan))
            card.encryptedPAN = try (index < 7 ? before : after).encrypt(pan, cardID: id).serialized
            _ = try await store.putCard(card, audit: TMPStoreContractTests.audit("card:\(id)"))
        }
    }

    @Test(arguments: StoreFactory.all)
    func everyPANEndsUnderTheCurrentKeyAndStillOpensToTheSameNumber(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await seed(store)
            let rotation = VaultReencryption(store: store, vault: try vault(["old": old, "new": new], current: "new"), batchSize: 3, now: { TMPStoreContractTests.now })
            #expect(try await rotation.count() == 7)
            var batches: [Int] = []
            let totals = try await rotation.run { batches.append($0.reencrypted) }
            #expect(totals == {
                var expected = VaultReencryption.Totals()
                expected.reencrypted = 7
                return expected
            }())
            #expect(batches == [3, 6, 7])
            #expect(try await rotation.count() == 0)
            // The old key can go: a vault without it opens every card to its number.
            let newOnly = try vault(["new": new], current: "new")
            for (index, digits) in Self.pans.enumerated() {
                let card = try #require(try await store.card(externalCardId: "c\(index)"))
                let stored = try #require(EncryptedPAN(serialized: card.encryptedPAN))
                #expect(stored.keyID == "new")
                #expect(try newOnly.decrypt(stored, cardID: card.externalCardId).digits == digits)
            }
            let audit = try await store.auditEntries(subject: "card:c0")
            #expect(audit.map(\.action) == ["test", "vault.reencrypt"])
            #expect(audit.last?.detail == "PAN encrypted again from key old to key new")
            #expect(try await store.auditEntries(subject: "card:c7").map(\.action) == ["test"])
            // A second run finds nothing to do.
            #expect(try await rotation.run() == VaultReencryption.Totals())
        }
    }

    @Test(arguments: StoreFactory.all)
    func aKeyFileWithoutTheOldKeyOrWithAnotherLookupKeyChangesNothing(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await seed(store)
            let withoutOld = VaultReencryption(store: store, vault: try vault(["new": new], current: "new"))
            let missing = await #expect(throws: VaultReencryption.Failure.self) { try await withoutOld.run() }
            #expect(missing?.message == "card c0 is encrypted under key old, which the key file does not hold: add it to the key file (beside the current key) and run again")
            let otherLookup = VaultReencryption(store: store, vault: try vault(["old": old, "new": new], current: "new", lookup: SymmetricKey(size: .bits256)))
            let mismatch = await #expect(throws: VaultReencryption.Failure.self) { try await otherLookup.run() }
            #expect(mismatch?.message == "the key file's lookup key is not the one card c0 was indexed with; use the key file that goes with this database")
            let wrongOld = VaultReencryption(store: store, vault: try vault(["old": SymmetricKey(size: .bits256), "new": new], current: "new"))
            let unopened = await #expect(throws: VaultReencryption.Failure.self) { try await wrongOld.run() }
            #expect(unopened?.message.hasPrefix("card c0's stored card number does not open with key old") == true)
            // A check (the dry run) stops where the run would, and writes nothing either.
            for (rotation, failure) in [(withoutOld, missing), (otherLookup, mismatch), (wrongOld, unopened)] {
                let checked = await #expect(throws: VaultReencryption.Failure.self) { try await rotation.check() }
                #expect(checked?.message == failure?.message)
            }
            #expect(try await VaultReencryption(store: store, vault: try vault(["old": old, "new": new], current: "new"), batchSize: 3).check() == 7)
            #expect(try await withoutOld.count() == 7)
            for index in 0..<7 { #expect(try await store.auditEntries(subject: "card:c\(index)").map(\.action) == ["test"]) }
        }
    }
}
