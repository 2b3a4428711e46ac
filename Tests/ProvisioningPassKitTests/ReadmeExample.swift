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

// The README's "Add it to your iOS app" code, compiled here. The regions between
// `README-BEGIN name` and `README-END` appear in the README verbatim (less their indentation);
// ReadmeExampleTests checks that and runs the model.

/// The app's sign-in, whatever it is: it hands out the signed-in cardholder's current JWT.
protocol CardholderSession: Sendable {
    func accessToken() async throws -> String
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
            activationLinks: ActivationLinkRoute(scheme: "bankapp", host: "wallet-activation")
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
            message = error.message  // malformed_link, unknown_pass or network
        }
    }
    // README-END
}
#endif
