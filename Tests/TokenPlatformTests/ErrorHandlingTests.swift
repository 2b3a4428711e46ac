import Foundation
import HTTPTypes
import ProvisioningModels
import TestSupport
import Testing
import TokenPlatform

@Suite("Bad input never crashes and never stores anything")
struct ErrorHandlingTests {
    func putCardRaw(_ api: APIClient, _ json: String, id: String = "c9") async throws -> APIClient.Reply {
        try await api.send(.put, "/lifecycle/cards/\(id)", as: .issuer, raw: Data(json.utf8))
    }

    static let goodCard = #"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold"}"#

    @Test func theErrorEnvelopeIsAlwaysWrittenInOneOrder() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            // Each envelope is encoded anew: a member order that varied (it did, from one
            // process to the next) would show within a few answers.
            for _ in 0..<8 {
                let reply = try await putCardRaw(api, Self.goodCard.replacingOccurrences(of: "4111111111111111", with: "4111111111111112"))
                #expect(reply.status == .badRequest)
                #expect(reply.text == #"{"error":{"code":"invalid_pan","message":"primaryAccountNumber: fails the Luhn check digit"}}"#, "\(reply.text)")
            }
        }
    }

    @Test(arguments: [
        (#"{"userId":"alice""#, "body is not valid JSON"),
        (#"[1,2]"#, "body must be a JSON object"),
        (#"{"primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold"}"#, "field userId is missing"),
        (#"{"userId":7,"primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold"}"#, "field userId must be a string"),
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111112","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold"}"#, "Luhn"),
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"13/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold"}"#, "expiration"),
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"DINERS","productTitle":"Gold"}"#, "field network has an unknown value; expected one of VISA"),
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"","network":"VISA","productTitle":"Gold"}"#, "cardholderName"),
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"   ","network":"VISA","productTitle":"Gold"}"#, "cardholderName must be 1 to 64 characters (Unicode code points), not only spaces"),
        // 33 letters with a combining accent: 33 characters as Swift counts them, 66 code
        // points as the OpenAPI document's maxLength counts.
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":""# + String(repeating: #"e\u0301"#, count: 33) + #"","network":"VISA","productTitle":"Gold"}"#, "cardholderName must be 1 to 64 characters (Unicode code points)"),
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":null}"#, "field productTitle"),
        // Text that displays in another order than it is stored, or on other lines.
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice \u202Eecilaf\u202C","network":"VISA","productTitle":"Gold"}"#, "cardholderName must be 1 to 64 characters (Unicode code points), not only spaces, without control characters, line separators or bidirectional-text controls"),
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold\u2028Platinum"}"#, "productTitle must be"),
        (#"{"userId":"al\u2066ice\u2069","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold"}"#, "userId must be 1 to 128 bytes of UTF-8 without control characters, line separators or bidirectional-text controls"),
        // Members given twice: Python and many gateways keep the last, JSONDecoder the first.
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold","userId":"bob"}"#, "field userId appears more than once"),
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","primaryAccount\u004eumber":"5555555555554444","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold"}"#, "field primaryAccountNumber appears more than once"),
        // What JSONDecoder takes but RFC 8259 does not.
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold",}"#, "body is not valid JSON: a comma before '}'"),
        (#"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold","x":01}"#, "body is not valid JSON: a number with a leading zero"),
    ])
    func malformedCardBodiesAreRefusedWithTheFieldAndNothingIsStored(json: String, expected: String) async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let reply = try await putCardRaw(api, json)
            #expect(reply.status == .badRequest, "\(reply.text)")
            #expect(reply.error?.message.contains(expected) == true, "\(reply.text)")
            #expect(!reply.text.contains("4111111111111112"))
            #expect(try await platform.store.card(externalCardId: "c9") == nil)
        }
    }

    @Test func textLimitsCountCodePointsAsTheDocumentDoes() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let name = String(repeating: #"e\u0301"#, count: 32)  // 64 code points
            let reply = try await putCardRaw(api, #"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":""# + name + #"","network":"VISA","productTitle":"Gold"}"#)
            #expect(reply.status == .created, "\(reply.text)")
            #expect(try await platform.store.card(externalCardId: "c9")?.cardholderName.unicodeScalars.count == 64)
        }
    }

    /// A body other readers would take for another request is refused, and changes nothing:
    /// a member given twice (the later copy unchecked, and the one Python keeps), an enum value
    /// Swift calls equal to a real one but bytes do not (KELVIN SIGN for K), UTF-16 text.
    @Test func aBodyOtherReadersWouldReadOtherwiseIsRefusedAndChangesNothing() async throws {
        let platform = try await TestPlatform(policy: .immediate)
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            try await api.provision("c1", user: "alice", token: "T1")
            let patches: [(Data, String)] = [
                (Data(#"{"status":"BLOCKED","status":"ACTIVE"}"#.utf8), "field status appears more than once"),
                (Data(#"{"status":"BLOCKED","st\u0061tus":"ACTIVE"}"#.utf8), "field status appears more than once"),
                (Data(#"{"status":"ACTIVE","status":5}"#.utf8), "field status appears more than once"),
                (Data(#"{"status":"BLOC\u212AED"}"#.utf8), "field status has an unknown value"),
                (Data("{\"status\":\"BLOC\u{212A}ED\"}".utf8), "field status has an unknown value"),
                (Data(#"{"status":"BLOCKED"}"#.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }), "body is not valid JSON"),
            ]
            for (body, message) in patches {
                let reply = try await api.send(.patch, "/lifecycle/cards/c1", as: .issuer, raw: body)
                #expect(reply.status == .badRequest && reply.error?.code == "invalid_request", "\(reply.text)")
                #expect(reply.error?.message.hasPrefix(message) == true, "\(reply.text)")
            }
            #expect(try await platform.store.card(externalCardId: "c1")?.status == .active)
            let event = #"{"eventId":"e-dup","tokenUniqueReference":"T1","panUniqueReference":"PUR","event":"SUSPENDED","walletType":"APPLE_PAY","deviceType":"PHONE","event":"DEACTIVATED"}"#
            let refused = try await api.send(.post, "/tsp/token-events", as: .tsp, raw: Data(event.utf8))
            #expect(refused.status == .badRequest && refused.error?.message == "field event appears more than once", "\(refused.text)")
            #expect(try await api.tokenStatus("T1") == .active)
            let search = #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["T1"],"tokenUniqueReferences":["T2"]}"#
            let searched = try await api.send(.post, "/issuer/push-provisioning/tokens/searches", as: .cardholder("alice"), raw: Data(search.utf8))
            #expect(searched.status == .badRequest && searched.error?.message == "field tokenUniqueReferences appears more than once", "\(searched.text)")
            let trail = try await platform.store.auditEntries(subject: "card:c1").map(\.action)
            #expect(!trail.contains("card.status"), "\(trail)")
        }
    }

    /// Directional marks place brackets and numbers in mixed-direction text; unlike the
    /// embeddings, overrides and isolates they reorder nothing beyond that, and are kept.
    @Test func namesWithDirectionalMarksAreAccepted() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let name = "יוסי כהן (Jr.)\u{200F}"
            let title = "بطاقة ٥٪\u{061C} Gold\u{200E}"
            let body = CardUpsertRequest(userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"), cardholderName: name, network: .visa, productTitle: title)
            let reply = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, json: body)
            #expect(reply.status == .created, "\(reply.text)")
            let stored = try await platform.store.card(externalCardId: "c1")
            #expect(stored?.cardholderName == name && stored?.productTitle == title)
        }
    }

    @Test func badBase64AndTooManyCertificatesAreRefused() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let badBase64 = #"{"externalCardId":"c1","walletType":"APPLE_PAY","deviceType":"PHONE","certificates":["%%%"],"nonce":"AQ==","nonceSignature":"AQ=="}"#
            let reply = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), raw: Data(badBase64.utf8))
            #expect(reply.status == .badRequest)
            #expect(reply.error?.message == "field certificates[0] must be base64")
            let eleven = SignedCardRequest(externalCardId: "c1", deviceType: .phone, certificates: Array(repeating: Data([1]), count: 11), nonce: Data([1]), nonceSignature: Data([1]))
            let tooMany = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), json: eleven)
            #expect(tooMany.error?.code == "too_many_certificates")
            let badDevice = #"{"externalCardId":"c1","walletType":"APPLE_PAY","deviceType":"TABLET","certificates":["AQ=="],"nonce":"AQ==","nonceSignature":"AQ=="}"#
            let device = try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), raw: Data(badDevice.utf8))
            #expect(device.error?.message == "field deviceType has an unknown value; expected one of PHONE, WATCH")
            #expect(try await platform.store.auditEntries(subject: "card:c1").map(\.action) == ["card.create"])
        }
    }

    /// Every JSON answer, successes and errors alike, tells caches not to keep it (it may carry
    /// card data) and browsers not to sniff another type; card art keeps its own caching.
    @Test func everyJSONAnswerIsMarkedNoStoreAndNoSniff() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("c1", user: "alice")
            let replies: [(String, APIClient.Reply)] = [
                ("GET cards", try await api.send(.get, "/issuer/push-provisioning/cards", as: .cardholder("alice"))),
                ("signed-cards", try await api.signCard("c1", user: "alice")),
                ("lifecycle card", try await api.send(.get, "/lifecycle/cards/c1", as: .issuer)),
                ("decision", try await api.send(.post, "/tsp/tokenization-decisions", as: .tsp, json: TokenizationDecisionRequest(requestId: "r1", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"), activationData: nil, deviceType: .phone))),
                ("404 card", try await api.send(.get, "/lifecycle/cards/nope", as: .issuer)),
                ("401", try await api.send(.get, "/lifecycle/cards/c1")),
                ("400", try await api.send(.post, "/issuer/push-provisioning/signed-cards", as: .cardholder("alice"), raw: Data("{".utf8))),
                ("unknown route", try await api.send(.get, "/nowhere")),
                ("wrong method", try await api.send(.delete, "/issuer/push-provisioning/cards", as: .cardholder("alice"))),
            ]
            for (name, reply) in replies {
                #expect(reply.headers[.contentType] == "application/json; charset=utf-8", "\(name): \(reply.status)")
                #expect(reply.headers[.cacheControl] == "no-store", "\(name): \(reply.status)")
                #expect(reply.headers[.xContentTypeOptions] == "nosniff", "\(name): \(reply.status)")
            }
            #expect(replies[1].1.status == .ok && replies[3].1.status == .ok)
        }
    }

    /// An empty segment does not shift the path's parameters: `/lifecycle/cards//tokens` is
    /// no route, not the card `tokens` (which exists here and is left alone).
    @Test func aPathWithAnEmptySegmentIsNoRoute() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            try await api.putCard("tokens", user: "alice")
            for (method, path) in [(HTTPRequest.Method.get, "/lifecycle/cards//tokens"), (.patch, "/lifecycle/cards//tokens"), (.get, "//lifecycle/cards/tokens"), (.get, "/issuer/push-provisioning//cards")] {
                let reply = try await api.send(method, path, as: path.hasPrefix("/issuer") ? .cardholder("alice") : .issuer, json: method == .patch ? CardStatusChangeRequest(status: .blocked) : nil)
                #expect(reply.status == .notFound && reply.error?.code == "not_found", "\(method) \(path): \(reply.text)")
                #expect(reply.error?.message == "no route for \(method.rawValue) on this path: it has an empty segment")
            }
            #expect(try await platform.store.card(externalCardId: "tokens")?.status == .active)
            #expect(try await api.send(.get, "/lifecycle/cards/tokens", as: .issuer).status == .ok)
        }
    }

    @Test func bodiesOver64KiBAre413() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let big = Data(("{\"userId\":\"" + String(repeating: "a", count: 70_000) + "\"}").utf8)
            let reply = try await putCardRaw(api, String(decoding: big, as: UTF8.self))
            #expect(reply.status == .contentTooLarge)
            #expect(reply.error?.code == "payload_too_large")
        }
    }

    @Test func unknownRoutesAre404AndWrongMethods405InTheEnvelope() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let missing = try await api.send(.get, "/nope", as: .issuer)
            #expect(missing.status == .notFound)
            #expect(missing.error?.code == "not_found")
            let wrong = try await api.send(.delete, "/lifecycle/cards/c1", as: .issuer)
            #expect(wrong.status == .methodNotAllowed)
            #expect(wrong.error?.code == "method_not_allowed")
            #expect(wrong.headers[.allow] == "PUT, PATCH, GET, HEAD")
            let getOnPost = try await api.send(.get, "/issuer/push-provisioning/signed-cards")
            #expect(getOnPost.status == .methodNotAllowed)
            // A trailing slash reaches the same route (the router skips empty segments), so a
            // wrong method there is 405 too, not 404.
            let trailing = try await api.send(.delete, "/lifecycle/cards/c1/", as: .issuer)
            #expect(trailing.status == .methodNotAllowed && trailing.headers[.allow] == "PUT, PATCH, GET, HEAD")
            #expect(try await api.send(.post, "/health/").status == .methodNotAllowed)
            // The path is not echoed, so no spelling of a card number in it comes back.
            #expect(missing.error?.message == "no route for GET on this path")
            #expect(wrong.error?.message == "DELETE is not allowed on this path; use PUT, PATCH, GET, HEAD")
            for path in ["/x/4111%201111%201111%201111", "/x/4111+1111+1111+1111", "/x/4111/1111/1111/1111", "/x/41111111%2011111111", "/x/4111%C2%A01111%C2%A01111%C2%A01111", "/x/%EF%BC%94111111111111111", "/lifecycle/cards/4111111111111111/x"] {
                let echoed = try await api.send(.get, path, as: .issuer)
                #expect(echoed.status == .notFound)
                #expect(echoed.error?.message == "no route for GET on this path", "\(path)")
            }
        }
    }

    @Test func aNewCardOrArtIdHoldingTheNumberOfACardHeldIsRefusedAndNothingStored() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let held = "must not hold the number of a card this platform holds: ids are stored, logged and returned in clear; use an id of your own"
            // A card the platform holds: 5555 5555 5555 4444.
            let other = Self.goodCard.replacingOccurrences(of: "4111111111111111", with: "5555555555554444")
            #expect(try await putCardRaw(api, other, id: "held").status == .created)
            // Its number in the id of a new card (whose own number is 4111…), in any spelling.
            for id in ["5555555555554444", "card-5555-5555-5555-4444", "55555555_55554444", "x5555555555554444y", "9-5555555555554444-7"] {
                let reply = try await putCardRaw(api, Self.goodCard, id: id)
                #expect(reply.status == .badRequest && reply.error?.message == "externalCardId \(held)", "\(id): \(reply.text)")
                #expect(try await platform.store.card(externalCardId: id) == nil)
            }
            // The card's own number, which is not stored yet.
            for id in ["94111111111111111", "41111111-11111111"] {
                let own = try await putCardRaw(api, Self.goodCard, id: id)
                #expect(own.status == .badRequest && own.error?.message == "externalCardId must not hold the card's primaryAccountNumber: ids are stored, logged and returned in clear; use an id of your own", "\(id)")
                #expect(try await platform.store.card(externalCardId: id) == nil)
            }
            // Art under such an id.
            let art = try await api.send(.put, "/lifecycle/card-art/art-5555555555554444", as: .issuer, raw: Data([0x89, 0x50]), contentType: "image/png")
            #expect(art.status == .badRequest && art.error?.message == "artId \(held)", "\(art.text)")
            // A numeric id that passes the Luhn check but is no card held here is fine (one in
            // ten numeric ids of those lengths does), and so are 16 digits failing it.
            #expect(try await putCardRaw(api, Self.goodCard, id: "4012888888881881").status == .created)
            let third = Self.goodCard.replacingOccurrences(of: "4111111111111111", with: "378282246310005")
            #expect(try await putCardRaw(api, third, id: "5555555555554445").status == .created)
            // A card stored under an id that has since become a held card's number can still be
            // replaced (here: a card with number 4012 8888 8888 1881 arrives after it).
            let fourth = Self.goodCard.replacingOccurrences(of: "4111111111111111", with: "4012888888881881")
            #expect(try await putCardRaw(api, fourth, id: "later").status == .created)
            #expect(try await putCardRaw(api, Self.goodCard.replacingOccurrences(of: "Gold", with: "Platinum"), id: "4012888888881881").status == .ok)
            #expect(try await putCardRaw(api, other, id: "n-4012888888881881").status == .badRequest)
        }
    }

    /// A card's owner id, cardholder name and product title are stored and returned in clear
    /// (the names to the cardholder's app): the card's own number, or a number of a card held
    /// here, in them is refused, and nothing is stored.
    @Test func aCardsOwnerNameOrTitleHoldingACardNumberIsRefusedAndNothingStored() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let other = Self.goodCard.replacingOccurrences(of: "4111111111111111", with: "5555555555554444")
            #expect(try await putCardRaw(api, other, id: "held").status == .created)
            let cases: [(field: String, from: String, to: String, message: String)] = [
                ("cardholderName", #""cardholderName":"Alice""#, #""cardholderName":"4111111111111111""#, "cardholderName must not hold the card's primaryAccountNumber: it is stored and returned in clear"),
                ("productTitle", #""productTitle":"Gold""#, #""productTitle":"Gold 4111 1111 1111 1111""#, "productTitle must not hold the card's primaryAccountNumber: it is stored and returned in clear"),
                ("productTitle", #""productTitle":"Gold""#, #""productTitle":"5555-5555-5555-4444""#, "productTitle must not hold the number of a card this platform holds: it is stored and returned in clear"),
                ("userId", #""userId":"alice""#, #""userId":"5555555555554444""#, "userId must not hold the number of a card this platform holds: ids are stored, logged and returned in clear; use an id of your own"),
                ("userId", #""userId":"alice""#, #""userId":"u-4111111111111111""#, "userId must not hold the card's primaryAccountNumber: ids are stored, logged and returned in clear; use an id of your own"),
                // Decimal digits of other scripts: full-width, Arabic-Indic, mathematical bold.
                ("cardholderName", #""cardholderName":"Alice""#, #""cardholderName":"４１１１１１１１１１１１１１１１""#, "cardholderName must not hold the card's primaryAccountNumber: it is stored and returned in clear"),
                ("productTitle", #""productTitle":"Gold""#, #""productTitle":"Gold ٥٥٥٥ ٥٥٥٥ ٥٥٥٥ ٤٤٤٤""#, "productTitle must not hold the number of a card this platform holds: it is stored and returned in clear"),
                ("userId", #""userId":"alice""#, #""userId":"𝟒𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏""#, "userId must not hold the card's primaryAccountNumber: ids are stored, logged and returned in clear; use an id of your own"),
            ]
            for (field, from, to, message) in cases {
                let reply = try await putCardRaw(api, Self.goodCard.replacingOccurrences(of: from, with: to), id: "c-new")
                #expect(reply.status == .badRequest && reply.error?.message == message, "\(field): \(reply.text)")
                #expect(try await platform.store.card(externalCardId: "c-new") == nil)
                // A replacement is held to it too (the held card's own number, 5555…).
                guard to.contains("5555") else { continue }
                let replaced = try await putCardRaw(api, other.replacingOccurrences(of: from, with: to), id: "held")
                #expect(replaced.status == .badRequest, "\(field): \(replaced.text)")
                #expect(try await platform.store.card(externalCardId: "held")?.cardholderName == "Alice")
                #expect(try await platform.store.card(externalCardId: "held")?.userId == "alice")
            }
            // Art uploaded under an id holding a number before any card held it: naming it as
            // the art of the card with that number would return the number with the card.
            let art = try await api.send(.put, "/lifecycle/card-art/art-4111111111111111", as: .issuer, raw: TestPNG.file(width: 1536, height: 969), contentType: "image/png")
            #expect(art.status == .ok, "\(art.text)")
            let withArt = Self.goodCard.replacingOccurrences(of: #""productTitle":"Gold""#, with: #""productTitle":"Gold","artId":"art-4111111111111111""#)
            let ownArt = try await putCardRaw(api, withArt, id: "c-new")
            #expect(ownArt.status == .badRequest && ownArt.error?.message == "artId must not hold the card's primaryAccountNumber: ids are stored, logged and returned in clear; use an id of your own", "\(ownArt.text)")
            #expect(try await platform.store.card(externalCardId: "c-new") == nil)
            #expect(try await putCardRaw(api, other.replacingOccurrences(of: #""productTitle":"Gold""#, with: #""productTitle":"Gold","artId":"art-4111111111111111""#), id: "held").status == .ok)
            // Digits that are no card's number are fine.
            let title = Self.goodCard.replacingOccurrences(of: #""productTitle":"Gold""#, with: #""productTitle":"Gold 2026 member 4012888888881881""#)
            #expect(try await putCardRaw(api, title, id: "c-new").status == .created)
        }
    }

    @Test func aCardGivenANewPANThatItsIdHoldsIsRefusedAndKeepsItsPAN() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            // 4012 8888 8888 1881 is no card held here when the card is created under this id.
            let id = "acct-4012-8888-8888-1881"
            let first = Self.goodCard.replacingOccurrences(of: "4111111111111111", with: "5555555555554444")
            #expect(try await putCardRaw(api, first, id: id).status == .created)
            // Given that number, the id would carry the card's PAN in clear from then on.
            let second = Self.goodCard.replacingOccurrences(of: "4111111111111111", with: "4012888888881881")
            let reply = try await putCardRaw(api, second, id: id)
            #expect(reply.status == .badRequest)
            #expect(reply.error?.message == "externalCardId must not hold the card's primaryAccountNumber: ids are stored, logged and returned in clear; use an id of your own", "\(reply.text)")
            let card = try #require(try await platform.store.card(externalCardId: id))
            #expect(card.panLast4 == "4444")
            // Any other new number is still taken.
            let third = Self.goodCard.replacingOccurrences(of: "4111111111111111", with: "378282246310005")
            #expect(try await putCardRaw(api, third, id: id).status == .ok)
            #expect(try await platform.store.card(externalCardId: id)?.panLast4 == "0005")
        }
    }

    @Test func aNewCardOrArtIdStartingWithADotIsRefused() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            for id in ["..", ".", ".hidden"] {
                let reply = try await putCardRaw(api, Self.goodCard, id: id)
                #expect(reply.status == .badRequest && reply.error?.message == "externalCardId must not start with '.': `..` in a URL path names the parent, and a name starting with '.' is a hidden file", "\(id): \(reply.text)")
                #expect(try await platform.store.card(externalCardId: id) == nil)
                let art = try await api.send(.put, "/lifecycle/card-art/\(id)x", as: .issuer, raw: Data([0x89, 0x50]), contentType: "image/png")
                #expect(art.status == .badRequest && art.error?.message.hasPrefix("artId must not start with '.'") == true, "\(art.text)")
            }
            // A dot elsewhere is fine.
            #expect(try await putCardRaw(api, Self.goodCard, id: "card.v2").status == .created)
        }
    }

    @Test func aCardStoredUnderADotIdBeforeTheRuleCanStillBeReplaced() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let pan = try PrimaryAccountNumber("4111111111111111")
            let vault = platform.environment.vault
            let now = Date()
            let legacy = CardRecord(
                externalCardId: ".legacy", userId: "alice", encryptedPAN: try vault.encrypt(pan, cardID: ".legacy").serialized, panLookupHash: vault.lookupHash(pan),
                panLast4: "1111", panUniqueReference: "PUR-legacy", expiration: try CardExpiration("12/29"), cardholderName: "Old Name", network: .visa,
                productTitle: "Gold", artId: nil, status: .active, createdAt: now, updatedAt: now)
            _ = try await platform.store.putCard(legacy, audit: AuditEntry(at: now, actor: "test", action: "card.put", subject: "card:.legacy", detail: ""))
            let replaced = try await putCardRaw(api, Self.goodCard, id: ".legacy")
            #expect(replaced.status == .ok, "\(replaced.text)")
            #expect(try await platform.store.card(externalCardId: ".legacy")?.cardholderName == "Alice")
            // A new one is still refused.
            #expect(try await putCardRaw(api, Self.goodCard.replacingOccurrences(of: "4111111111111111", with: "5555555555554444"), id: ".new").status == .badRequest)
        }
    }

    @Test func aNonJSONContentTypeIs415() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            // Not JSON, or JSON said to be in a charset other than UTF-8 (RFC 8259: JSON is UTF-8).
            for contentType in ["application/x-www-form-urlencoded", "application/jsonp", "application/json-seq", "application/jsonx; charset=utf-8", "application/json; charset=iso-8859-1", "application/json; charset=\"utf-16\"", "application/json; charset=utf-8; charset=utf-16", "application/json; charset="] {
                let reply = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, raw: Data(Self.goodCard.utf8), contentType: contentType)
                #expect(reply.status == .unsupportedMediaType, "\(contentType): \(reply.text)")
                #expect(reply.error?.code == "unsupported_media_type", "\(contentType)")
                #expect(try await platform.store.card(externalCardId: "c1") == nil)
            }
            // JSON with parameters, in any case and spacing, is JSON.
            for contentType in ["application/json; charset=utf-8", "Application/JSON", " application/json ;charset=UTF-8", "application/json; charset=\"utf-8\"", "application/json; charset=utf8", "application/json; charset=US-ASCII"] {
                let reply = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, raw: Data(Self.goodCard.utf8), contentType: contentType)
                #expect(reply.status == .created || reply.status == .ok, "\(contentType): \(reply.text)")
            }
        }
    }

    @Test func badIdentifiersInPathsAre400() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let long = String(repeating: "x", count: 65)
            let reply = try await api.send(.get, "/lifecycle/cards/\(long)", as: .issuer)
            #expect(reply.status == .badRequest)
            #expect(reply.error?.message.contains("externalCardId") == true)
        }
    }

    @Test func healthMetricsAndOpenAPIAnswer() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let health = try await api.send(.get, "/health")
            #expect(health.status == .ok)
            #expect(try health.decode([String: String].self) == ["status": "ok", "database": "ok"])
            try await api.putCard("c1", user: "alice")
            _ = try await api.signCard("c1", user: "alice")
            let metrics = try await api.send(.get, "/metrics")
            #expect(metrics.text.contains("pushprov_http_requests_total"))
            #expect(metrics.text.contains(#"route="/lifecycle/cards/{externalCardId}""#) || metrics.text.contains(#"route="/lifecycle/cards/:externalCardId""#))
            #expect(metrics.text.contains(#"pushprov_provisioning_outcomes_total{outcome="sealed"} 1"#))
            #expect(!metrics.text.contains("c1\""))
            let openapi = try await api.send(.get, "/openapi.yaml")
            #expect(openapi.text.hasPrefix("openapi: 3.1"))
        }
    }
}
