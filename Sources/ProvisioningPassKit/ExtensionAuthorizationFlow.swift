// iOS-family PassKit (with UIKit), or the Linux shim; macOS's PassKit lacks the add sheet and the Watch's passes.
#if canImport(UIKit) || !canImport(PassKit)
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
/// the session and reports `.authorized`. ``cancel()`` reports `.canceled`. The provider's
/// `completionHandler` is called exactly once, whatever the order of events.
@MainActor
public final class ExtensionAuthorizationFlow {
    /// The view controller Wallet presented; its `completionHandler` receives the result.
    public private(set) weak var provider: (any PKIssuerProvisioningExtensionAuthorizationProviding)?
    /// The sign-in step (session store, lifetime).
    public let signInStep: ExtensionSignIn
    /// The result reported, once there is one.
    public private(set) var result: PKIssuerProvisioningExtensionAuthorizationResult?

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
    /// After the flow has ended, does nothing and returns false.
    ///
    /// - Throws: ``ExtensionSignIn/Failure`` when this attempt failed; nothing is reported.
    @discardableResult
    public func signIn(_ attempt: @Sendable () async throws -> SignedInCardholder) async throws(ExtensionSignIn.Failure) -> Bool {
        guard result == nil else { return false }
        _ = try await signInStep.signIn(attempt)
        if result == .canceled {
            // Cancelled while the sign-in ran: leave no session behind the cardholder's back.
            try? signInStep.sessions.clear()
        }
        return report(.authorized)
    }

    /// The cardholder gave up: reports `.canceled` unless the flow has already ended.
    @discardableResult
    public func cancel() -> Bool {
        report(.canceled)
    }

    private func report(_ outcome: PKIssuerProvisioningExtensionAuthorizationResult) -> Bool {
        guard result == nil else { return false }
        result = outcome
        provider?.completionHandler?(outcome)
        return true
    }
}
#endif
