import Foundation
import ProvisioningModels
import SDKTestSupport
import TestSupport
import Testing
import TokenPlatform

/// Card status changes racing customer service and the token service's own events.
@Suite("Lifecycle races")
struct LifecycleRaceTests {
    static func patch(_ api: APIClient, _ card: String, _ status: CardStatus) async throws -> APIClient.Reply {
        try await api.send(.patch, "/lifecycle/cards/\(card)", as: .issuer, json: CardStatusChangeRequest(status: status))
    }

    /// Customer service suspends a token while the block's suspension of it is with the token
    /// service: the suspension stays customer service's, and unblocking leaves it suspended.
    @Test func aCustomerServiceSuspensionMadeWhileABlockWasUnderwayOutlivesTheUnblock() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            #expect(try await api.tokenStatus("T1") == .active)
            let once = Locked(false)
            platform.connector.meanwhile.withValue { $0 = { command, token in
                guard command == "suspend", token.tokenUniqueReference == "T1", !once.withValue({ let was = $0; $0 = true; return was }) else { return }
                let suspended = try await api.send(.post, "/lifecycle/tokens/T1/suspend", as: .issuer)
                #expect(suspended.status == .ok)
            } }
            let blocked = try await Self.patch(api, "c1", .blocked)
            #expect(blocked.status == .ok && blocked.text.contains("\"UNCHANGED\""), "\(blocked.text)")
            platform.connector.meanwhile.withValue { $0 = nil }
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .customerService)

            let unblocked = try await Self.patch(api, "c1", .active)
            #expect(unblocked.status == .ok)
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .suspended && token?.suspendedBy == .customerService)
            #expect(platform.connector.commands.current.filter { $0.hasSuffix("T1") }.map { String($0.split(separator: " ")[0]) }.contains("resume") == false)
            // Its audit trail: the customer-service suspension, once; the block changed nothing.
            let trail = try await platform.store.auditEntries(subject: "token:T1").map(\.action)
            #expect(trail.filter { $0 == "token.suspended" }.count == 1, "\(trail)")
        }
    }

    /// The block's suspension is carried out at the token service but not confirmed (a time-out);
    /// its echo arrives while the card is blocked. The suspension is the block's, so unblocking
    /// resumes the token.
    @Test func aSuspensionReportedWhileTheCardIsBlockedIsTheBlocksAndUnblockingResumesIt() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "suspend" else { return }
                _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
                throw URLError(.timedOut)
            } }
            let blocked = try await Self.patch(api, "c1", .blocked)
            #expect(blocked.text.contains("\"FAILED\""), "\(blocked.text)")
            platform.connector.meanwhile.withValue { $0 = nil }
            let after = try await platform.store.token(reference: "T1")
            #expect(after?.status == .suspended && after?.suspendedBy == .cardBlocked)

            let unblocked = try await Self.patch(api, "c1", .active)
            #expect(unblocked.text.contains("\"RESUMED\""), "\(unblocked.text)")
            #expect(try await api.tokenStatus("T1") == .active)
        }
    }

    /// A suspension the token service reports for a token of an active card stays its own.
    @Test func aSuspensionReportedWhileTheCardIsActiveStaysTheTokenServices() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            _ = try await api.event("T1", pur: card.panUniqueReference, .suspended)
            #expect(try await platform.store.token(reference: "T1")?.suspendedBy == .tokenService)
        }
    }

    /// A deactivation is final at the token service: delivered late, it still applies, and the
    /// token keeps the newest event time.
    @Test func aLateDeactivationIsNeverStale() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            let card = try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            let suspended = try await api.event("T1", pur: card.panUniqueReference, .suspended, occurredAt: EventTime(millisecondsSince1970: 5_000))
            #expect(suspended.text.contains("\"APPLIED\""))
            let late = try await api.event("T1", pur: card.panUniqueReference, .deactivated, occurredAt: EventTime(millisecondsSince1970: 4_000))
            #expect(late.text.contains("\"APPLIED\""), "\(late.text)")
            let token = try await platform.store.token(reference: "T1")
            #expect(token?.status == .deactivated)
            #expect(token?.lastEventAt == EventTime(millisecondsSince1970: 5_000))
            // Other events older than the newest are still stale.
            let older = try await api.event("T1", pur: card.panUniqueReference, .resumed, occurredAt: EventTime(millisecondsSince1970: 4_500))
            #expect(older.text.contains("\"STALE\""), "\(older.text)")
        }
    }

    /// Deactivating a token that is already deactivated writes nothing and audits nothing.
    @Test func aCommandForTheStateATokenAlreadyHasIsNotAuditedTwice() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            _ = try await api.provision("c1", user: "alice", token: "T1")
            // The token service's echo of the deactivation overtakes TMP's own record of it.
            let card = try await platform.store.card(externalCardId: "c1")
            platform.connector.meanwhile.withValue { $0 = { command, _ in
                guard command == "deactivate" else { return }
                _ = try await api.event("T1", pur: card!.panUniqueReference, .deactivated)
            } }
            let deactivated = try await api.send(.post, "/lifecycle/tokens/T1/deactivate", as: .issuer)
            #expect(deactivated.status == .ok, "\(deactivated.text)")
            platform.connector.meanwhile.withValue { $0 = nil }
            let trail = try await platform.store.auditEntries(subject: "token:T1").map(\.action)
            #expect(trail.filter { $0.contains("deactivat") }.count == 1, "\(trail)")
        }
    }
}
