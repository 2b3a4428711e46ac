import Foundation
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import Testing
import TokenPlatform

/// How to open a fresh, migrated database of one implementation, and clean up after it.
struct StoreFactory: Sendable, CustomTestStringConvertible {
    var name: String
    /// Opens `handles` stores on one fresh database (as that many processes would), runs the
    /// body, then closes them and removes the database.
    var open: @Sendable (_ handles: Int, _ body: ([any TMPStore]) async throws -> Void) async throws -> Void
    var testDescription: String { name }

    func withStore(_ body: (any TMPStore) async throws -> Void) async throws {
        try await open(1) { try await body($0[0]) }
    }

    /// Two handles on one database: two pools for PostgreSQL, two connections for a SQLite
    /// file, and the same store twice for an in-memory database (which only one handle sees).
    func withTwoHandles(_ body: (any TMPStore, any TMPStore) async throws -> Void) async throws {
        try await open(2) { try await body($0[0], $0[1]) }
    }

    /// SQLite always; PostgreSQL when PUSHPROV_TEST_POSTGRES_URL is set (otherwise
    /// `postgresIsUnderContractWhenConfigured` is reported skipped, saying how to run it).
    static let all: [StoreFactory] = sqlite + (PostgresTestDatabase.isConfigured ? [postgres] : [])

    static let sqlite: [StoreFactory] = [
        StoreFactory(name: "SQLite in memory") { handles, body in
            let store = try SQLiteStore.inMemory()
            try await store.migrate()
            try await body(Array(repeating: store, count: handles))
        },
        StoreFactory(name: "SQLite file (WAL)") { handles, body in
            let file = TemporarySQLiteFile("pushprov-contract")
            defer { file.remove() }
            let path = file.path
            let stores = try (0..<handles).map { _ in try SQLiteStore(path: path) }
            try await stores[0].migrate()
            try await body(stores)
        },
    ]

    static let postgres = StoreFactory(name: "PostgreSQL") { handles, body in
        try await PostgresTestDatabase.withStores(handles) { try await body($0) }
    }
}

/// The contract every ``TMPStore`` implementation passes.
@Suite("TMPStore contract", .timeLimit(.minutes(3)))
struct TMPStoreContractTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func card(_ id: String, user: String = "alice", pur: String? = nil, hash: String? = nil) throws -> CardRecord {
        CardRecord(externalCardId: id, userId: user, encryptedPAN: "v1.k.AAAA", panLookupHash: hash ?? "hash-\(id)", panLast4: "1111", panUniqueReference: pur ?? "PUR-\(id)", expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold", artId: nil, status: .active, createdAt: now, updatedAt: now)
    }

    static func token(_ reference: String, card: String = "c1", user: String = "alice", status: TokenStatus = .inactive, suspendedBy: SuspensionSource? = nil) -> TokenRecord {
        TokenRecord(tokenUniqueReference: reference, externalCardId: card, panUniqueReference: "PUR-\(card)", userId: user, deviceType: .phone, status: status, authorizationPath: .yellow, suspendedBy: suspendedBy, tokenLast4: nil, createdAt: now, updatedAt: now)
    }

    static func audit(_ subject: String, _ action: String = "test") -> AuditEntry {
        AuditEntry(at: now, actor: "test", action: action, subject: subject, detail: "")
    }

    @discardableResult
    static func insert(_ store: any TMPStore, _ token: TokenRecord, event: String = UUID().uuidString) async throws -> TokenEventApplication {
        try await store.applyTokenEvent(eventId: event, event: .created, tokenReference: token.tokenUniqueReference, audit: audit("token:\(token.tokenUniqueReference)")) { _, _ in .insert(token) }
    }

    /// Enabled by the setting being there, not by its parsing: a URL that does not parse fails
    /// here rather than skipping every PostgreSQL test.
    @Test(.enabled(if: PostgresTestDatabase.setting != nil, PostgresTestDatabase.howToRun))
    func postgresIsUnderContractWhenConfigured() throws {
        do {
            _ = try PostgresURL(parsing: try #require(PostgresTestDatabase.setting))
        } catch {
            Issue.record("PUSHPROV_TEST_POSTGRES_URL is set but does not parse, so every PostgreSQL test would be skipped: \(error)")
        }
        #expect(StoreFactory.all.map(\.name) == ["SQLite in memory", "SQLite file (WAL)", "PostgreSQL"])
    }

    @Test(arguments: StoreFactory.all)
    func cardsRoundTripAndAreFoundByEveryKey(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.ping()
            let card = try Self.card("c1")
            #expect(try await store.putCard(card, audit: Self.audit("card:c1")) == nil)
            #expect(try await store.card(externalCardId: "c1") == card)
            #expect(try await store.card(externalCardId: "c1", ownedBy: "alice") == card)
            #expect(try await store.card(externalCardId: "c1", ownedBy: "bob") == nil)
            #expect(try await store.card(externalCardId: "c1", ownedBy: "Alice") == nil)
            #expect(try await store.card(externalCardId: "nope", ownedBy: "alice") == nil)
            #expect(try await store.card(panLookupHash: "hash-c1") == card)
            #expect(try await store.card(panUniqueReference: "PUR-c1") == card)
            #expect(try await store.cards(ownedBy: "alice") == [card])
            #expect(try await store.cards(ownedBy: "bob").isEmpty)
            #expect(try await store.card(externalCardId: "nope") == nil)
        }
    }

