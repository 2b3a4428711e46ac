import Foundation
import HTTPTypes
import ProvisioningModels
import Testing
import TokenPlatform

@Suite("Bad input never crashes and never stores anything")
struct ErrorHandlingTests {
    func putCardRaw(_ api: APIClient, _ json: String, id: String = "c9") async throws -> APIClient.Reply {
        try await api.send(.put, "/lifecycle/cards/\(id)", as: .issuer, raw: Data(json.utf8))
    }

    static let goodCard = #"{"userId":"alice","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Alice","network":"VISA","productTitle":"Gold"}"#

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
            #expect(wrong.headers[.allow] == "PUT, PATCH, GET")
            let getOnPost = try await api.send(.get, "/issuer/push-provisioning/signed-cards")
            #expect(getOnPost.status == .methodNotAllowed)
            // A trailing slash reaches the same route (the router skips empty segments), so a
            // wrong method there is 405 too, not 404.
            let trailing = try await api.send(.delete, "/lifecycle/cards/c1/", as: .issuer)
            #expect(trailing.status == .methodNotAllowed && trailing.headers[.allow] == "PUT, PATCH, GET")
            #expect(try await api.send(.post, "/health/").status == .methodNotAllowed)
            // A card number in an unknown path, percent-encoded or dotted, is not echoed.
            for path in ["/x/4111%201111%201111%201111", "/x/4111%25201111%25201111%25201111", "/x/4111.1111.1111.1111", "/x/4111%2D1111%2D1111%2D1111", "/x/4111%201111%201111%201111%ZZ", "/x/%FF4111%201111%201111%201111"] {
                let echoed = try await api.send(.get, path, as: .issuer)
                #expect(echoed.status == .notFound)
                #expect(echoed.error?.message.contains("4111") == false, "\(echoed.error?.message ?? "")")
                #expect(echoed.error?.message.contains("•••• 1111") == true, "\(echoed.error?.message ?? "")")
            }
        }
    }

    @Test func aNonJSONContentTypeIs415() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let reply = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, raw: Data(Self.goodCard.utf8), contentType: "application/x-www-form-urlencoded")
            #expect(reply.status == .unsupportedMediaType)
            #expect(try await platform.store.card(externalCardId: "c1") == nil)
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
