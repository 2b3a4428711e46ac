import Foundation
import ProvisioningCrypto
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

/// The SDK against the real TMP server over real HTTP on loopback.
@Suite("SDK against a live TMP server")
struct LiveServerTests {
    @Test func theClientsFourCallsWorkAgainstTheServer() async throws {
        let server = try await LiveTMPServer()
        try await server.run { session in
            try await session.putCard("card-1", user: "alice")
            try await session.putCard("card-2", user: "alice", pan: "5555555555554444")
            try await session.putCard("card-bob", user: "bob", pan: "4000056655665556")
            let client = try session.sdkClient(user: "alice")

            let cards = try await client.cards()
            #expect(cards.map(\.externalCardId).sorted() == ["card-1", "card-2"])
            #expect(cards.first { $0.externalCardId == "card-2" }?.panLast4 == "4444")

            let nonce = Data("wallet-nonce".utf8)
            let sealed = try await client.signCard(SignedCardRequest(externalCardId: "card-1", deviceType: .phone, certificates: server.pki.walletCertificates, nonce: nonce, nonceSignature: Data("apple-signature".utf8)))
            let payload = try ECCV2.open(SealedPassData(encryptedData: sealed.encryptedData.data, ephemeralPublicKey: sealed.ephemeralPublicKey.data), with: server.pki.leafPrivateKey)
            let opened = try PassDataPayload(jsonData: payload)
            #expect(opened.nonce == nonce)
            #expect(opened.name == "Jane Appleseed")

            #expect(try await session.tokenize(activationData: sealed.activationData.data, device: .phone, token: "DAPL-1") == .requireAdditionalAuthentication)
            let found = try await client.searchTokens(["DAPL-1", "DAPL-unknown"])
            #expect(found.map(\.tokenUniqueReference) == ["DAPL-1"])
            #expect(found.first?.tokenStatus == .inactive)
            #expect(found.first?.externalCardId == "card-1")

            let activation = try await client.activateToken(tokenUniqueReference: "DAPL-1")
            #expect(activation.issuerMobileAppAuthResponse == .approved)
            #expect(activation.cardLast4Digits == "1111")
            #expect(try await client.searchTokens(["DAPL-1"]).first?.tokenStatus == .active)
        }
    }

    @Test func theServersErrorsArriveTypedWithTheirCodes() async throws {
        let server = try await LiveTMPServer()
        try await server.run { session in
            try await session.putCard("card-1", user: "alice")
            try await session.setCardStatus("card-1", .blocked)

            let expired = try session.sdkClient(user: "alice", age: 3600)
            let refusal = await #expect(throws: TMPClientError.self) { _ = try await expired.cards() }
            #expect(refusal?.kind == .unauthorized)

            let client = try session.sdkClient(user: "alice")
            let request = SignedCardRequest(externalCardId: "card-1", deviceType: .phone, certificates: server.pki.walletCertificates, nonce: Data([1]), nonceSignature: Data([2]))
            let blocked = await #expect(throws: TMPClientError.self) { _ = try await client.signCard(request) }
            #expect(blocked?.kind == .server(status: 409))
            #expect(blocked?.code == "card_blocked")
            let unknown = await #expect(throws: TMPClientError.self) { _ = try await client.activateToken(tokenUniqueReference: "DAPL-nobody") }
            #expect(unknown?.kind == .server(status: 404))
            #expect(unknown?.code == "token_not_found")
        }
    }

    @Test func aRefusedConnectionIsUnreachable() async throws {
        // Port 1 on loopback: nothing listens there, so the connection is refused at once.
        let client = TMPClient(configuration: .init(baseURL: URL(string: "http://127.0.0.1:1/")!, retry: .none), cardholderToken: { "token" })
        let refused = await #expect(throws: TMPClientError.self) { _ = try await client.cards() }
        #expect(refused?.kind == .unreachable)
    }

    /// Flows 1, 2 and 4 end to end: status, in-app provisioning to the iPhone then the Watch,
    /// activation from the deep link — the pass library faked, everything else real.
    @Test func statusProvisioningAndActivationEndToEnd() async throws {
        let server = try await LiveTMPServer()
        try await server.run { session in
            try await session.putCard("card-1", user: "alice")
            let library = FakePassLibrary()
            let wallet = IssuerWallet(client: try session.sdkClient(user: "alice"), passLibrary: library, activationLinks: ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation"))

            var status = try await wallet.refreshStatus()
            #expect(status["card-1"]?.phone.action == .addToWallet)
            #expect(status["card-1"]?.watch.action == WalletCardAction.none)

            // Add to the iPhone.
            let phoneFlow = try await wallet.beginProvisioning(externalCardId: "card-1", target: .phone)
            #expect(phoneFlow.configuration.primaryAccountIdentifier == nil)
            let request = await phoneFlow.generateRequest(certificates: server.pki.walletCertificates, nonce: Data("n1".utf8), nonceSignature: Data("s1".utf8))
            #expect(!request.isEmpty)
            #expect(try await session.tokenize(activationData: try #require(request.activationData), device: .phone, token: "DAPL-PHONE") == .requireAdditionalAuthentication)
            let phonePass = Fixtures.pass("DAPL-PHONE", account: "PAI-1", device: .phone, state: .requiresActivation, serial: "SER-PHONE")
            library.passes = [phonePass]
            let phoneEnd = await phoneFlow.finish(.added(phonePass))
            #expect(phoneEnd.outcome == .added(.phone))
            status = try #require(phoneEnd.status)
            #expect(status["card-1"]?.phone.state == .requiresActivation)
            #expect(status["card-1"]?.phone.action == .activate)
            #expect(status["card-1"]?.watch.action == .addToWallet)

            // Activate from the deep link.
            let activation = try await wallet.handleActivationLink(URL(string: "bankapp://wallet-activation?serialNumber=SER-PHONE")!)
            #expect(activation.outcome == .approved)
            #expect(activation.status?["card-1"]?.phone.state == .active)

            // Add to the Watch, targeted with the iPhone pass's account. The card is already
            // active on the iPhone, so TMP's policy makes the Watch's token green.
            let watchFlow = try await wallet.beginProvisioning(externalCardId: "card-1", target: .watch)
            #expect(watchFlow.configuration.primaryAccountIdentifier == "PAI-1")
            let watchRequest = await watchFlow.generateRequest(certificates: server.pki.walletCertificates, nonce: Data("n2".utf8), nonceSignature: Data("s2".utf8))
            #expect(try await session.tokenize(activationData: try #require(watchRequest.activationData), device: .watch, token: "DAPL-WATCH") == .approved)
            library.passes.append(Fixtures.pass("DAPL-WATCH", account: "PAI-1", device: .watch, serial: "SER-WATCH"))
            let watchEnd = await watchFlow.finish(.added(nil))
            #expect(watchEnd.outcome == .added(.watch))
            #expect(watchEnd.status?["card-1"]?.watch.action == .inWallet)
            #expect(watchEnd.status?["card-1"]?.phone.action == .inWallet)
        }
    }
}
