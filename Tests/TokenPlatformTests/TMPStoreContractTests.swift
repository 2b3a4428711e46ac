import Foundation
import ProvisioningModels
import Testing
import TokenPlatform

/// How to make a fresh, migrated store of one implementation.
struct StoreFactory: Sendable, CustomTestStringConvertible {
    var name: String
    var make: @Sendable () async throws -> any TMPStore
    var testDescription: String { name }

    static let all: [StoreFactory] = [
        StoreFactory(name: "SQLite in memory") {
            let store = try SQLiteStore.inMemory()
            try await store.migrate()
            return store
        },
        StoreFactory(name: "SQLite file (WAL)") {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-contract-\(UUID().uuidString).sqlite").path
            let store = try SQLiteStore(path: path)
            try await store.migrate()
            return store
        },
    ]
}

/// The contract every ``TMPStore`` implementation passes.
@Suite("TMPStore contract")
struct TMPStoreContractTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func card(_ id: String, user: String = "alice", pur: String? = nil, hash: String? = nil) throws -> CardRecord {
        CardRecord(externalCardId: id, userId: user, encryptedPAN: "v1.k.AAAA", panLookupHash: hash ?? "hash-\(id)", panLast4: "1111", panUniqueReference: pur ?? "PUR-\(id)", expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold", artId: nil, status: .active, createdAt: now, updatedAt: now)
    }

    static func token(_ reference: String, card: String = "c1", user: String = "alice", status: TokenStatus = .inactive) -> TokenRecord {
        TokenRecord(tokenUniqueReference: reference, externalCardId: card, panUniqueReference: "PUR-\(card)", userId: user, deviceType: .phone, status: status, authorizationPath: .yellow, suspendedBy: nil, tokenLast4: nil, createdAt: now, updatedAt: now)
    }

    static func audit(_ subject: String, _ action: String = "test") -> AuditEntry {
        AuditEntry(at: now, actor: "test", action: action, subject: subject, detail: "")
    }

    @discardableResult
    static func insert(_ store: any TMPStore, _ token: TokenRecord, event: String = UUID().uuidString) async throws -> TokenEventApplication {
        try await store.applyTokenEvent(eventId: event, tokenReference: token.tokenUniqueReference, audit: audit("token:\(token.tokenUniqueReference)")) { _ in .insert(token) }
    }

    @Test(arguments: StoreFactory.all)
    func cardsRoundTripAndAreFoundByEveryKey(factory: StoreFactory) async throws {
        let store = try await factory.make()
        try await store.ping()
        let card = try Self.card("c1")
        #expect(try await store.putCard(card, audit: Self.audit("card:c1")) == nil)
        #expect(try await store.card(externalCardId: "c1") == card)
        #expect(try await store.card(panLookupHash: "hash-c1") == card)
        #expect(try await store.card(panUniqueReference: "PUR-c1") == card)
        #expect(try await store.cards(ownedBy: "alice") == [card])
        #expect(try await store.cards(ownedBy: "bob").isEmpty)
        #expect(try await store.card(externalCardId: "nope") == nil)
    }

