import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import Testing

@Suite("Activation deep links")
struct ActivationLinkTests {
    static let route = ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation")

    struct World {
        let server: ScriptedTransport
        let library: FakePassLibrary
        let wallet: IssuerWallet
    }

    func world(activation: ActivationOutcome = .approved, transport: ScriptedTransport? = nil) -> World {
        let passes = [
            Fixtures.pass("DA-PHONE", account: "PAI-1", device: .phone, state: .requiresActivation, serial: "SER-PHONE"),
            Fixtures.pass("DA-WATCH", account: "PAI-1", device: .watch, state: .requiresActivation, serial: "SER-WATCH"),
        ]
        let tokens = [Fixtures.token("DA-PHONE", card: "card-1", status: .inactive), Fixtures.token("DA-WATCH", card: "card-1", status: .inactive, device: .watch)]
        let server = transport ?? Fixtures.server(cards: [Fixtures.card("card-1")], tokens: tokens, activation: activation)
        let library = FakePassLibrary(passes: passes)
        return World(server: server, library: library, wallet: IssuerWallet(client: Fixtures.client(server), passLibrary: library, activationLinks: Self.route))
    }

    func activationError(_ link: String, in world: World) async -> ActivationError? {
        do {
            _ = try await world.wallet.handleActivationLink(URL(string: link)!)
            return nil
        } catch {
            return error
        }
    }

    @Test func aGoodLinkActivatesThePassesTokenAndRefreshesTheStatus() async throws {
        let world = world()
        let result = try await world.wallet.handleActivationLink(URL(string: "bankapp://wallet-activation?serialNumber=SER-PHONE")!)
        #expect(result.outcome == .approved)
        #expect(result.comment == "the token is active")
        #expect(result.cardLast4Digits == "1111")
        #expect(result.pass.device == .phone)
        let sent = try #require(world.server.requests(for: .activateToken).first)
        #expect(try ScriptedTransport.body(of: sent, as: TokenActivationRequest.self).tokenUniqueReference == "DA-PHONE")
        #expect(result.status?["card-1"] != nil)
        #expect(world.server.requests(for: .searchTokens).count == 1)
    }

    @Test func aPassOnTheWatchIsFoundAndActivated() async throws {
        let world = world()
        let result = try await world.wallet.handleActivationLink(URL(string: "BANKAPP://Wallet-Activation?serialNumber=SER-WATCH&other=1")!)
        #expect(result.pass.device == .watch)
        let sent = try #require(world.server.requests(for: .activateToken).first)
        #expect(try ScriptedTransport.body(of: sent, as: TokenActivationRequest.self).tokenUniqueReference == "DA-WATCH")
    }

    @Test(arguments: [ActivationOutcome.declined, .failed])
    func declinedAndFailedAreResultsWithTheServersComment(outcome: ActivationOutcome) async throws {
        let world = world(activation: outcome)
        let result = try await world.wallet.handleActivationLink(URL(string: "bankapp://wallet-activation?serialNumber=SER-PHONE")!)
        #expect(result.outcome == outcome)
        #expect(result.comment == "the token is unchanged")
    }

    @Test(arguments: [
        ("wrong scheme", "otherapp://wallet-activation?serialNumber=SER-PHONE", "scheme"),
        ("wrong host", "bankapp://elsewhere?serialNumber=SER-PHONE", "host"),
        ("no serialNumber", "bankapp://wallet-activation?serial=SER-PHONE", "no serialNumber"),
        ("two serialNumbers", "bankapp://wallet-activation?serialNumber=SER-PHONE&serialNumber=SER-WATCH", "exactly one"),
        ("empty", "bankapp://wallet-activation?serialNumber=", "empty"),
        ("valueless", "bankapp://wallet-activation?serialNumber", "empty"),
        ("control characters", "bankapp://wallet-activation?serialNumber=SER%0APHONE", "control"),
        ("long serial", "bankapp://wallet-activation?serialNumber=" + String(repeating: "S", count: 129), "at most 128"),
        // Strict: the configured link, and nothing beside it.
        ("extra path", "bankapp://wallet-activation/x/y?serialNumber=SER-PHONE", "path is not empty"),
        ("port", "bankapp://wallet-activation:444?serialNumber=SER-PHONE", "port"),
        ("user", "bankapp://u:p@wallet-activation?serialNumber=SER-PHONE", "user"),
        ("fragment", "bankapp://wallet-activation?serialNumber=SER-PHONE#f", "fragment"),
    ])
    func malformedLinksAreRefusedWithoutACall(name: String, link: String, reason: String) async throws {
        let world = world()
        let error = try #require(await activationError(link, in: world))
        #expect(error.kind == .malformedLink)
        #expect(error.message.contains(reason))
        #expect(world.server.requests.isEmpty)
    }

    @Test func aTenKilobyteLinkIsRefusedBeforeParsing() async throws {
        let world = world()
        let link = "bankapp://wallet-activation?serialNumber=SER-PHONE&padding=" + String(repeating: "x", count: 10 * 1024)
        let error = try #require(await activationError(link, in: world))
        #expect(error.kind == .malformedLink)
        #expect(error.message.contains("at most 2048"))
        #expect(world.server.requests.isEmpty)
    }

    @Test func anUnknownSerialNumberIsAnUnknownPass() async throws {
        let world = world()
        let error = try #require(await activationError("bankapp://wallet-activation?serialNumber=SER-NOWHERE", in: world))
        #expect(error.kind == .unknownPass)
        #expect(error.code == "unknown_pass")
        #expect(world.server.requests.isEmpty)
    }

    @Test func aNetworkFailureIsANetworkErrorCarryingTheClientsError() async throws {
        let world = world(transport: ScriptedTransport { _, _ in throw URLError(.notConnectedToInternet) })
        let error = try #require(await activationError("bankapp://wallet-activation?serialNumber=SER-PHONE", in: world))
        #expect(error.kind == .network)
        #expect(error.clientError?.kind == .unreachable)
        #expect(world.server.requests(for: .activateToken).count == 1)
    }

    @Test func universalLinksMatchSchemeHostAndPath() throws {
        let route = ActivationLinkRoute(scheme: "https", host: "bank.example", path: "/wallet/activate")
        #expect(try route.serialNumber(in: URL(string: "https://bank.example/wallet/activate?serialNumber=A%20B")!) == "A B")
        #expect(throws: ActivationError.self) { try route.serialNumber(in: URL(string: "https://bank.example/elsewhere?serialNumber=A")!) }
        for other in ["https://bank.example/wallet%2Factivate?serialNumber=A", "https://bank.example/wallet/activate/more?serialNumber=A", "https://bank.example:8443/wallet/activate?serialNumber=A", "https://u:p@bank.example/wallet/activate?serialNumber=A"] {
            #expect(throws: ActivationError.self, "\(other)") { try route.serialNumber(in: URL(string: other)!) }
        }
        // Without a path, an empty one or `/` only.
        let custom = ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation")
        #expect(try custom.serialNumber(in: URL(string: "bankapp://wallet-activation/?serialNumber=A")!) == "A")
    }
}
