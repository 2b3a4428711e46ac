import ProvisioningModels
import TokenPlatform

/// Why the simulated token service refused a call.
public enum TokenServiceSimulatorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No TMP endpoint yet: call ``TokenServiceSimulator/connect(to:)`` first.
    case notConnected
    /// The token service holds no token with this reference.
    case unknownToken(String)
    /// The command does not apply to the token's state (for example suspending an inactive token).
    case illegalTransition(tokenUniqueReference: String, from: TokenStatus, to: TokenStatus)
    /// The operation hung past its time and failed (an injected fault); nothing changed.
    case timedOut(TokenServiceOperation)
    /// An activation link was asked for a token that does not wait for activation.
    case notAwaitingActivation(tokenUniqueReference: String, status: TokenStatus)
    /// The serial number is empty or longer than 256 characters.
    case invalidSerialNumber
    /// TMP refused the token service's call in a way retrying will not fix (wrong API key,
    /// invalid request): a configuration error, reported loudly rather than as a decline.
    case issuerRefused(TSPAPIError)
    /// TMP's decision does not follow the TSP API (an approval without `panUniqueReference`).
    case invalidDecision(String)

    /// A stable machine code.
    public var code: String {
        switch self {
        case .notConnected: "not_connected"
        case .unknownToken: "unknown_token"
        case .illegalTransition: "illegal_token_transition"
        case .timedOut: "timed_out"
        case .notAwaitingActivation: "not_awaiting_activation"
        case .invalidSerialNumber: "invalid_serial_number"
        case .issuerRefused: "issuer_refused"
        case .invalidDecision: "invalid_decision"
        }
    }

    /// What went wrong; token references are shortened, card data never appears.
    public var description: String {
        switch self {
        case .notConnected:
            "the token service simulator has no TMP endpoint; call connect(to:) first"
        case .unknownToken(let reference):
            "the token service has no token \(Redaction.prefix(reference))"
        case .illegalTransition(let reference, let from, let to):
            "token \(Redaction.prefix(reference)) is \(from.rawValue) and cannot become \(to.rawValue)"
        case .timedOut(let operation):
            "\(operation.rawValue) timed out at the token service"
        case .notAwaitingActivation(let reference, let status):
            "token \(Redaction.prefix(reference)) is \(status.rawValue), not INACTIVE; it needs no activation link"
        case .invalidSerialNumber:
            "serialNumber must be 1 to 256 characters"
        case .issuerRefused(let error):
            "TMP refused the token service: \(error)"
        case .invalidDecision(let reason):
            "TMP's tokenization decision is invalid: \(reason)"
        }
    }
}

extension TokenServiceSimulatorError: TokenServiceCommandRefusal {
    /// An unknown token, or a command its state does not allow, is the token service's final
    /// answer (TMP declines an activation so refused); the rest are failures.
    public var isRefusedForGood: Bool {
        switch self {
        case .unknownToken, .illegalTransition: true
        case .notConnected, .timedOut, .notAwaitingActivation, .invalidSerialNumber, .issuerRefused, .invalidDecision: false
        }
    }
}