    @Test(arguments: StoreFactory.all)
    func whetherACardHasOneOfManyLookupHashesIsOneAnswer(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            #expect(try await store.holdsCard(panLookupHashes: []) == false)
            #expect(try await store.holdsCard(panLookupHashes: ["hash-c1"]) == false)
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            #expect(try await store.holdsCard(panLookupHashes: ["hash-c1"]))
            #expect(try await store.holdsCard(panLookupHashes: ["x", "hash-c1", "y"]))
            #expect(try await store.holdsCard(panLookupHashes: ["x", "y", "HASH-C1", "hash-c"]) == false)
            // More than one statement's worth of parameters (SQLite's are asked in parts).
            let many = (0..<1_200).map { "miss-\($0)" }
            #expect(try await store.holdsCard(panLookupHashes: many) == false)
            #expect(try await store.holdsCard(panLookupHashes: many + ["hash-c1"]))
        }
    }

    @Test(arguments: StoreFactory.all)
    func cardsUnderAnotherKeyAreListedInIdOrderAndReplacedOnlyIfUnchanged(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            // Key ids with LIKE's wildcards and a prefix of another id: compared as text.
            let values = ["a": "v1.old.AAAA", "b": "v1.new.BBBB", "c": "v1.o%d.CCCC", "d": "v1.old.DDDD", "e": "v1.newer.EEEE"]
            for (id, value) in values {
                var card = try Self.card(id)
                card.encryptedPAN = value
                _ = try await store.putCard(card, audit: Self.audit("card:\(id)"))
            }
            #expect(try await store.countCards(notEncryptedUnder: "new") == 4)
            #expect(try await store.countCards(notEncryptedUnder: "o%d") == 4)
            #expect(try await store.cards(notEncryptedUnder: "new", after: nil, limit: 10).map(\.externalCardId) == ["a", "c", "d", "e"])
            #expect(try await store.cards(notEncryptedUnder: "new", after: nil, limit: 2).map(\.externalCardId) == ["a", "c"])
            #expect(try await store.cards(notEncryptedUnder: "new", after: "c", limit: 2).map(\.externalCardId) == ["d", "e"])
            #expect(try await store.cards(notEncryptedUnder: "new", after: "e", limit: 2).isEmpty)
            #expect(try await store.cards(notEncryptedUnder: "new", after: nil, limit: 0).isEmpty)
            // Each card is replaced only if it still holds the value expected.
            let changes = [
                EncryptedPANChange(externalCardId: "a", expected: "v1.old.AAAA", replacement: "v1.new.A2", audit: Self.audit("card:a", "vault.reencrypt")),
                EncryptedPANChange(externalCardId: "d", expected: "v1.old.changed", replacement: "v1.new.D2", audit: Self.audit("card:d", "vault.reencrypt")),
                EncryptedPANChange(externalCardId: "zz", expected: "v1.old.ZZZZ", replacement: "v1.new.Z2", audit: Self.audit("card:zz", "vault.reencrypt")),
            ]
            #expect(try await store.replaceEncryptedPANs(changes) == ["a"])
            #expect(try await store.replaceEncryptedPANs([]) == [])
            let a = try #require(try await store.card(externalCardId: "a"))
            #expect(a.encryptedPAN == "v1.new.A2")
            // Nothing else of the card changed.
            var expected = try Self.card("a")
            expected.encryptedPAN = "v1.new.A2"
            #expect(a == expected)
            #expect(try await store.card(externalCardId: "d")?.encryptedPAN == "v1.old.DDDD")
            #expect(try await store.auditEntries(subject: "card:a").map(\.action) == ["test", "vault.reencrypt"])
            #expect(try await store.auditEntries(subject: "card:d").map(\.action) == ["test"])
            #expect(try await store.countCards(notEncryptedUnder: "new") == 3)
        }
    }

    /// A new token owed its deactivation is marked, with its audit entry, in the event's own
    /// transaction when the card's owner as committed is another user than the one it was
    /// made for (compared byte for byte), and not otherwise.
    @Test(arguments: StoreFactory.all)
    func aNewTokenMadeForAnotherUserIsMarkedInItsEventsTransaction(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1", user: "bob"), audit: Self.audit("card:c1"))
            _ = try await store.putCard(try Self.card("c2", user: "jos\u{E9}"), audit: Self.audit("card:c2"))
            func create(_ reference: String, card: String = "c1", madeFor: String) async throws -> TokenRecord? {
                let owed = OwedDeactivation(madeFor: madeFor, audit: Self.audit("token:\(reference)", "token.pending_command"))
                let applied = try await store.applyTokenEvent(eventId: "e-\(reference)", event: .created, tokenReference: reference, occurredAt: nil, audit: Self.audit("token:\(reference)", "token.event.created")) { _, _ in
                    .insert(Self.token(reference, card: card, user: "someone"), owed: owed)
                }
                guard case .applied(let token) = applied else { Issue.record("not applied: \(applied)"); return nil }
                return token
            }
            let marked = try await create("T1", madeFor: "alice")
            #expect(marked?.pendingCommand == .deactivate)
            #expect(try await store.token(reference: "T1")?.pendingCommand == .deactivate)
            #expect(Set(try await store.auditEntries(subject: "token:T1").map(\.action)) == ["token.pending_command", "token.event.created"])
            let own = try await create("T2", madeFor: "bob")
            #expect(own?.pendingCommand == nil)
            #expect(try await store.auditEntries(subject: "token:T2").map(\.action) == ["token.event.created"])
            // The owner's id with its letter decomposed (equal to Swift's ==) is another user.
            let lookAlike = try await create("T3", card: "c2", madeFor: "jose\u{301}")
            #expect(lookAlike?.pendingCommand == .deactivate && lookAlike?.userId == "jos\u{E9}")
        }
    }

    /// A batch of 600 cards is replaced in one call
    /// (on PostgreSQL, two statements rather than two round trips per card, which could not
    /// finish within the statement limit), in the batch's order, each card with its entry.
    @Test(arguments: StoreFactory.all)
    func aLargeBatchOfEncryptedPANsIsReplacedInOrderWithItsAuditEntries(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let ids = (0..<600).map { String(format: "card-%05d", $0) }
            for id in ids {
                var card = try Self.card(id, hash: "hash-\(id)")
                card.encryptedPAN = "v1.old.\(id)"
                _ = try await store.putCard(card, audit: Self.audit("card:\(id)"))
            }
            // Reversed, with every third card's expected value out of date.
            let changes = ids.reversed().enumerated().map { index, id in
                EncryptedPANChange(
                    externalCardId: id, expected: index % 3 == 0 ? "v1.old.stale" : "v1.old.\(id)", replacement: "v1.new.\(id)",
                    audit: Self.audit("card:\(id)", "vault.reencrypt"))
            }
            let expected = changes.enumerated().filter { $0.offset % 3 != 0 }.map(\.element.externalCardId)
            #expect(try await store.replaceEncryptedPANs(changes) == expected)
            #expect(try await store.countCards(notEncryptedUnder: "new") == 600 - expected.count)
            for id in [expected.first!, expected.last!, changes[0].externalCardId] {
                let replaced = expected.contains(id)
                #expect(try await store.card(externalCardId: id)?.encryptedPAN == (replaced ? "v1.new.\(id)" : "v1.old.\(id)"))
                #expect(try await store.auditEntries(subject: "card:\(id)").map(\.action) == (replaced ? ["test", "vault.reencrypt"] : ["test"]))
            }
        }
    }

    @Test(arguments: StoreFactory.all)
    func aPutsAuditEntryIsMadeFromTheCardAsStoredBeforeIt(factory: StoreFactory) async throws {
        // The store hands each write's audit the card it actually replaced (nil for none),
        // whatever the caller read before: here the second write, made as if the card were
        // new, replaces the first one's PAN.
        try await factory.withTwoHandles { first, second in
            let seen = Locked<[String?]>([])
            let audit: @Sendable (CardRecord?) -> AuditEntry = { previous in
                seen.withValue { $0.append(previous?.panLookupHash) }
                return Self.audit("card:c1", previous == nil ? "card.create" : "card.replace")
            }
            #expect(try await first.putCard(try Self.card("c1", pur: "PUR-a", hash: "hash-a"), audit: audit) == nil)
            let replaced = try await second.putCard(try Self.card("c1", pur: "PUR-b", hash: "hash-b"), audit: audit)
            #expect(replaced?.panLookupHash == "hash-a")
            #expect(seen.withValue { $0 } == [nil, "hash-a"])
            #expect(try await first.auditEntries(subject: "card:c1").map(\.action) == ["card.create", "card.replace"])
            #expect(try await first.card(externalCardId: "c1")?.panLookupHash == "hash-b")
        }
    }

    @Test(arguments: StoreFactory.all)
    func aPANLookupHashBelongsToOneCard(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1", hash: "same"), audit: Self.audit("card:c1"))
            await #expect(throws: StoreError.duplicatePAN(existingCardId: "c1")) {
                _ = try await store.putCard(try Self.card("c2", hash: "same"), audit: Self.audit("card:c2"))
            }
            #expect(try await store.card(externalCardId: "c2") == nil)
            #expect(try await store.auditEntries(subject: "card:c2").isEmpty)
        }
    }

    @Test(arguments: StoreFactory.all)
    func aDecisionUsesUpItsActivationDataInTheTransactionThatRecordsIt(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let first = TokenizationDecisionRecord(requestId: "r1", panUniqueReference: "PUR-c1", deviceType: .phone, decision: .approved, reason: "activation_data_valid", decidedAt: Self.now)
            #expect(try await store.tokenizationDecision(requestId: "r1") == nil)
            #expect(try await store.recordTokenizationDecision(first, consumingActivationData: "ad-1"))
            // Read back with the activation data it used up.
            var recorded = first
            recorded.activationDataId = "ad-1"
            #expect(try await store.tokenizationDecision(requestId: "r1") == recorded)
            #expect(try await store.latestTokenizationDecision(panUniqueReference: "PUR-c1", deviceType: .phone)?.activationDataId == "ad-1")
            #expect(try await store.tokenizationDecision(requestId: "r1", usingUp: "ad-1") == recorded)
            #expect(try await store.tokenizationDecision(requestId: "r1", usingUp: "ad-2") == nil)
            // The same activation data again: refused, and nothing recorded.
            var second = first
            second.requestId = "r2"
            #expect(try await store.recordTokenizationDecision(second, consumingActivationData: "ad-1") == false)
            #expect(try await store.tokenizationDecision(requestId: "r2") == nil)
            // A decision that uses none is recorded; the newest of a request id is returned.
            second.reason = "activation_data_replayed"
            second.decision = .declined
            #expect(try await store.recordTokenizationDecision(second, consumingActivationData: nil))
            var again = first
            again.decidedAt = Self.now.addingTimeInterval(1)
            again.reason = "again"
            try await store.recordTokenizationDecision(again)
            #expect(try await store.tokenizationDecision(requestId: "r2") == second)
            #expect(try await store.tokenizationDecision(requestId: "r1")?.reason == "again")
            // The one that used ad-1 up is still found, under its own request id only.
            #expect(try await store.tokenizationDecision(requestId: "r1", usingUp: "ad-1") == recorded)
            #expect(try await store.tokenizationDecision(requestId: "r2", usingUp: "ad-1") == nil)
        }
    }

    @Test(arguments: StoreFactory.all)
    func replacingACardWithAnotherPANRetiresItsReferenceAndLeavesLiveTokensOwingADeactivation(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            try await Self.insert(store, Self.token("T1", status: .active))
            try await Self.insert(store, Self.token("T2", status: .deactivated))
            #expect(try await store.card(retiredPanUniqueReference: "PUR-c1") == nil)
            let previous = try await store.putCard(try Self.card("c1", pur: "PUR-new", hash: "hash-new"), audit: Self.audit("card:c1"))
            #expect(previous?.panUniqueReference == "PUR-c1")
            // Only the token service deactivates a live token: TMP records nothing on its own,
            // and the token is at odds with its card (a deactivation is owed).
            let token = try await store.token(reference: "T1")
            #expect(token?.status == .active)
            let card = try #require(try await store.card(externalCardId: "c1"))
            #expect(token?.isAtOdds(with: card) == true)
            #expect(try await store.tokensAtOddsWithTheirCard(since: Self.now.addingTimeInterval(1), limit: 10).map(\.tokenUniqueReference) == ["T1"])
            #expect(try await store.auditEntries(subject: "token:T1").map(\.action) == ["test"], "the insert's entry only")
            // The old reference still leads to the card; the new one is the card's.
            #expect(try await store.card(retiredPanUniqueReference: "PUR-c1")?.externalCardId == "c1")
            #expect(try await store.card(panUniqueReference: "PUR-c1") == nil)
            #expect(try await store.card(retiredPanUniqueReference: "PUR-new") == nil)
            // Replacing it once more retires the second reference too.
            _ = try await store.putCard(try Self.card("c1", pur: "PUR-third", hash: "hash-third"), audit: Self.audit("card:c1"))
            #expect(try await store.card(retiredPanUniqueReference: "PUR-new")?.externalCardId == "c1")
            #expect(try await store.card(retiredPanUniqueReference: "PUR-c1")?.externalCardId == "c1")
        }
    }

    /// Two replacements decided on the same read: the PAN's reference is decided on the card
    /// as stored when each write runs, not on what the caller read before.
    @Test(arguments: StoreFactory.all)
    func aReplacementDecidesThePANsReferenceOnTheCardAsStored(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            // Both read PAN "hash-c1"; the first stores the new PAN with its reference.
            _ = try await store.putCard(try Self.card("c1", pur: "PUR-A", hash: "hash-new"), audit: Self.audit("card:c1"))
            // The second carries the same new PAN with a reference of its own: the stored one stays,
            // and nothing more is retired.
            let previous = try await store.putCard(try Self.card("c1", pur: "PUR-B", hash: "hash-new"), audit: Self.audit("card:c1"))
            #expect(previous?.panUniqueReference == "PUR-A")
            #expect(try await store.card(externalCardId: "c1")?.panUniqueReference == "PUR-A")
            #expect(try await store.card(retiredPanUniqueReference: "PUR-A") == nil)
            #expect(try await store.card(retiredPanUniqueReference: "PUR-B") == nil)
            #expect(try await store.card(retiredPanUniqueReference: "PUR-c1")?.externalCardId == "c1")
            // A write that read the card before the replacement and took its PAN as unchanged
            // carries the old PAN with the reference it read, which the replacement retired: it
            // stores nothing (it would put back a retired reference and skip ending the new
            // PAN's tokens).
            await #expect(throws: StoreError.concurrentChange(externalCardId: "c1")) {
                _ = try await store.putCard(try Self.card("c1", pur: "PUR-c1", hash: "hash-c1"), audit: Self.audit("card:c1"))
            }
            // So does one carrying the stored reference with another PAN.
            await #expect(throws: StoreError.concurrentChange(externalCardId: "c1")) {
                _ = try await store.putCard(try Self.card("c1", pur: "PUR-A", hash: "hash-c1"), audit: Self.audit("card:c1"))
            }
            let card = try await store.card(externalCardId: "c1")
            #expect(card?.panLookupHash == "hash-new" && card?.panUniqueReference == "PUR-A")
        }
    }

    /// Sets card `id` to `status` with the audit entry the lifecycle service writes: `OLD -> NEW`.
    static func setStatus(_ store: any TMPStore, _ id: String, _ status: CardStatus) async throws -> CardStatusUpdate {
        try await store.setCardStatus(externalCardId: id, status: status, at: now) { previous in
            AuditEntry(at: now, actor: "test", action: "card.status", subject: "card:\(id)", detail: "\(previous.rawValue) -> \(status.rawValue)")
        }
    }

    /// Replays a card's `card.status` audit details (`OLD -> NEW`) from ACTIVE: returns the
    /// status they end in and the steps that are not legal — not starting from the status the
    /// step before left, or leaving CLOSED.
    static func replayCardStatus(_ details: [String]) -> (end: String, illegal: [String]) {
        var current = CardStatus.active.rawValue
        var illegal: [String] = []
        for step in details {
            let parts = step.components(separatedBy: " -> ")
            guard parts.count == 2, parts[0] == current, current != CardStatus.closed.rawValue || parts[1] == current else {
                illegal.append("\(step) after \(current)")
                continue
            }
            current = parts[1]
        }
        return (current, illegal)
    }

    @Test(arguments: StoreFactory.all)
    func setsCardStatusWithAuditOfThePreviousStatus(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1", "create"))
            let blocked = try await Self.setStatus(store, "c1", .blocked)
            let stored = try #require(try await store.card(externalCardId: "c1"))
            #expect(blocked == .updated(previous: .active, card: stored))
            #expect(stored.status == .blocked)
            #expect(try await Self.setStatus(store, "nope", .blocked) == .notFound)
            #expect(try await store.auditEntries(subject: "card:c1").map(\.detail) == ["", "ACTIVE -> BLOCKED"])
            #expect(try await store.auditEntries(subject: "card:nope").isEmpty)
            // The status it has already: answered with the card as stored, nothing written or
            // audited (not even its time).
            let later = try await store.setCardStatus(externalCardId: "c1", status: .blocked, at: Self.now + 60) { previous in
                AuditEntry(at: Self.now + 60, actor: "test", action: "card.status", subject: "card:c1", detail: "\(previous.rawValue) -> BLOCKED")
            }
            #expect(later == .updated(previous: .blocked, card: stored))
            #expect(try await store.card(externalCardId: "c1") == stored)
            #expect(try await store.auditEntries(subject: "card:c1").map(\.detail) == ["", "ACTIVE -> BLOCKED"])
        }
    }

    @Test(arguments: StoreFactory.all)
    func aClosedCardCanBeClosedAgainButNotReopened(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1", "create"))
            guard case .updated(.active, let closed) = try await Self.setStatus(store, "c1", .closed) else {
                Issue.record("closing an active card must succeed")
                return
            }
            for status in [CardStatus.active, .blocked] {
                #expect(try await Self.setStatus(store, "c1", status) == .refusedClosed(closed))
            }
            guard case .updated(.closed, let again) = try await Self.setStatus(store, "c1", .closed) else {
                Issue.record("closing a closed card again must succeed (it retries its tokens)")
                return
            }
            // Closing again changes nothing, so it writes nothing; neither do refusals.
            #expect(again == closed)
            #expect(try await store.auditEntries(subject: "card:c1").map(\.detail) == ["", "ACTIVE -> CLOSED"])
        }
    }

    @Test(arguments: StoreFactory.all)
    func aReplacementKeepsTheStoredStatus(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            _ = try await Self.setStatus(store, "c1", .closed)
            // A replacement built from a read before the card was closed.
            let previous = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            #expect(previous?.status == .closed)
            #expect(try await store.card(externalCardId: "c1")?.status == .closed)
        }
    }

    /// The note of suspensions sent for a card's block: written only on an ACTIVE token (the
    /// first and the last time, in either order), read back as written, replaced only while its
    /// last time is the one given, kept by a pending command and by an event that leaves the
    /// status, and cleared by a recorded status and by an event that changes it. Writing it
    /// changes nothing else: not `updatedAt`, not the at-odds clock, not the audit trail.
    @Test(arguments: StoreFactory.all)
    func aBlockSuspensionNoteIsKeptUntilAnOutcomeIsRecorded(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let at = { @Sendable (milliseconds: Int64) in EventTime(millisecondsSince1970: 1_790_000_000_000 + milliseconds) }
            let noted = { (reference: String) in try await store.token(reference: reference)?.blockSuspensionsSent }
            let event = { (reference: String, type: TokenEventType, status: TokenStatus) in
                _ = try await store.applyTokenEvent(eventId: UUID().uuidString, event: type, tokenReference: reference, audit: Self.audit("token:\(reference)")) { current, _ in
                    .update(status: status, suspendedBy: status == .suspended ? .tokenService : nil, tokenLast4: current?.tokenLast4)
                }
            }
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            _ = try await store.setCardStatus(externalCardId: "c1", status: .blocked, at: Self.now) { _ in Self.audit("card:c1") }
            try await Self.insert(store, Self.token("A", status: .active))
            try await Self.insert(store, Self.token("B", status: .active))
            try await Self.insert(store, Self.token("S", status: .suspended, suspendedBy: .customerService))
            try await Self.insert(store, Self.token("I", status: .inactive))
            var withNote = Self.token("N", status: .active)
            withNote.blockSuspensionsSent = at(1)...at(2)
            try await Self.insert(store, withNote)
            let before = try #require(try await store.token(reference: "A"))
            let trail = try await store.auditEntries(subject: "token:A").count
            let atOdds = try await store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).map(\.tokenUniqueReference)

            for reference in ["A", "B", "S", "I", "missing"] { try await store.noteBlockSuspensionSent(reference: reference, at: at(10)) }
            try await store.noteBlockSuspensionSent(reference: "A", at: at(30))
            try await store.noteBlockSuspensionSent(reference: "A", at: at(20))
            try await store.noteBlockSuspensionSent(reference: "B", at: at(5))
            let (a, b, suspended, inactive, n) = (try await noted("A"), try await noted("B"), try await noted("S"), try await noted("I"), try await noted("N"))
            #expect(a == at(10)...at(30))
            #expect(b == at(5)...at(10))
            #expect(suspended == nil && inactive == nil)
            #expect(n == at(1)...at(2))
            let afterNote = try #require(try await store.token(reference: "A"))
            #expect(afterNote.withoutSuspensionNote == before.withoutSuspensionNote)
            #expect(try await store.auditEntries(subject: "token:A").count == trail)
            #expect(try await store.tokensAtOddsWithTheirCard(since: Date.distantFuture, limit: 10).map(\.tokenUniqueReference) == atOdds)
            #expect(try await store.tokens(externalCardId: "c1").first { $0.tokenUniqueReference == "A" }?.blockSuspensionsSent == at(10)...at(30))

            // Replaced only while it is the one given (both ends), also by nothing; cleared whatever it is.
            try await store.replaceBlockSuspensionNote(reference: "A", with: at(10)...at(10), ifItIs: at(10)...at(20), whileStatusIs: nil)
            try await store.replaceBlockSuspensionNote(reference: "A", with: at(10)...at(10), ifItIs: at(11)...at(30), whileStatusIs: nil)
            #expect(try await noted("A") == at(10)...at(30))
            try await store.replaceBlockSuspensionNote(reference: "A", with: at(10)...at(10), ifItIs: at(10)...at(30), whileStatusIs: nil)
            #expect(try await noted("A") == at(10)...at(10))
            try await store.replaceBlockSuspensionNote(reference: "B", with: nil, ifItIs: at(5)...at(10), whileStatusIs: nil)
            try await store.replaceBlockSuspensionNote(reference: "S", with: at(1)...at(1), ifItIs: at(1)...at(1), whileStatusIs: nil)
            let (withdrawn, stillNone) = (try await noted("B"), try await noted("S"))
            #expect(withdrawn == nil && stillNone == nil)
            // Put back only while there is none (nil expected): not over a note noted since, nor
            // once the token's status is not the one given.
            try await store.replaceBlockSuspensionNote(reference: "B", with: at(3)...at(4), ifItIs: nil, whileStatusIs: .suspended)
            #expect(try await noted("B") == nil)
            try await store.replaceBlockSuspensionNote(reference: "B", with: at(3)...at(4), ifItIs: nil, whileStatusIs: .active)
            try await store.replaceBlockSuspensionNote(reference: "A", with: at(3)...at(4), ifItIs: nil, whileStatusIs: nil)
            let (putBack, kept) = (try await noted("B"), try await noted("A"))
            #expect(putBack == at(3)...at(4) && kept == at(10)...at(10))
            try await store.replaceBlockSuspensionNote(reference: "B", with: nil, ifItIs: at(3)...at(4), whileStatusIs: nil)
            try await store.clearBlockSuspensionNote(reference: "N")
            #expect(try await noted("N") == nil)
            try await store.noteBlockSuspensionSent(reference: "B", at: at(5))

            // A pending command and an event that leaves the status keep it.
            _ = try await store.updateToken(reference: "A", audit: Self.audit("token:A")) { _, _ in .setPending(.deactivate) }
            try await event("A", .activated, .active)
            #expect(try await noted("A") == at(10)...at(10))
            // An unconfirmed status for the block keeps it on an ACTIVE token, with a time added.
            _ = try await store.updateToken(reference: "A", audit: Self.audit("token:A")) { _, _ in .setNotConfirmed(.active, suspendedBy: nil, blockSuspensionSentAt: at(40)) }
            #expect(try await noted("A") == at(10)...at(40))
            _ = try await store.updateToken(reference: "A", audit: Self.audit("token:A")) { _, _ in .setNotConfirmed(.active, suspendedBy: nil, blockSuspensionSentAt: nil) }
            #expect(try await noted("A") == at(10)...at(40))
            // An unconfirmed status other than ACTIVE clears it; ACTIVE from another state gets the time.
            _ = try await store.updateToken(reference: "I", audit: Self.audit("token:I")) { _, _ in .setNotConfirmed(.active, suspendedBy: nil, blockSuspensionSentAt: at(50)) }
            let (i, iNote) = (try await store.token(reference: "I"), try await noted("I"))
            #expect(i?.status == .active && iNote == at(50)...at(50))
            _ = try await store.updateToken(reference: "I", audit: Self.audit("token:I")) { _, _ in .setNotConfirmed(.suspended, suspendedBy: .cardBlocked, blockSuspensionSentAt: at(60)) }
            #expect(try await noted("I") == nil)
            // A recorded status clears it, also the same status again.
            _ = try await store.updateToken(reference: "A", audit: Self.audit("token:A")) { _, _ in .set(.active, suspendedBy: nil) }
            #expect(try await noted("A") == nil)
            // So does an event that changes the status.
            try await event("B", .suspended, .suspended)
            let reported = try await store.token(reference: "B")
            #expect(reported?.status == .suspended && reported?.blockSuspensionsSent == nil)
        }
    }

    @Test(arguments: StoreFactory.all)
    func everyStatusWriteKeepsSinceWhenATokenHasBeenAtOddsWithItsCard(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let t = { @Sendable (seconds: Double) in Self.now.addingTimeInterval(seconds) }
            let audit = { @Sendable (subject: String, seconds: Double) in AuditEntry(at: t(seconds), actor: "test", action: "test", subject: subject, detail: "") }
            let atOdds = { (since: Double, limit: Int) in try await store.tokensAtOddsWithTheirCard(since: t(since), limit: limit).map(\.tokenUniqueReference) }
            let setStatus = { (card: String, status: CardStatus, seconds: Double) in
                _ = try await store.setCardStatus(externalCardId: card, status: status, at: t(seconds)) { _ in audit("card:\(card)", seconds) }
            }
            let suspend = { (reference: String, source: SuspensionSource, seconds: Double) in
                _ = try await store.updateToken(reference: reference, audit: audit("token:\(reference)", seconds)) { _, _ in .set(.suspended, suspendedBy: source) }
            }
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            _ = try await store.putCard(try Self.card("c2"), audit: Self.audit("card:c2"))
            try await Self.insert(store, Self.token("A", card: "c1", status: .active))
            try await Self.insert(store, Self.token("B", card: "c1", status: .active))
            try await Self.insert(store, Self.token("C", card: "c1", status: .inactive))
            try await Self.insert(store, Self.token("D", card: "c2", status: .active))
            try await suspend("B", .customerService, 1)
            #expect(try await atOdds(1_000, 10).isEmpty)

            // Blocking c1 owes a suspension of its active token A only (B is suspended by
            // customer service, C is inactive).
            try await setStatus("c1", .blocked, 10)
            #expect(try await atOdds(9, 10).isEmpty)
            #expect(try await atOdds(10, 10) == ["A"])
            #expect(try await atOdds(1_000, 0).isEmpty)
            // Recording the suspension settles it.
            try await suspend("A", .cardBlocked, 20)
            #expect(try await atOdds(1_000, 10).isEmpty)

            // Unblocking owes a resumption of what the block suspended, not of B.
            try await setStatus("c1", .active, 30)
            #expect(try await atOdds(1_000, 10) == ["A"])
            #expect(try await atOdds(29, 10).isEmpty)
            // A command the token service did not confirm restarts the clock; a token not at
            // odds has no clock to restart.
            try await store.restartAtOddsClock(reference: "A", at: t(40))
            try await store.restartAtOddsClock(reference: "D", at: t(40))
            #expect(try await atOdds(39, 10).isEmpty)
            #expect(try await atOdds(40, 10) == ["A"])

            // A token event that leaves a token usable on a blocked card starts its clock.
            try await setStatus("c2", .blocked, 50)
            #expect(try await atOdds(1_000, 10) == ["A", "D"])
            _ = try await store.applyTokenEvent(eventId: "e-E", event: .created, tokenReference: "E", audit: audit("token:E", 60)) { _, _ in .insert(Self.token("E", card: "c2", status: .active)) }
            #expect(try await atOdds(59, 10) == ["A", "D"])
            #expect(try await atOdds(1_000, 10) == ["A", "D", "E"])
            #expect(try await atOdds(1_000, 2) == ["A", "D"])

            // Closing owes the deactivation of every live token; A keeps its earlier clock.
            try await setStatus("c1", .closed, 70)
            #expect(try await atOdds(69, 10) == ["A", "D", "E"])
            #expect(try await atOdds(1_000, 10) == ["A", "D", "E", "B", "C"])
            _ = try await store.updateToken(reference: "C", audit: audit("token:C", 80)) { _, _ in .set(.deactivated, suspendedBy: nil) }
            #expect(try await atOdds(1_000, 10) == ["A", "D", "E", "B"])

            // Replacing c2's PAN leaves its live tokens of the old PAN owing a deactivation: those
            // already at odds keep their clocks, one that was not (F, suspended by customer
            // service on the blocked card) starts its clock at the replacement.
            try await Self.insert(store, Self.token("F", card: "c2", status: .suspended, suspendedBy: .customerService))
            #expect(try await atOdds(1_000, 10) == ["A", "D", "E", "B"])
            _ = try await store.putCard(try Self.card("c2", pur: "PUR-new", hash: "hash-new"), audit: audit("card:c2", 90))
            #expect(try await atOdds(89, 10) == ["A", "D", "E", "B"])
            #expect(try await atOdds(1_000, 10) == ["A", "D", "E", "B", "F"])
            for reference in ["D", "E", "F"] {
                _ = try await store.updateToken(reference: reference, audit: audit("token:\(reference)", 95)) { _, _ in .set(.deactivated, suspendedBy: nil) }
            }
            #expect(try await atOdds(1_000, 10) == ["A", "B"])
        }
    }

    /// A command the token service did not confirm, recorded as pending: kept and read back,
    /// counted as at odds (SQL and Swift agree), settled as ``PendingTokenCommand`` says.
    @Test(arguments: StoreFactory.all)
    func aPendingCommandIsKeptCountsAsAtOddsAndIsSettledByWhatItWaitsFor(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let t = { @Sendable (seconds: Double) in Self.now.addingTimeInterval(seconds) }
            let audit = { @Sendable (subject: String, seconds: Double) in AuditEntry(at: t(seconds), actor: "test", action: "test", subject: subject, detail: "") }
            let atOdds = { () in try await store.tokensAtOddsWithTheirCard(since: t(1_000), limit: 10).map(\.tokenUniqueReference) }
            let change = { (reference: String, seconds: Double, change: TokenChange) in
                try await store.updateToken(reference: reference, audit: audit("token:\(reference)", seconds)) { _, _ in change }
            }
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            try await Self.insert(store, Self.token("A", status: .suspended, suspendedBy: .customerService))
            try await Self.insert(store, Self.token("B", status: .inactive))
            try await Self.insert(store, Self.token("C", status: .suspended, suspendedBy: .tokenService))
            #expect(try await atOdds().isEmpty)

            // A suspension to send again: written with its audit entry, read back, at odds.
            let owed = try await change("A", 10, .setPending(.suspend))
            guard case .updated(let before, let after) = owed else { Issue.record("expected an update, got \(owed)"); return }
            #expect(before.pendingCommand == nil && after.pendingCommand == .suspend && after.status == .suspended && after.suspendedBy == .customerService)
            #expect(try await store.token(reference: "A")?.pendingCommand == .suspend)
            #expect(try await store.token(reference: "A")?.resource.pendingCommand == "SUSPEND")
            #expect(try await store.auditEntries(subject: "token:A").count == 2)
            #expect(try await atOdds() == ["A"])
            #expect(try await store.tokensAtOddsWithTheirCard(since: t(9), limit: 10).isEmpty)
            // Recording it again changes nothing and writes no audit entry.
            let again = try await change("A", 11, .setPending(.suspend))
            guard case .unchanged(let same) = again else { Issue.record("expected no change, got \(again)"); return }
            #expect(same.pendingCommand == .suspend)
            #expect(try await store.auditEntries(subject: "token:A").count == 2)
            // A (late) report of a suspension, leaving the token as it was, settles nothing: it
            // says nothing of the resume the pending suspension answers.
            let report = try await store.applyTokenEvent(eventId: "e-A", event: .suspended, tokenReference: "A", audit: audit("token:A", 20)) { current, _ in
                .update(status: .suspended, suspendedBy: current?.suspendedBy, tokenLast4: nil)
            }
            guard case .applied(let reported) = report else { Issue.record("expected the event applied, got \(report)"); return }
            #expect(reported.pendingCommand == .suspend && reported.suspendedBy == .customerService)
            #expect(try await store.token(reference: "A")?.pendingCommand == .suspend)
            #expect(try await atOdds() == ["A"])
            // A report that changes the token does: TMP then records what the token service holds.
            _ = try await store.applyTokenEvent(eventId: "e-A2", event: .resumed, tokenReference: "A", audit: audit("token:A", 21)) { _, _ in
                .update(status: .active, suspendedBy: nil, tokenLast4: nil)
            }
            #expect(try await store.token(reference: "A")?.pendingCommand == nil)
            #expect(try await atOdds().isEmpty)
            // A pending suspension on a token not recorded suspended (as a server of an earlier
            // version, which does not settle it, could leave one) is not owed.
            _ = try await change("A", 22, .setPending(.suspend))
            #expect(try await store.token(reference: "A")?.pendingCommand == .suspend)
            #expect(try await atOdds().isEmpty)

            // Any status TMP records for what the token service holds settles a suspension.
            _ = try await change("C", 30, .setPending(.suspend))
            #expect(try await atOdds() == ["C"])
            _ = try await change("C", 31, .set(.active, suspendedBy: nil))
            #expect(try await store.token(reference: "C")?.pendingCommand == nil)
            #expect(try await atOdds().isEmpty)

            // A deactivation stays pending through other status changes until the token ends.
            _ = try await change("B", 40, .setPending(.deactivate))
            #expect(try await store.tokensAtOddsWithTheirCard(since: t(40), limit: 10).map(\.tokenUniqueReference) == ["B"])
            _ = try await change("B", 41, .set(.active, suspendedBy: nil))
            _ = try await store.applyTokenEvent(eventId: "e-B", event: .suspended, tokenReference: "B", audit: audit("token:B", 42)) { _, _ in
                .update(status: .suspended, suspendedBy: .tokenService, tokenLast4: nil)
            }
            let pending = try #require(try await store.token(reference: "B"))
            #expect(pending.pendingCommand == .deactivate && pending.status == .suspended)
            // It keeps the clock it started with.
            #expect(try await store.tokensAtOddsWithTheirCard(since: t(40), limit: 10).map(\.tokenUniqueReference) == ["B"])
            // SQL and Swift agree on every token, whatever the card's status.
            for status in [CardStatus.blocked, .active] {
                _ = try await store.setCardStatus(externalCardId: "c1", status: status, at: t(45)) { _ in audit("card:c1", 45) }
                let card = try #require(try await store.card(externalCardId: "c1"))
                let found = try await atOdds()
                for token in try await store.tokens(externalCardId: "c1") {
                    #expect(token.isAtOdds(with: card) == found.contains(token.tokenUniqueReference), "\(status): \(token)")
                }
            }
            #expect(try await atOdds() == ["B"])
            _ = try await change("B", 50, .set(.deactivated, suspendedBy: nil))
            #expect(try await store.token(reference: "B")?.pendingCommand == nil)
            #expect(try await atOdds().isEmpty)
        }
    }

    /// One holder at a time per token: another holder is refused until the lease is given
    /// back or expires; the holder may take it again (extending it); a holder gives back only
    /// its own lease; tokens' leases are independent.
    @Test(arguments: StoreFactory.all)
    func aTokenCommandLeaseHasOneHolderUntilGivenBackOrExpired(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            #expect(try await store.takeTokenCommandLease(reference: "T1", holder: "A", for: .seconds(60)))
            #expect(try await !store.takeTokenCommandLease(reference: "T1", holder: "B", for: .seconds(60)))
            #expect(try await store.takeTokenCommandLease(reference: "T1", holder: "A", for: .seconds(60)))
            #expect(try await store.takeTokenCommandLease(reference: "T2", holder: "B", for: .seconds(60)))
            // References are the same only byte for byte.
            #expect(try await store.takeTokenCommandLease(reference: "t1", holder: "B", for: .seconds(60)))
            try await store.releaseTokenCommandLease(reference: "T1", holder: "B")
            #expect(try await !store.takeTokenCommandLease(reference: "T1", holder: "B", for: .seconds(60)))
            try await store.releaseTokenCommandLease(reference: "T1", holder: "A")
            #expect(try await store.takeTokenCommandLease(reference: "T1", holder: "B", for: .milliseconds(1)))
            // Expired (B never gave it back): A takes it.
            try await Task.sleep(for: .milliseconds(50))
            #expect(try await store.takeTokenCommandLease(reference: "T1", holder: "A", for: .seconds(60)))
            #expect(try await !store.takeTokenCommandLease(reference: "T1", holder: "B", for: .seconds(60)))
        }
    }

    @Test(arguments: StoreFactory.all)
    func aRealignmentClaimRestartsTheClocksOfTheTokensItTakes(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let t = { @Sendable (seconds: Double) in Self.now.addingTimeInterval(seconds) }
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            for reference in ["A", "B", "C"] {
                try await Self.insert(store, Self.token(reference, status: .active))
            }
            _ = try await store.setCardStatus(externalCardId: "c1", status: .blocked, at: t(10)) { _ in Self.audit("card:c1") }
            #expect(try await store.claimTokensAtOddsWithTheirCard(since: t(9), limit: 10, at: t(100)).isEmpty)
            #expect(try await store.claimTokensAtOddsWithTheirCard(since: t(70), limit: 0, at: t(100)).isEmpty)
            // The round at t(100) with a 30 s grace takes two, oldest first, restarting their clocks.
            let first = try await store.claimTokensAtOddsWithTheirCard(since: t(70), limit: 2, at: t(100))
            #expect(first.map(\.tokenUniqueReference) == ["A", "B"])
            #expect(first.allSatisfy { $0.status == .active && $0.externalCardId == "c1" })
            #expect(try await store.tokensAtOddsWithTheirCard(since: t(99), limit: 10).map(\.tokenUniqueReference) == ["C"])
            #expect(try await store.tokensAtOddsWithTheirCard(since: t(100), limit: 10).map(\.tokenUniqueReference) == ["C", "A", "B"])
            // Another round at the same time takes only what is left…
            #expect(try await store.claimTokensAtOddsWithTheirCard(since: t(70), limit: 10, at: t(100)).map(\.tokenUniqueReference) == ["C"])
            #expect(try await store.claimTokensAtOddsWithTheirCard(since: t(70), limit: 10, at: t(100)).isEmpty)
            // …and a grace after the claims, all three are due again.
            #expect(try await store.claimTokensAtOddsWithTheirCard(since: t(100), limit: 10, at: t(130)).map(\.tokenUniqueReference) == ["A", "B", "C"])
            // A token that stopped being at odds is never taken.
            _ = try await store.updateToken(reference: "B", audit: Self.audit("token:B")) { _, _ in .set(.suspended, suspendedBy: .cardBlocked) }
            #expect(try await store.claimTokensAtOddsWithTheirCard(since: t(1_000), limit: 10, at: t(1_000)).map(\.tokenUniqueReference) == ["A", "C"])
        }
    }

    @Test(arguments: StoreFactory.all)
    func concurrentRealignmentClaimsOnTwoHandlesTakeEachTokenOnce(factory: StoreFactory) async throws {
        try await factory.withTwoHandles { first, second in
            let t = { @Sendable (seconds: Double) in Self.now.addingTimeInterval(seconds) }
            _ = try await first.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            let references = (0..<40).map { String(format: "T%02d", $0) }
            for reference in references {
                try await Self.insert(first, Self.token(reference, status: .active))
            }
            _ = try await first.setCardStatus(externalCardId: "c1", status: .blocked, at: t(10)) { _ in Self.audit("card:c1") }
            // Two instances' rounds at once, each in steps of 7 until nothing is left.
            let taken = try await withThrowingTaskGroup(of: [String].self) { group in
                for store in [first, second] {
                    group.addTask {
                        var mine: [String] = []
                        while true {
                            let claimed = try await store.claimTokensAtOddsWithTheirCard(since: t(70), limit: 7, at: t(100)).map(\.tokenUniqueReference)
                            if claimed.isEmpty { return mine }
                            mine += claimed
                        }
                    }
                }
                return try await group.reduce(into: [[String]]()) { $0.append($1) }
            }
            let all = taken.flatMap { $0 }
            #expect(all.count == references.count, "no token taken twice")
            #expect(Set(all) == Set(references))
        }
    }

    @Test(arguments: StoreFactory.all)
    func tokenSearchFiltersByOwner(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            _ = try await store.putCard(try Self.card("c2", user: "bob"), audit: Self.audit("card:c2"))
            try await Self.insert(store, Self.token("A", card: "c1"))
            try await Self.insert(store, Self.token("B", card: "c2", user: "bob"))
            #expect(try await store.tokens(references: ["A", "B", "C"], ownedBy: "alice").map(\.tokenUniqueReference) == ["A"])
            #expect(try await store.tokens(references: [], ownedBy: "alice").isEmpty)
            #expect(try await store.tokens(externalCardId: "c2").map(\.tokenUniqueReference) == ["B"])
        }
    }

    @Test(arguments: StoreFactory.all)
    func updateTokenAppliesRejectsOrLeavesUnchanged(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            try await Self.insert(store, Self.token("T1"))
            let updated = try await store.updateToken(reference: "T1", audit: Self.audit("token:T1", "activate")) { _, _ in .set(.active, suspendedBy: nil) }
            guard case .updated(let before, let after) = updated else { Issue.record("expected an update"); return }
            #expect(before.status == .inactive && after.status == .active)
            let rejected = try await store.updateToken(reference: "T1", audit: Self.audit("token:T1", "nope")) { _, _ in .reject("no") }
            #expect(rejected == .rejected(after, "no"))
            let unchanged = try await store.updateToken(reference: "T1", audit: Self.audit("token:T1", "noop")) { _, _ in .unchanged }
            #expect(unchanged == .unchanged(after))
            #expect(try await store.updateToken(reference: "missing", audit: Self.audit("token:missing")) { _, _ in .unchanged } == .notFound)
            #expect(try await store.auditEntries(subject: "token:T1").map(\.action) == ["test", "activate"])
        }
    }

    @Test(arguments: StoreFactory.all)
    func updateTokenDecidesOnTheCardAsStored(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            try await Self.insert(store, Self.token("T1"))
            _ = try await Self.setStatus(store, "c1", .blocked)
            let result = try await store.updateToken(reference: "T1", audit: Self.audit("token:T1")) { token, card in
                .reject("\(token.externalCardId) \(card?.externalCardId ?? "-") \(card?.status.rawValue ?? "-")")
            }
            #expect(result == .rejected(Self.token("T1"), "c1 c1 BLOCKED"))
        }
    }

    /// A token change from another handle (another instance) decides on the card as the card's
    /// status change under way commits it, not as it was before: an activation that overlaps a
    /// block is refused, rather than recorded on an ACTIVE card the block then changes.
    @Test(arguments: StoreFactory.all)
    func aTokenChangeDecidesOnTheCardAsAStatusChangeUnderWayCommitsIt(factory: StoreFactory) async throws {
        try await factory.withTwoHandles { first, second in
            _ = try await first.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            try await Self.insert(first, Self.token("T1"))
            let blocking = Locked(false)
            let block = Task {
                try await second.setCardStatus(externalCardId: "c1", status: .blocked, at: Self.now) { previous in
                    blocking.withValue { $0 = true }
                    // The status change is written, not committed: long enough for the token
                    // change to read the card meanwhile, were it not held.
                    Thread.sleep(forTimeInterval: 0.4)
                    return AuditEntry(at: Self.now, actor: "test", action: "card.status", subject: "card:c1", detail: "\(previous.rawValue) -> BLOCKED")
                }
            }
            while !blocking.current { try await Task.sleep(for: .milliseconds(1)) }
            let seen = Locked<CardStatus?>(nil)
            let activation = try await first.updateToken(reference: "T1", audit: Self.audit("token:T1", "activate")) { _, card in
                seen.withValue { $0 = card?.status }
                return card?.status == .active ? .set(.active, suspendedBy: nil) : .reject("card is \(card?.status.rawValue ?? "gone")")
            }
            _ = try await block.value
            #expect(seen.current == .blocked)
            #expect(activation == .rejected(Self.token("T1"), "card is BLOCKED"))
            #expect(try await second.token(reference: "T1")?.status == .inactive)
        }
    }

    /// A token an event inserts is answered as stored (dates at the store's precision, the
    /// owner as committed): the same as a later read of it.
    @Test(arguments: StoreFactory.all)
    func anInsertedTokenIsAnsweredAsStored(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            var token = Self.token("T1", user: "someone-else")
            token.createdAt = Self.now.addingTimeInterval(0.123_456_789)
            token.updatedAt = token.createdAt
            guard case .applied(let answered) = try await Self.insert(store, token) else { Issue.record("expected the insert to apply"); return }
            #expect(answered.userId == "alice")
            #expect(try await store.token(reference: "T1") == answered)
        }
    }

    @Test(arguments: StoreFactory.all)
    func tokenEventsApplyOncePerEventId(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            #expect(try await Self.insert(store, Self.token("T1"), event: "e1") == .applied(Self.token("T1")))
            let duplicate = try await store.applyTokenEvent(eventId: "e1", event: .created, tokenReference: "T1", audit: Self.audit("token:T1")) { _, _ in .update(status: .active, suspendedBy: nil, tokenLast4: nil) }
            #expect(duplicate == .duplicate(Self.token("T1")))
            // The same id for another token's event is not a duplicate: that event would be lost.
            #expect(try await Self.insert(store, Self.token("T2"), event: "e1") == .eventIdReused(tokenReference: "T1", event: .created))
            #expect(try await store.token(reference: "T2") == nil)
            // So is the same id for another event of the same token.
            let suspended = try await store.applyTokenEvent(eventId: "e1", event: .suspended, tokenReference: "T1", audit: Self.audit("token:T1")) { _, _ in
                .update(status: .suspended, suspendedBy: nil, tokenLast4: nil)
            }
            #expect(suspended == .eventIdReused(tokenReference: "T1", event: .created))
            #expect(try await store.token(reference: "T1")?.status == Self.token("T1").status)
            // And the same id for the same kind of event at another time: another event.
            let at = { (seconds: Int64) in EventTime(millisecondsSince1970: 1_790_000_000_000 + seconds * 1000) }
            let suspend = { @Sendable (_: TokenRecord?, _: CardRecord?) -> TokenEventEffect in .update(status: .suspended, suspendedBy: .tokenService, tokenLast4: nil) }
            guard case .applied = try await store.applyTokenEvent(eventId: "e3", event: .suspended, tokenReference: "T1", occurredAt: at(3), audit: Self.audit("token:T1"), suspend) else {
                Issue.record("a timed event was not applied")
                return
            }
            #expect(try await store.applyTokenEvent(eventId: "e3", event: .suspended, tokenReference: "T1", occurredAt: at(3), audit: Self.audit("token:T1"), suspend) == .duplicate(try await store.token(reference: "T1")))
            #expect(try await store.applyTokenEvent(eventId: "e3", event: .suspended, tokenReference: "T1", occurredAt: at(5), audit: Self.audit("token:T1"), suspend) == .eventIdReused(tokenReference: "T1", event: .suspended))
            #expect(try await store.applyTokenEvent(eventId: "e3", event: .suspended, tokenReference: "T1", audit: Self.audit("token:T1"), suspend) == .eventIdReused(tokenReference: "T1", event: .suspended))
            // An id recorded without a time is its token's event at any time.
            #expect(try await store.applyTokenEvent(eventId: "e1", event: .created, tokenReference: "T1", occurredAt: at(1), audit: Self.audit("token:T1"), suspend) == .duplicate(try await store.token(reference: "T1")))
            let rejected = try await store.applyTokenEvent(eventId: "e2", event: .activated, tokenReference: "T1", audit: Self.audit("token:T1")) { _, _ in .reject("bad") }
            #expect(rejected == .rejected("bad"))
            // A rejected event id is not burnt: a corrected retry with it applies.
            let retried = try await store.applyTokenEvent(eventId: "e2", event: .activated, tokenReference: "T1", audit: Self.audit("token:T1")) { _, _ in .update(status: .active, suspendedBy: nil, tokenLast4: "1234") }
            guard case .applied(let token) = retried else { Issue.record("expected applied"); return }
            #expect(token.status == .active && token.tokenLast4 == "1234")
        }
    }

    @Test(arguments: StoreFactory.all)
    func aTokensNewestEventTimeIsKeptAndAStaleEventOnlyRecordsItsId(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            var token = Self.token("T1")
            token.lastEventAt = EventTime(millisecondsSince1970: 1_000)
            try await Self.insert(store, token, event: "e1")
            #expect(try await store.token(reference: "T1")?.lastEventAt == EventTime(millisecondsSince1970: 1_000))
            let update = { (id: String, status: TokenStatus, ms: Int64?) in
                try await store.applyTokenEvent(eventId: id, event: .activated, tokenReference: "T1", audit: Self.audit("token:T1")) { _, _ in
                    .update(status: status, suspendedBy: nil, tokenLast4: nil, eventTime: ms.map(EventTime.init(millisecondsSince1970:)))
                }
            }
            _ = try await update("e2", .active, 3_000)
            // The newest time stays when an update says an older one, or none.
            _ = try await update("e3", .active, 2_000)
            _ = try await update("e4", .active, nil)
            #expect(try await store.token(reference: "T1")?.lastEventAt == EventTime(millisecondsSince1970: 3_000))
            let stale = try await store.applyTokenEvent(eventId: "e5", event: .suspended, tokenReference: "T1", audit: Self.audit("token:T1", "stale")) { _, _ in .stale }
            guard case .stale(let unchanged) = stale else { Issue.record("expected stale, got \(stale)"); return }
            #expect(unchanged.status == .active)
            let again = try await store.applyTokenEvent(eventId: "e5", event: .suspended, tokenReference: "T1", audit: Self.audit("token:T1")) { _, _ in .update(status: .suspended, suspendedBy: nil, tokenLast4: nil) }
            #expect(again == .duplicate(unchanged))
            #expect(try await store.auditEntries(subject: "token:T1").map(\.action).contains("stale") == false)
            // A stale event may bring the token number's last four digits the token lacks (its
            // late CREATED): they are kept, and audited; digits already held are not replaced.
            let filling = try await store.applyTokenEvent(eventId: "e6", event: .created, tokenReference: "T1", audit: Self.audit("token:T1", "late-created")) { _, _ in .staleFillingIn(tokenLast4: "4321") }
            guard case .stale(let filled) = filling else { Issue.record("expected stale, got \(filling)"); return }
            #expect(filled.tokenLast4 == "4321" && filled.status == .active)
            #expect(try await store.token(reference: "T1") == filled)
            #expect(try await store.auditEntries(subject: "token:T1").filter { $0.action == "late-created" }.map(\.detail).allSatisfy { $0.hasSuffix("(stale: only its tokenLast4 recorded)") })
            #expect(try await store.auditEntries(subject: "token:T1").contains { $0.action == "late-created" })
            let kept = try await store.applyTokenEvent(eventId: "e7", event: .created, tokenReference: "T1", audit: Self.audit("token:T1", "late-again")) { _, _ in .staleFillingIn(tokenLast4: "9999") }
            #expect(kept == .stale(filled))
            #expect(try await store.token(reference: "T1")?.tokenLast4 == "4321")
            #expect(try await store.auditEntries(subject: "token:T1").contains { $0.action == "late-again" } == false)
            #expect(try await store.applyTokenEvent(eventId: "e6", event: .created, tokenReference: "T1", audit: Self.audit("token:T1")) { _, _ in .stale } == .duplicate(filled))
        }
    }

    @Test(arguments: StoreFactory.all)
    func activationDataIsConsumedOnce(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let attempt = ProvisioningAttempt(activationDataId: "jti-1", externalCardId: "c1", userId: "alice", deviceType: .watch, nonceHash: "nh", leafFingerprint: "fp", createdAt: Self.now, expiresAt: Self.now + 600)
            try await store.recordProvisioningAttempt(attempt)
            #expect(try await store.provisioningAttempt(activationDataId: "jti-1") == attempt)
            #expect(try await store.provisioningAttempt(activationDataId: "jti-2") == nil)
            #expect(try await store.recordTokenizationDecision(Self.decision("r1"), consumingActivationData: "jti-1"))
            #expect(try await !store.recordTokenizationDecision(Self.decision("r2"), consumingActivationData: "jti-1"))
            #expect(try await store.tokenizationDecision(requestId: "r2") == nil)
        }
    }

    /// A decision that lets a token be made is recorded only while its card is still as it was
    /// decided on; otherwise nothing is recorded and its activation data stays unused.
    @Test(arguments: StoreFactory.all)
    func aDecisionIsRecordedOnlyWhileItsCardIsAsDecidedOn(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1", "card.create"))
            let asDecided = DecidedCard(externalCardId: "c1", panUniqueReference: "PUR-c1", userId: "alice")
            for (index, changed) in [
                DecidedCard(externalCardId: "c1", panUniqueReference: "PUR-c1", userId: "bob"),
                DecidedCard(externalCardId: "c1", panUniqueReference: "PUR-other", userId: "alice"),
                DecidedCard(externalCardId: "c2", panUniqueReference: "PUR-c1", userId: "alice"),
            ].enumerated() {
                #expect(try await store.recordTokenizationDecision(Self.decision("r-changed-\(index)"), consumingActivationData: "jti-1", decidedOn: changed) == .cardChanged)
                #expect(try await store.tokenizationDecision(requestId: "r-changed-\(index)") == nil, "nothing recorded")
            }
            _ = try await store.setCardStatus(externalCardId: "c1", status: .blocked, at: Self.now) { _ in Self.audit("card:c1", "card.status") }
            #expect(try await store.recordTokenizationDecision(Self.decision("r-blocked"), consumingActivationData: "jti-1", decidedOn: asDecided) == .cardChanged)
            _ = try await store.setCardStatus(externalCardId: "c1", status: .active, at: Self.now) { _ in Self.audit("card:c1", "card.status") }
            // The activation data was not used up by any of them.
            #expect(try await store.recordTokenizationDecision(Self.decision("r-1"), consumingActivationData: "jti-1", decidedOn: asDecided) == .recorded)
            #expect(try await store.tokenizationDecision(requestId: "r-1", usingUp: "jti-1") != nil)
            #expect(try await store.recordTokenizationDecision(Self.decision("r-2"), consumingActivationData: "jti-1", decidedOn: asDecided) == .activationDataUsedBefore)
        }
    }

    @Test(arguments: StoreFactory.all)
    func aCardsTrailShowsItsSealsByTimeAmongItsEvents(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1", "card.create"))
            func seal(_ id: String, card: String = "c1", device: DeviceType, at offset: TimeInterval) async throws {
                try await store.recordProvisioningAttempt(
                    ProvisioningAttempt(activationDataId: id, externalCardId: card, userId: "alice", deviceType: device, nonceHash: "nh", leafFingerprint: String(repeating: "ab", count: 32), createdAt: Self.now + offset, expiresAt: Self.now + 600)
                )
            }
            try await seal("jti-2", device: .watch, at: 3)
            try await seal("jti-1", device: .phone, at: 1)
            try await seal("jti-x", card: "c2", device: .phone, at: 1)
            _ = try await store.setCardStatus(externalCardId: "c1", status: .blocked, at: Self.now + 2) { previous in
                AuditEntry(at: Self.now + 2, actor: "issuer", action: "card.status", subject: "card:c1", detail: "\(previous.rawValue) -> BLOCKED")
            }
            let trail = try await store.auditEntries(subject: "card:c1")
            #expect(trail.map(\.action) == ["card.create", "card.seal", "card.status", "card.seal"])
            #expect(trail[1] == AuditEntry(at: Self.now + 1, actor: "user:alice", action: "card.seal", subject: "card:c1", detail: "sealed for PHONE; leaf abababababababab"))
            #expect(trail[3].detail == "sealed for WATCH; leaf abababababababab")
            // Seals belong to cards only; another card's seal is not in this trail.
            #expect(try await store.auditEntries(subject: "card:c2").map(\.action) == ["card.seal"])
            #expect(try await store.auditEntries(subject: "token:jti-1").isEmpty)
        }
    }

    @Test(arguments: StoreFactory.all)
    func latestDecisionWinsPerCardAndDevice(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            for (index, decision) in [TokenizationDecision.requireAdditionalAuthentication, .approved].enumerated() {
                try await store.recordTokenizationDecision(TokenizationDecisionRecord(requestId: "r\(index)", panUniqueReference: "PUR-1", deviceType: .phone, decision: decision, reason: "x", decidedAt: Self.now + Double(index)))
            }
            #expect(try await store.latestTokenizationDecision(panUniqueReference: "PUR-1", deviceType: .phone)?.decision == .approved)
            #expect(try await store.latestTokenizationDecision(panUniqueReference: "PUR-1", deviceType: .watch) == nil)
            // A decline after it is the latest decision, but not the latest that made a token.
            try await store.recordTokenizationDecision(TokenizationDecisionRecord(requestId: "r9", panUniqueReference: "PUR-1", deviceType: .phone, decision: .declined, reason: "activation_data_replayed", decidedAt: Self.now + 9))
            #expect(try await store.latestTokenizationDecision(panUniqueReference: "PUR-1", deviceType: .phone)?.decision == .declined)
            #expect(try await store.latestTokenizingDecision(panUniqueReference: "PUR-1", deviceType: .phone)?.requestId == "r1")
            #expect(try await store.latestTokenizingDecision(panUniqueReference: "PUR-1", deviceType: .watch) == nil)
        }
    }

    @Test(arguments: StoreFactory.all)
    func anAuditEntryCanBeRecordedOnItsOwn(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.recordAudit(Self.audit("token:T9", "token.suspended"))
            #expect(try await store.auditEntries(subject: "token:T9").map(\.action) == ["token.suspended"])
            #expect(try await store.auditEntries(subject: "token:T8").isEmpty)
        }
    }

    @Test(arguments: StoreFactory.all)
    func cardArtIsReplacedById(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.putCardArt(CardArtRecord(artId: "a1", contentType: "image/png", data: Data([1]), updatedAt: Self.now), audit: Self.audit("card_art:a1"))
            try await store.putCardArt(CardArtRecord(artId: "a1", contentType: "application/pdf", data: Data([2]), updatedAt: Self.now), audit: Self.audit("card_art:a1"))
            #expect(try await store.cardArt(id: "a1") == CardArtRecord(artId: "a1", contentType: "application/pdf", data: Data([2]), updatedAt: Self.now))
            #expect(try await store.cardArt(id: "a2") == nil)
        }
    }

    /// An art's version is read without its file and equals the stored record's, to the
    /// precision the store keeps its time in (a time with sub-millisecond digits here).
    @Test(arguments: StoreFactory.all)
    func cardArtVersionMatchesTheStoredRecord(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let file = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0) })
            try await store.putCardArt(CardArtRecord(artId: "a1", contentType: "image/png", data: file, updatedAt: Self.now + 0.123456), audit: Self.audit("card_art:a1"))
            let version = try #require(try await store.cardArtVersion(id: "a1"))
            #expect(version.contentType == "image/png" && version.byteCount == 300_000)
            #expect(abs(version.updatedAt.timeIntervalSince(Self.now + 0.123456)) < 0.001)
            #expect(try await store.cardArt(id: "a1")?.version == version)
            try await store.putCardArt(CardArtRecord(artId: "a1", contentType: "application/pdf", data: Data([2]), updatedAt: Self.now + 1), audit: Self.audit("card_art:a1"))
            #expect(try await store.cardArtVersion(id: "a1") == CardArtVersion(contentType: "application/pdf", byteCount: 1, updatedAt: try #require(try await store.cardArt(id: "a1")).updatedAt))
            #expect(try await store.cardArtVersion(id: "a1") != version)
            #expect(try await store.cardArtVersion(id: "a2") == nil)
        }
    }

    @Test(arguments: StoreFactory.all)
    func migratingTwiceIsHarmless(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            #expect(try await store.migrate().isEmpty)
            #expect(try await store.pendingMigrations().isEmpty)
            try await store.ping()
        }
    }

    // MARK: Several handles (processes) on one database

    @Test(arguments: StoreFactory.all)
    func concurrentReadDecideWriteLosesNoUpdate(factory: StoreFactory) async throws {
        // Each change flips ACTIVE <-> SUSPENDED from what it reads. A lost update (two changes
        // deciding on the same state) would leave the parity wrong or an audit entry short.
        let flips = 24
        try await factory.withTwoHandles { first, second in
            _ = try await first.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            try await Self.insert(first, Self.token("T1", status: .active))
            let results = try await withThrowingTaskGroup(of: TokenUpdateResult.self) { group in
                for index in 0..<flips {
                    let store = index.isMultiple(of: 2) ? first : second
                    group.addTask {
                        try await store.updateToken(reference: "T1", audit: Self.audit("token:T1", "flip")) { current, _ in
                            current.status == .active ? .set(.suspended, suspendedBy: .customerService) : .set(.active, suspendedBy: nil)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let fromActive = results.filter { if case .updated(let before, _) = $0 { before.status == .active } else { false } }
            let fromSuspended = results.filter { if case .updated(let before, _) = $0 { before.status == .suspended } else { false } }
            #expect(fromActive.count == flips / 2 && fromSuspended.count == flips / 2)
            #expect(try await second.token(reference: "T1")?.status == .active)
            #expect(try await first.auditEntries(subject: "token:T1").filter { $0.action == "flip" }.count == flips)
        }
    }

    @Test(arguments: StoreFactory.all)
    func twoFirstPutsOfOneCardSeeEachOther(factory: StoreFactory) async throws {
        // Each round two handles create the same new card with different PANs at once: one
        // creates it and the other replaces it, so exactly one sees no previous version and the
        // first one's reference is retired.
        try await factory.withTwoHandles { first, second in
            for round in 0..<10 {
                let id = "race-\(round)"
                let results = try await withThrowingTaskGroup(of: (String, CardRecord?).self) { group in
                    for (store, name) in [(first, "a"), (second, "b")] {
                        group.addTask {
                            (name, try await store.putCard(try Self.card(id, pur: "PUR-\(id)-\(name)", hash: "hash-\(id)-\(name)"), audit: Self.audit("card:\(id)")))
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(results.filter { $0.1 == nil }.count == 1, "round \(round): \(results.map { "\($0.0): \($0.1?.panUniqueReference ?? "none")" })")
                let winner = try #require(try await first.card(externalCardId: id))
                let loser = winner.panUniqueReference == "PUR-\(id)-a" ? "PUR-\(id)-b" : "PUR-\(id)-a"
                #expect(try await second.card(retiredPanUniqueReference: loser)?.externalCardId == id)
            }
        }
    }

    @Test(arguments: StoreFactory.all)
    func twoNewCardsWithOnePANAtOnceMakeOneCard(factory: StoreFactory) async throws {
        // Each round two handles create two different cards with the same PAN at once: one is
        // stored, the other is refused as a duplicate naming it, and leaves no trace.
        try await factory.withTwoHandles { first, second async throws in
            for round in 0..<10 {
                let hash = "hash-shared-\(round)"
                let outcomes = await withTaskGroup(of: (String, Result<CardRecord?, any Error>).self) { group in
                    for (store, id) in [(first, "pan-\(round)-a"), (second, "pan-\(round)-b")] {
                        group.addTask {
                            do {
                                return (id, .success(try await store.putCard(try Self.card(id, hash: hash), audit: Self.audit("card:\(id)"))))
                            } catch {
                                return (id, .failure(error))
                            }
                        }
                    }
                    return await group.reduce(into: []) { $0.append($1) }
                }
                let stored = outcomes.filter { if case .success(nil) = $0.1 { true } else { false } }.map(\.0)
                let refused = outcomes.compactMap { outcome -> (String, StoreError)? in
                    if case .failure(let error as StoreError) = outcome.1 { (outcome.0, error) } else { nil }
                }
                #expect(stored.count == 1 && refused.count == 1, "round \(round): \(outcomes)")
                guard let winner = stored.first, let (loser, refusal) = refused.first else { continue }
                #expect(refusal == .duplicatePAN(existingCardId: winner))
                #expect(try await first.card(panLookupHash: hash)?.externalCardId == winner)
                #expect(try await second.card(externalCardId: loser) == nil)
                #expect(try await second.auditEntries(subject: "card:\(loser)").isEmpty)
                #expect(try await first.auditEntries(subject: "card:\(winner)").count == 1)
            }
        }
    }

    @Test(arguments: StoreFactory.all)
    func anyCardIsACardWhileThereIsOne(factory: StoreFactory) async throws {
        try await factory.withStore { store in
            #expect(try await store.anyCard() == nil)
            _ = try await store.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            _ = try await store.putCard(try Self.card("c2"), audit: Self.audit("card:c2"))
            let card = try #require(try await store.anyCard())
            #expect(["c1", "c2"].contains(card.externalCardId))
            // The card as stored, encrypted number and all: what the start-up key check reads.
            #expect(card == (try await store.card(externalCardId: card.externalCardId)))
            #expect(card.encryptedPAN == "v1.k.AAAA")
        }
    }

    @Test(arguments: StoreFactory.all)
    func aClosedCardStaysClosedWhenStatusChangesRace(factory: StoreFactory) async throws {
        // Each round a fresh card gets one CLOSE and several reopening changes at once. Closing
        // is never refused, so the card must end CLOSED; every change decided on the card as
        // stored, so the audit trail is a chain of legal steps from ACTIVE.
        let rounds = 20
        let contenders: [CardStatus] = [.active, .blocked, .closed, .active, .blocked, .active]
        try await factory.withTwoHandles { first, second in
            for round in 0..<rounds {
                let id = "race-\(round)"
                _ = try await first.putCard(try Self.card(id), audit: Self.audit("card:\(id)", "create"))
                let results = try await withThrowingTaskGroup(of: (CardStatus, CardStatusUpdate).self) { group in
                    for (index, status) in contenders.enumerated() {
                        let store = index.isMultiple(of: 2) ? first : second
                        group.addTask { (status, try await Self.setStatus(store, id, status)) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let stored = try await second.card(externalCardId: id)
                #expect(stored?.status == .closed, "round \(round): \(results)")
                for (status, result) in results {
                    switch result {
                    case .updated(_, let card): #expect(card.status == status)
                    case .refusedClosed(let card): #expect(status != .closed && card.status == .closed)
                    case .notFound: Issue.record("round \(round): the card vanished")
                    }
                }
                let steps = try await first.auditEntries(subject: "card:\(id)").filter { $0.action == "card.status" }.map(\.detail)
                let (end, illegal) = Self.replayCardStatus(steps)
                #expect(illegal.isEmpty && end == CardStatus.closed.rawValue, "round \(round): \(steps)")
                // One entry per change; setting the status the card had already writes none.
                #expect(steps.count == results.filter { if case .updated(let previous, let card) = $0.1 { previous != card.status } else { false } }.count)
            }
        }
    }

    @Test(arguments: StoreFactory.all)
    func concurrentDuplicateEventIdsApplyOnce(factory: StoreFactory) async throws {
        try await factory.withTwoHandles { first, second in
            _ = try await first.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            let results = try await withThrowingTaskGroup(of: (String, TokenEventApplication).self) { group in
                for token in 0..<6 {
                    for copy in 0..<3 {
                        let store = (token + copy).isMultiple(of: 2) ? first : second
                        let record = Self.token("T\(token)")
                        group.addTask {
                            let result = try await store.applyTokenEvent(eventId: "created-\(token)", event: .created, tokenReference: record.tokenUniqueReference, audit: Self.audit("token:\(record.tokenUniqueReference)", "created")) { current, _ in
                                current == nil ? .insert(record) : .reject("exists")
                            }
                            return (record.tokenUniqueReference, result)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            for token in 0..<6 {
                let mine = results.filter { $0.0 == "T\(token)" }.map(\.1)
                #expect(mine.filter { if case .applied = $0 { true } else { false } }.count == 1)
                #expect(mine.filter { $0 == .duplicate(Self.token("T\(token)")) }.count == 2)
                #expect(try await second.auditEntries(subject: "token:T\(token)").count == 1)
            }
            #expect(try await first.tokens(externalCardId: "c1").count == 6)
        }
    }

    @Test(arguments: StoreFactory.all)
    func concurrentCreationsOfOneTokenWithDifferentEventIdsInsertOnce(factory: StoreFactory) async throws {
        try await factory.withTwoHandles { first, second in
            _ = try await first.putCard(try Self.card("c1"), audit: Self.audit("card:c1"))
            let results = try await withThrowingTaskGroup(of: TokenEventApplication.self) { group in
                for copy in 0..<6 {
                    let store = copy.isMultiple(of: 2) ? first : second
                    group.addTask {
                        try await store.applyTokenEvent(eventId: "e\(copy)", event: .created, tokenReference: "T1", audit: Self.audit("token:T1", "created")) { current, _ in
                            current == nil ? .insert(Self.token("T1")) : .reject("exists")
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.filter { $0 == .applied(Self.token("T1")) }.count == 1)
            #expect(results.filter { $0 == .rejected("exists") }.count == 5)
            #expect(try await second.auditEntries(subject: "token:T1").count == 1)
        }
    }

    @Test(arguments: StoreFactory.all)
    func concurrentDecisionsUsingTheSameActivationDataRecordOnlyOne(factory: StoreFactory) async throws {
        try await factory.withTwoHandles { first, second in
            let winners = try await withThrowingTaskGroup(of: String?.self) { group in
                for copy in 0..<10 {
                    let store = copy.isMultiple(of: 2) ? first : second
                    group.addTask { try await store.recordTokenizationDecision(Self.decision("r\(copy)"), consumingActivationData: "jti-1") ? "r\(copy)" : nil }
                }
                return try await group.reduce(into: [String]()) { if let winner = $1 { $0.append(winner) } }
            }
            #expect(winners.count == 1)
            // Only the winner's decision was recorded, with the data it used up.
            for copy in 0..<10 {
                let recorded = try await first.tokenizationDecision(requestId: "r\(copy)")
                #expect((recorded != nil) == winners.contains("r\(copy)"), "r\(copy)")
            }
            #expect(try await second.tokenizationDecision(requestId: winners.first ?? "", usingUp: "jti-1") != nil)
        }
    }

    /// An approval for request `requestId` of card PUR-c1's phone.
    static func decision(_ requestId: String) -> TokenizationDecisionRecord {
        TokenizationDecisionRecord(requestId: requestId, panUniqueReference: "PUR-c1", deviceType: .phone, decision: .approved, reason: "activation_data_valid", decidedAt: now)
    }
}
