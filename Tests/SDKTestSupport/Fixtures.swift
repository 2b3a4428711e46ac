import Foundation
import ProvisioningModels
import ProvisioningSDK

/// Values the SDK tests share.
public enum Fixtures {
    /// A card for display.
    public static func card(_ id: String, last4: String = "1111", status: CardStatus = .active, network: CardNetwork = .visa) -> CardSummary {
        CardSummary(externalCardId: id, panLast4: last4, cardholderName: "Jane Appleseed", network: network, productTitle: "Everyday Debit", artURL: nil, status: status)
    }

    /// A pass of account `account` on `device`.
    public static func pass(_ reference: String, account: String, device: DeviceType, state: WalletPass.ActivationState = .activated, serial: String? = nil, last4: String = "1111") -> WalletPass {
        WalletPass(serialNumber: serial ?? "serial-\(reference)", deviceAccountIdentifier: reference, primaryAccountIdentifier: account, primaryAccountNumberSuffix: last4, activationState: state, device: device)
    }

    /// TMP's search result for token `reference` of card `card`.
    public static func token(_ reference: String, card: String, status: TokenStatus, device: DeviceType = .phone) -> TokenSearchResult {
        TokenSearchResult(
            tokenUniqueReference: reference,
            panUniqueReference: "PUR-\(card)",
            externalCardId: card,
            tokenStatus: status,
            authorizationPath: status == .inactive ? .yellow : .green,
            processStatus: status == .inactive ? "PENDING_ACTIVATION" : "COMPLETED",
            deviceType: device
        )
    }

    /// A sealed-card answer with recognisable bytes.
    public static let signedCard = SignedCardResponse(activationData: Data("activation".utf8), ephemeralPublicKey: Data([0x04] + Array(repeating: 7, count: 64)), encryptedData: Data("sealed".utf8))

    /// The base URL tests point clients at (scripted transports never connect to it).
    public static let baseURL = URL(string: "https://tmp.bank.example/")!

    /// A TMP server in a script: answers `GET cards` with `cards`, `tokens/searches` with the
    /// `tokens` among the requested references, `signed-cards` with ``signedCard``,
    /// `tokens/activations` with `activation` (APPROVED by default) and `cards/{id}/art` with
    /// the file in `art` (PNG or PDF, by its first bytes; 404 when there is none).
    public static func server(cards: [CardSummary], tokens: [TokenSearchResult], activation: ActivationOutcome = .approved, art: [String: Data] = [:]) -> ScriptedTransport {
        ScriptedTransport { request, _ in
            switch ScriptedTransport.operation(of: request) {
            case .listCards:
                return ScriptedTransport.json(CardListResponse(cards: cards))
            case .searchTokens:
                let asked = Set(try ScriptedTransport.body(of: request, as: TokenSearchRequest.self).tokenUniqueReferences)
                return ScriptedTransport.json(tokens.filter { asked.contains($0.tokenUniqueReference) })
            case .signCard:
                return ScriptedTransport.json(signedCard)
            case .activateToken:
                let reference = try ScriptedTransport.body(of: request, as: TokenActivationRequest.self).tokenUniqueReference
                return ScriptedTransport.json(TokenActivationResponse(tokenUniqueReference: reference, cardLast4Digits: "1111", issuerMobileAppAuthResponse: activation, comment: "the token is \(activation == .approved ? "active" : "unchanged")"))
            case .cardArt:
                guard let id = ScriptedTransport.artCardId(of: request), let file = art[id] else {
                    return ScriptedTransport.error(404, code: "card_art_not_found", message: "the card has no art")
                }
                let type = file.starts(with: Data("%PDF".utf8)) ? "application/pdf" : "image/png"
                return TransportResponse(statusCode: 200, headers: ["Content-Type": type], body: file)
            case nil:
                return ScriptedTransport.error(404, code: "not_found", message: "no route")
            }
        }
    }

    /// A client over `transport` with a fixed token and `clock`.
    public static func client(_ transport: any HTTPTransport, clock: any Clock<Duration> = ManualClock(), retry: TMPClient.RetryPolicy = .init(initialBackoff: .zero), token: String = "cardholder-jwt", log: @escaping @Sendable (TMPClientEvent) -> Void = { _ in }) -> TMPClient {
        TMPClient(configuration: .init(baseURL: baseURL, retry: retry), transport: transport, clock: clock, cardholderToken: { token }, log: log)
    }
}
