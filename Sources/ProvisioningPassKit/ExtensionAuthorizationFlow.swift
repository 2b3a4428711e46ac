// iOS and visionOS PassKit (Mac Catalyst included), or the Linux shim: macOS's PassKit lacks the add sheet and
// the Watch's passes, and watchOS and tvOS have no issuer provisioning API (and no shim is linked there).
#if os(iOS) || os(visionOS) || os(Linux)
#if canImport(PassKit)
import PassKit
#else
import PassKitShim
#endif
import Foundation
import ProvisioningSDK

/// What the issuer's authorization (UI) extension — a view controller conforming to
/// `PKIssuerProvisioningExtensionAuthorizationProviding` — uses to sign the cardholder in
/// with the app's own login and hand the non-UI extension a session.
///
/// Call ``signIn(_:)`` from each way in the screen offers (Face ID / Touch ID first, then the
/// password form): a failed attempt throws and the screen stays up; the first success stores
/// the session and reports `.authorized`. ``cancel()`` reports `.canceled`. The first result
/// is the flow's result, whatever the order of events, and the provider's
/// `completionHandler` receives it exactly once.
///
/// A result is delivered only when there is a provider with a `completionHandler` to receive
/// it. Until then it is pending (``result`` set, ``isDelivered`` false), and every later call
/// of ``signIn(_:)``, ``cancel()`` or ``deliverPendingResult()`` tries again; so a view
/// controller that gets its `completionHandler` after the cardholder already finished should
/// call ``deliverPendingResult()`` when it is set (e.g. in the property's `didSet`). PassKit
/// gives no way to observe that assignment from outside the view controller.
@MainActor
public final class ExtensionAuthorizationFlow {
    /// The view controller Wallet presented; its `completionHandler` receives the result.
    public private(set) weak var provider: (any PKIssuerProvisioningExtensionAuthorizationProviding)?
    /// The sign-in step (session store, lifetime).
    public let signInStep: ExtensionSignIn
    /// The flow's result, once there is one (delivered or still pending).
    public private(set) var result: PKIssuerProvisioningExtensionAuthorizationResult?
    /// Whether a `completionHandler` has received ``result``.
    public private(set) var isDelivered = false

    /// A flow reporting to `provider`, storing the session in `secrets` for `lifetime` (5
    /// minutes by default, never longer than the token).
    public init(reportingTo provider: any PKIssuerProvisioningExtensionAuthorizationProviding, secrets: any SecretStore, lifetime: Duration = ExtensionSignIn.defaultLifetime, now: @escaping @Sendable () -> Date = { Date() }) {
        self.provider = provider
        self.signInStep = ExtensionSignIn(secrets: secrets, lifetime: lifetime, now: now)
    }

    /// A flow with the extension's configuration (its secret store).
    public convenience init(reportingTo provider: any PKIssuerProvisioningExtensionAuthorizationProviding, configuration: IssuerExtensionConfiguration, lifetime: Duration = ExtensionSignIn.defaultLifetime) {
        self.init(reportingTo: provider, secrets: configuration.secrets, lifetime: lifetime, now: configuration.now)
    }

    /// Runs the app's sign-in; on success stores the session and reports `.authorized`.
    ///
    /// Once the flow has a result, runs no sign-in and only tries to deliver a pending
    /// result. Returns true when this call delivered `.authorized`.
    ///
    /// - Throws: ``ExtensionSignIn/Failure`` when this attempt failed; nothing is reported.
    @discardableResult
    public func signIn(_ attempt: @Sendable () async throws -> SignedInCardholder) async throws(ExtensionSignIn.Failure) -> Bool {
        guard result == nil else { return deliverPendingResult() && result == .authorized }
        _ = try await signInStep.signIn(attempt)
        if result == .canceled {
            // Cancelled while the sign-in ran: leave no session behind the cardholder's back.
            try? signInStep.sessions.clear()
        }
        return report(.authorized)
    }

    /// The cardholder gave up: reports `.canceled` unless the flow already has a result (then
    /// only tries to deliver it if it is pending). Returns true when this call delivered
    /// `.canceled`.
    @discardableResult
    public func cancel() -> Bool {
        report(.canceled)
    }

    /// Hands a pending result to the provider's `completionHandler`, if there is one now.
    /// Returns true when this call delivered it; false when there is no result yet, it was
    /// already delivered, or there is still no provider or handler to receive it.
    @discardableResult
    public func deliverPendingResult() -> Bool {
        guard let result, !isDelivered, let handler = provider?.completionHandler else { return false }
        isDelivered = true
        handler(result)
        return true
    }

    private func report(_ outcome: PKIssuerProvisioningExtensionAuthorizationResult) -> Bool {
        if result == nil { result = outcome }
        return deliverPendingResult() && result == outcome
    }
}
#endif