    @Test(arguments: StoreFactory.all)
    func aPANLookupHashBelongsToOneCard(factory: StoreFactory) async throws {
        let store = try await factory.make()
        _ = try await store.putCard(try Self.card("c1", hash: "same"), audit: Self.audit("card:c1"))
        await #expect(throws: StoreError.duplicatePAN(existingCardId: "c1")) {
            _ = try await store.putCard(try Self.card("c2", hash: "same"), audit: Self.audit("card:c2"))
        }
        #expect(try await store.card(externalCardId: "c2") == nil)
        #expect(try await store.auditEntries(subject: "card:c2").isEmpty)
    }

    @Test(arguments: StoreFactory.all)
    func replacingACardWithAnotherPANDeactivatesItsTokensAtomically(factory: StoreFactory) async throws {
        let store = try await factory.make()
        _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
        try await Self.insert(store, Self.token("T1", status: .active))
        let previous = try await store.putCard(try Self.card("c1", pur: "PUR-new", hash: "hash-new"), audit: Self.audit("card:c1"))
        #expect(previous?.panUniqueReference == "PUR-c1")
        #expect(try await store.token(reference: "T1")?.status == .deactivated)
        #expect(try await store.auditEntries(subject: "token:T1").map(\.action).contains("token.deactivate"))
    }

    @Test(arguments: StoreFactory.all)
    func setsCardStatusWithAudit(factory: StoreFactory) async throws {
        let store = try await factory.make()
        _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1", "create"))
        let blocked = try await store.setCardStatus(externalCardId: "c1", status: .blocked, at: Self.now, audit: Self.audit("card:c1", "block"))
        #expect(blocked?.status == .blocked)
        #expect(try await store.setCardStatus(externalCardId: "nope", status: .blocked, at: Self.now, audit: Self.audit("card:nope")) == nil)
        #expect(try await store.auditEntries(subject: "card:c1").map(\.action) == ["create", "block"])
        #expect(try await store.auditEntries(subject: "card:nope").isEmpty)
    }

    @Test(arguments: StoreFactory.all)
    func tokenSearchFiltersByOwner(factory: StoreFactory) async throws {
        let store = try await factory.make()
        _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
        _ = try await store.putCard(try Self.card("c2", user: "bob"), audit: Self.audit("card:c2"))
        try await Self.insert(store, Self.token("A", card: "c1"))
        try await Self.insert(store, Self.token("B", card: "c2", user: "bob"))
        #expect(try await store.tokens(references: ["A", "B", "C"], ownedBy: "alice").map(\.tokenUniqueReference) == ["A"])
        #expect(try await store.tokens(references: [], ownedBy: "alice").isEmpty)
        #expect(try await store.tokens(externalCardId: "c2").map(\.tokenUniqueReference) == ["B"])
    }

    @Test(arguments: StoreFactory.all)
    func updateTokenAppliesRejectsOrLeavesUnchanged(factory: StoreFactory) async throws {
        let store = try await factory.make()
        _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
        try await Self.insert(store, Self.token("T1"))
        let updated = try await store.updateToken(reference: "T1", audit: Self.audit("token:T1", "activate")) { _ in .set(.active, suspendedBy: nil) }
        guard case .updated(let before, let after) = updated else { Issue.record("expected an update"); return }
        #expect(before.status == .inactive && after.status == .active)
        let rejected = try await store.updateToken(reference: "T1", audit: Self.audit("token:T1", "nope")) { _ in .reject("no") }
        #expect(rejected == .rejected(after, "no"))
        let unchanged = try await store.updateToken(reference: "T1", audit: Self.audit("token:T1", "noop")) { _ in .unchanged }
        #expect(unchanged == .unchanged(after))
        #expect(try await store.updateToken(reference: "missing", audit: Self.audit("token:missing")) { _ in .unchanged } == .notFound)
        #expect(try await store.auditEntries(subject: "token:T1").map(\.action) == ["test", "activate"])
    }

    @Test(arguments: StoreFactory.all)
    func tokenEventsApplyOncePerEventId(factory: StoreFactory) async throws {
        let store = try await factory.make()
        _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
        #expect(try await Self.insert(store, Self.token("T1"), event: "e1") == .applied(Self.token("T1")))
        let duplicate = try await store.applyTokenEvent(eventId: "e1", tokenReference: "T1", audit: Self.audit("token:T1")) { _ in .update(status: .active, suspendedBy: nil, tokenLast4: nil) }
        #expect(duplicate == .duplicate(Self.token("T1")))
        let rejected = try await store.applyTokenEvent(eventId: "e2", tokenReference: "T1", audit: Self.audit("token:T1")) { _ in .reject("bad") }
        #expect(rejected == .rejected("bad"))
        // A rejected event id is not burnt: a corrected retry with it applies.
        let retried = try await store.applyTokenEvent(eventId: "e2", tokenReference: "T1", audit: Self.audit("token:T1")) { _ in .update(status: .active, suspendedBy: nil, tokenLast4: "1234") }
        guard case .applied(let token) = retried else { Issue.record("expected applied"); return }
        #expect(token.status == .active && token.tokenLast4 == "1234")
    }

    @Test(arguments: StoreFactory.all)
    func activationDataIsConsumedOnce(factory: StoreFactory) async throws {
        let store = try await factory.make()
        let attempt = ProvisioningAttempt(activationDataId: "jti-1", externalCardId: "c1", userId: "alice", deviceType: .watch, nonceHash: "nh", leafFingerprint: "fp", createdAt: Self.now, expiresAt: Self.now + 600)
        try await store.recordProvisioningAttempt(attempt)
        #expect(try await store.provisioningAttempt(activationDataId: "jti-1") == attempt)
        #expect(try await store.provisioningAttempt(activationDataId: "jti-2") == nil)
        #expect(try await store.consumeActivationData(id: "jti-1", at: Self.now))
        #expect(try await !store.consumeActivationData(id: "jti-1", at: Self.now))
    }

    @Test(arguments: StoreFactory.all)
    func latestDecisionWinsPerCardAndDevice(factory: StoreFactory) async throws {
        let store = try await factory.make()
        for (index, decision) in [TokenizationDecision.requireAdditionalAuthentication, .approved].enumerated() {
            try await store.recordTokenizationDecision(TokenizationDecisionRecord(requestId: "r\(index)", panUniqueReference: "PUR-1", deviceType: .phone, decision: decision, reason: "x", decidedAt: Self.now + Double(index)))
        }
        #expect(try await store.latestTokenizationDecision(panUniqueReference: "PUR-1", deviceType: .phone)?.decision == .approved)
        #expect(try await store.latestTokenizationDecision(panUniqueReference: "PUR-1", deviceType: .watch) == nil)
    }

    @Test(arguments: StoreFactory.all)
    func cardArtIsReplacedById(factory: StoreFactory) async throws {
        let store = try await factory.make()
        try await store.putCardArt(CardArtRecord(artId: "a1", contentType: "image/png", data: Data([1]), updatedAt: Self.now), audit: Self.audit("card_art:a1"))
        try await store.putCardArt(CardArtRecord(artId: "a1", contentType: "application/pdf", data: Data([2]), updatedAt: Self.now), audit: Self.audit("card_art:a1"))
        #expect(try await store.cardArt(id: "a1") == CardArtRecord(artId: "a1", contentType: "application/pdf", data: Data([2]), updatedAt: Self.now))
        #expect(try await store.cardArt(id: "a2") == nil)
    }

    @Test(arguments: StoreFactory.all)
    func migratingTwiceIsHarmless(factory: StoreFactory) async throws {
        let store = try await factory.make()
        try await store.migrate()
        try await store.ping()
    }
}
