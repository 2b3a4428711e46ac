// iOS-family PassKit (with UIKit), or the Linux shim; macOS's PassKit lacks the add sheet and the Watch's passes.
#if canImport(UIKit) || !canImport(PassKit)
import Foundation
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK

#if canImport(PassKit)
import PassKit
#else
import PassKitShim
#endif
#if canImport(UIKit)
import UIKit
#endif

// The README's "Add it to your iOS app" code, compiled here. The regions between
// `README-BEGIN name` and `README-END` appear in the README verbatim (less their indentation);
// ReadmeExampleTests checks that and runs the model.

/// The app's sign-in, whatever it is: it hands out the signed-in cardholder's current JWT
/// and user id.
protocol CardholderSession: Sendable {
    func accessToken() async throws -> String
    func userId() async -> String?
}

/// A cards screen's model: each card with a button per device, in-app provisioning, deep links.
@MainActor
final class WalletCardsModel {
    let wallet: IssuerWallet
    private(set) var cards: [CardWalletStatus] = []
    private(set) var message: String?

    init(tmpURL: URL, session: any CardholderSession) {
        // README-BEGIN setup
        let client = TMPClient(
            configuration: .init(baseURL: tmpURL),
            cardholderToken: { try await session.accessToken() }
        )
        wallet = IssuerWallet(
            client: client,
            passLibrary: PassKitPassLibrary(),
            activationLinks: ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation"),
            sharing: IssuerExtensionConfiguration.bank.sharing(userId: { await session.userId() })
        )
        // README-END
    }

    init(wallet: IssuerWallet) {
        self.wallet = wallet
    }

    // README-BEGIN status
    func reload() async {
        do {
            cards = try await wallet.refreshStatus().cards
        } catch {
            message = error.message  // e.g. .unauthorized: sign the cardholder in again
        }
    }

    /// What to show under a card for one device (`card.phone`, `card.watch`); nil: nothing.
    static func buttonTitle(for status: DeviceWalletStatus) -> String? {
        switch status.action {
        case .addToWallet: "Add to Apple Wallet"
        case .activate: "Activate card"
        case .inWallet: "In Wallet"
        case .none: nil
        }
    }
    // README-END

    // README-BEGIN add
    func addToWallet(_ card: CardWalletStatus, on device: DeviceType, present: (PKAddPaymentPassViewController) -> Void) async {
        do {
            let session = try await wallet.beginProvisioning(externalCardId: card.id, target: device)
            let coordinator = AddPaymentPassCoordinator(session: session) { [weak self] outcome, status in
                if let status { self?.cards = status.cards }
                switch outcome {
                case .added, .cancelled: self?.message = nil
                case .failed(let failure): self?.message = "The card was not added: \(failure)"
                }
            }
            if !coordinator.start(presentingWith: present) {
                message = "Apple Wallet cannot add cards on this device."
            }
        } catch {
            message = error.description
        }
    }
    // README-END

    // README-BEGIN link
    func open(_ url: URL) async {
        do {
            let result = try await wallet.handleActivationLink(url)
            if let status = result.status { cards = status.cards }
            message = result.outcome == .approved ? "Your card is ready for Apple Pay." : result.comment
        } catch {
            message = error.message  // malformed_link, unknown_pass, network or awaiting_issuer
        }
    }
    // README-END
}

// MARK: The Wallet extensions

// README-BEGIN extension-configuration
extension IssuerExtensionConfiguration {
    /// Compiled into the app and into both extensions.
    static var bank: IssuerExtensionConfiguration {
        IssuerExtensionConfiguration(
            tmpURL: URL(string: "https://tmp.bank.example/")!,
            appGroup: "group.com.bank.app.wallet",
            keychainAccessGroup: "TEAMID.com.bank.app.wallet"
        )
    }
}
// README-END

// README-BEGIN extension-handler
/// The non-UI extension's principal class (NSExtensionPrincipalClass).
final class BankWalletExtensionHandler: IssuerProvisioningExtensionHandler {
    override class var configuration: IssuerExtensionConfiguration { .bank }
}
// README-END

#if canImport(UIKit)
typealias ViewController = UIViewController
#else
/// Stands in for UIKit's `UIViewController` on Linux.
@MainActor class ViewController: NSObject {}
#endif

/// The app's own login, shared with the UI extension: biometric or with a password.
struct BankLogin: Sendable {
    func withBiometrics() async throws -> SignedInCardholder {
        SignedInCardholder(cardholderToken: "jwt-from-face-id", userId: "alice")
    }

    func withPassword(user: String, password: String) async throws -> SignedInCardholder {
        SignedInCardholder(cardholderToken: "jwt-from-password", userId: user)
    }
}

// README-BEGIN extension-sign-in
/// The UI extension's principal class: the app's login, then `.authorized` or `.canceled`.
final class BankSignInViewController: ViewController, @preconcurrency PKIssuerProvisioningExtensionAuthorizationProviding {
    var completionHandler: ((PKIssuerProvisioningExtensionAuthorizationResult) -> Void)? {
        didSet { flow.deliverPendingResult() }  // a result reached before Wallet set it
    }
    private let login = BankLogin()
    private lazy var flow = ExtensionAuthorizationFlow(reportingTo: self, configuration: .bank)
    private(set) var error: String?

    /// Face ID / Touch ID first; if it fails, the password form stays on screen.
    func signInWithBiometrics() async {
        let login = login
        do {
            try await flow.signIn { try await login.withBiometrics() }
        } catch {
            self.error = error.description
        }
    }

    func signIn(user: String, password: String) async {
        let login = login
        do {
            try await flow.signIn { try await login.withPassword(user: user, password: password) }
        } catch {
            self.error = error.description
        }
    }

    func cancelTapped() {
        flow.cancel()
    }
}
// README-END
#endif
