import ProvisioningModels

/// Why in-app provisioning did not add the card.
public enum ProvisioningFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The card cannot be added to that device (not active at the issuer, already there, or
    /// the Watch targeted before the iPhone has the card).
    case notEligible(String)
    /// This device has no Wallet pass library. (A device that cannot add payment passes, or an
    /// app without the `com.apple.developer.payment-pass-provisioning` entitlement, is told by
    /// the add-pass coordinator's `start`, which then returns false. Some iPads say they can
    /// add — `canAddPaymentPass` is true — and cannot: there Wallet ends the flow and the
    /// outcome is ``wallet(_:)`` with ``WalletAddError/Reason/unsupported``.)
    case unavailable(String)
    /// `signed-cards` failed; the server's code and message are in the error.
    case server(TMPClientError)
    /// No answer within Wallet's budget; Wallet was given an empty request.
    case timedOut
    /// The request was abandoned (the flow ended, or Wallet asked again) before it was answered.
    case cancelled
    /// Wallet reported an error of its own (`PKAddPaymentPassError` or another NSError).
    case wallet(WalletAddError)

    /// A stable machine code.
    public var code: String {
        switch self {
        case .notEligible: "not_eligible"
        case .unavailable: "unavailable"
        case .server(let error): error.code
        case .timedOut: "timed_out"
        case .cancelled: "cancelled"
        case .wallet(let error): error.code
        }
    }

    /// What happened, for people.
    public var description: String {
        switch self {
        case .notEligible(let reason), .unavailable(let reason): reason
        case .server(let error): error.description
        case .timedOut: "the issuer did not answer within Wallet's time limit"
        case .cancelled: "the request was abandoned before it was answered"
        case .wallet(let error): error.description
        }
    }
}

/// An error Wallet reported when the add sheet finished.
public struct WalletAddError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `PKAddPaymentPassError`'s cases, or another error.
    public enum Reason: Sendable, Hashable {
        /// `PKAddPaymentPassError.unsupported`.
        case unsupported
        /// `PKAddPaymentPassError.userCancelled`.
        case userCancelled
        /// `PKAddPaymentPassError.systemCancelled`.
        case systemCancelled
        /// Any other error, by NSError domain and code.
        case other(domain: String, code: Int)
    }

    /// The reason.
    public var reason: Reason

    /// Creates an error.
    public init(_ reason: Reason) {
        self.reason = reason
    }

    /// A stable machine code.
    public var code: String {
        switch reason {
        case .unsupported: "wallet_unsupported"
        case .userCancelled: "wallet_user_cancelled"
        case .systemCancelled: "wallet_system_cancelled"
        case .other: "wallet_error"
        }
    }

    /// What happened, for people.
    public var description: String {
        switch reason {
        case .unsupported: "Wallet cannot add this card on this device"
        case .userCancelled: "the cardholder closed Wallet's sheet"
        case .systemCancelled: "the system closed Wallet's sheet"
        case .other(let domain, let code): "Wallet reported error \(domain) \(code)"
        }
    }
}

/// How Wallet's add sheet finished, as the SDK needs to know it.
public enum WalletAddResult: Sendable, Hashable {
    /// Wallet added a pass (the pass, when Wallet handed it over).
    case added(WalletPass?)
    /// Wallet finished with an error.
    case failed(WalletAddError)
}

/// The end of one in-app provisioning flow.
public enum ProvisioningOutcome: Sendable, Hashable {
    /// The card was added to this device: the one Wallet reports the pass on, which can be
    /// the other device than the flow's target when the card was on neither and the
    /// cardholder picked it in Wallet's sheet.
    case added(DeviceType)
    /// The cardholder cancelled; nothing to report.
    case cancelled
    /// The card was not added, for this reason.
    case failed(ProvisioningFailure)
}
