import Foundation
import ProvisioningModels
import SDKTestSupport
import Testing
import TokenPlatform

@Suite("PAN secrecy")
struct PANSecrecyTests {
    static let pans = ["4111111111111111", "5555555555554444", "378282246310005"]
    /// Request ids a token service could send that pass for card numbers (12 to 19 digits,
    /// Luhn): not card numbers TMP knows, so stored as sent, but hidden in log lines.
    /// Request ids holding card numbers, whole or split where an id may split them.
    static let cardNumberLikeRequestIds = ["4012888888881881", "req-60-11111111111117", "305693_09025_904"]

    @Test func noPANReachesLogsResponsesMetricsOrTheDatabaseFile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-secrecy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("tmp.sqlite").path
        let platform = try await TestPlatform(policy: .immediate, databasePath: database)
        let replies = Locked<[String]>([])
        try await platform.run { api in
            for (index, pan) in Self.pans.enumerated() {
                try await api.putCard("c\(index)", user: "alice", pan: pan)
                // The answers of requests that succeed, too.
                let again = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"), cardholderName: "Alice", network: .visa, productTitle: "Gold")
                let put = try await api.send(.put, "/lifecycle/cards/c\(index)", as: .issuer, json: again)
                #expect(put.status == .ok)
                replies.withValue { $0.append(put.text) }
                // A card number as the id of a new card is refused: ids are logged and returned.
                let asNewId = try await api.send(.put, "/lifecycle/cards/\(pan)", as: .issuer, json: again)
                #expect(asNewId.status == .badRequest && asNewId.error?.code == "invalid_field", "\(asNewId.text)")
                replies.withValue { $0.append(asNewId.text) }
                try await api.provision("c\(index)", user: "alice", pan: pan, token: "T\(index)")
                // Refusals that carry the PAN in the request must not echo it either.
                let duplicate = CardUpsertRequest(userId: "bob", primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"), cardholderName: "Bob", network: .visa, productTitle: "X")
                let refused = try await api.send(.put, "/lifecycle/cards/dup\(index)", as: .issuer, json: duplicate)
                let badLuhn = try await api.send(.put, "/lifecycle/cards/bad\(index)", as: .issuer, raw: Data(#"{"userId":"bob","primaryAccountNumber":"\#(pan.dropLast())0","expiration":"12/29","cardholderName":"B","network":"VISA","productTitle":"X"}"#.utf8))
                let decision = try await api.send(.post, "/tsp/tokenization-decisions", as: .tsp, json: TokenizationDecisionRequest(requestId: "x\(index)", primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("01/30"), activationData: nil, deviceType: .phone))
                // A token service whose request ids look like card numbers: logged hidden.
                let panLikeRequest = try await api.send(.post, "/tsp/tokenization-decisions", as: .tsp, json: TokenizationDecisionRequest(requestId: Self.cardNumberLikeRequestIds[index], primaryAccountNumber: try PrimaryAccountNumber(pan), expiration: try CardExpiration("12/29"), activationData: nil, deviceType: .watch))
                #expect(panLikeRequest.status == .ok)
                // Each of them is the refusal it stands for.
                #expect(refused.status == .conflict && refused.error?.code == "duplicate_pan", "\(refused.text)")
                #expect(badLuhn.status == .badRequest && badLuhn.error?.code == "invalid_pan" && badLuhn.text.contains("primaryAccountNumber: fails the Luhn check digit"), "\(badLuhn.text)")
                #expect(decision.status == .ok && decision.text.contains(#""reason":"expiration_mismatch""#), "\(decision.text)")
                replies.withValue { $0 += [refused.text, badLuhn.text, decision.text] }
                // A card number sent where an id or a path goes is not echoed by the error.
                let asId = try await api.send(.get, "/lifecycle/cards/\(pan)", as: .issuer)
                let unknownRoute = try await api.send(.get, "/nowhere/\(pan)", as: .issuer)
                let wrongMethod = try await api.send(.delete, "/lifecycle/cards/\(pan)", as: .issuer)
                #expect([asId.status, unknownRoute.status, wrongMethod.status] == [.notFound, .notFound, .methodNotAllowed])
                #expect(asId.text.contains("•••• \(pan.suffix(4))"), "\(asId.text)")
                replies.withValue { $0 += [asId.text, unknownRoute.text, wrongMethod.text] }
                // Spelled as no card prints it (runs of four or more of the separators ids
                // allow): an id is still not echoed with the card number in it, to any caller.
                let groups = stride(from: 0, to: pan.count, by: 4).map { String(pan.dropFirst($0).prefix(4)) }
                for oddId in [groups.joined(separator: "----"), groups.joined(separator: "_.-_."), "x" + groups.joined(separator: "....") + "...."] {
                    let lifecycle = try await api.send(.get, "/lifecycle/cards/\(oddId)", as: .issuer)
                    let art = try await api.send(.get, "/issuer/push-provisioning/cards/\(oddId)/art", as: .cardholder("alice"))
                    let token = try await api.send(.post, "/lifecycle/tokens/\(oddId)/suspend", as: .issuer)
                    #expect([lifecycle.status, art.status, token.status] == [.notFound, .notFound, .notFound], "\(lifecycle.text) \(art.text) \(token.text)")
                    #expect(lifecycle.text.contains("•••• \(pan.suffix(4))"), "\(lifecycle.text)")
                    replies.withValue { $0 += [lifecycle.text, art.text, token.text] }
                }
            }
            _ = try await api.send(.patch, "/lifecycle/cards/c0", as: .issuer, json: CardStatusChangeRequest(status: .blocked))
            for path in ["/issuer/push-provisioning/cards"] {
                replies.withValue { $0.append("") }
                let reply = try await api.send(.get, path, as: .cardholder("alice"))
                replies.withValue { $0.append(reply.text) }
            }
            for index in Self.pans.indices {
                let card = try await api.send(.get, "/lifecycle/cards/c\(index)", as: .issuer)
                let tokens = try await api.send(.get, "/lifecycle/cards/c\(index)/tokens", as: .issuer)
                replies.withValue { $0 += [card.text, tokens.text] }
            }
            replies.withValue { $0.append("") }
            let metrics = try await api.send(.get, "/metrics")
            replies.withValue { $0.append(metrics.text) }
        }
        let logs = platform.logs.current
        #expect(logs.count > 10, "the test must actually capture log lines")
        var databaseBytes = Data()
        for suffix in ["", "-wal", "-shm"] {
            databaseBytes += (try? Data(contentsOf: URL(fileURLWithPath: database + suffix))) ?? Data()
        }
        #expect(databaseBytes.count > 4096)
        // Also written with separators (`4111 1111 1111 1111`, `4111-1111-…`): compared without them.
        func squeezed(_ text: String) -> String { String(text.unicodeScalars.filter { $0.properties.isAlphabetic || ("0"..."9").contains($0) }.map(Character.init)) }
        for id in Self.cardNumberLikeRequestIds {
            let digits = String(id.filter(\.isNumber))
            #expect(logs.contains { $0.contains("tokenization decision") && $0.contains("•••• \(digits.suffix(4))") }, "the decision is logged, its request id hidden")
            for line in logs.map(squeezed) { #expect(!line.contains(digits.prefix(12)), "log line shows a request id that looks like a card number: \(line)") }
        }
        for pan in Self.pans {
            let badLuhn = String(pan.dropLast()) + "0"
            for line in logs.map(squeezed) { #expect(!line.contains(pan) && !line.contains(badLuhn), "log line leaks a PAN: \(line)") }
            for text in replies.current.map(squeezed) { #expect(!text.contains(pan) && !text.contains(badLuhn), "response leaks a PAN") }
            #expect(databaseBytes.range(of: Data(pan.utf8)) == nil, "the database file holds a PAN in clear")
        }
    }
}
