// iOS and visionOS PassKit (Mac Catalyst included), or the Linux shim: macOS's PassKit lacks the add sheet and
// the Watch's passes, and watchOS and tvOS have no issuer provisioning API (and no shim is linked there).
#if os(iOS) || os(visionOS) || os(Linux)
#if canImport(PassKit)
import PassKit
#else
import PassKitShim
#endif
#if canImport(UIKit)
import UIKit
#endif
import Foundation
import ProvisioningModels
import ProvisioningSDK

/// Shows Wallet's add sheet for one ``ProvisioningSession`` and answers it as its
/// `PKAddPaymentPassViewControllerDelegate`, through the SDK.
///
/// The sheet holds its delegate weakly, so every sheet the coordinator makes keeps the
/// coordinator alive for as long as the sheet itself lives (on iOS through an Objective-C
/// associated object): an app may present the sheet and drop its own reference to the
/// coordinator, and Wallet's requests are still answered. Once Wallet reports the end, the
/// coordinator lives until it has reported the flow's ``ProvisioningOutcome`` once, with the
/// refreshed wallet status. A sheet made and never presented keeps nothing alive after the
/// app lets go of it.
@MainActor
public final class AddPaymentPassCoordinator: NSObject {
    /// Called once when the flow ends, with the outcome and the wallet status read afterwards.
    public typealias Completion = @MainActor (ProvisioningOutcome, WalletStatusSnapshot?) -> Void

    /// The flow.
    public let session: ProvisioningSession
    /// The flow's outcome, once it has ended.
    public private(set) var outcome: ProvisioningOutcome?
    /// Closes the sheet when Wallet reports the end, at once (before the outcome, which waits
    /// for a status read). By default the sheet dismisses itself (`dismiss(animated: true)`).
    /// An app that presents it its own way — in SwiftUI, a `.sheet` around a
    /// `UIViewControllerRepresentable` — sets its own, changing the state that shows it, so
    /// SwiftUI's state and the screen agree.
    public var dismissSheet: (PKAddPaymentPassViewController) -> Void = { sheet in
        #if canImport(UIKit)
        sheet.dismiss(animated: true)
        #endif
    }
    private let completion: Completion

    /// Creates a coordinator for `session`; `completion` runs once when the flow ends.
    public init(session: ProvisioningSession, completion: @escaping Completion) {
        self.session = session
        self.completion = completion
        super.init()
    }

    /// The add sheet for this flow with this coordinator as its delegate; nil when the device
    /// cannot add payment passes or the app lacks the
    /// `com.apple.developer.payment-pass-provisioning` entitlement.
    ///
    /// The sheet keeps this coordinator alive until the sheet is deallocated (after it is
    /// dismissed, or when the app drops a sheet it never presented), so the caller need not
    /// keep the coordinator.
    public func makeViewController() -> PKAddPaymentPassViewController? {
        guard PKAddPaymentPassViewController.canAddPaymentPass(), let configuration = session.configuration.passKitConfiguration(),
            let controller = PKAddPaymentPassViewController(requestConfiguration: configuration, delegate: self)
        else { return nil }
        // Not a cycle: the coordinator never holds the sheet. Tied to the sheet's life rather
        // than to the end of the flow, so a sheet that is never presented (and so never
        // finishes) does not keep the coordinator forever.
        controller.keepAlive(self)
        return controller
    }

    /// Makes the sheet and hands it to `present` (on iOS: `presenter.present($0, animated: true)`).
    /// Returns false, presenting nothing, when ``makeViewController()`` cannot make one.
    @discardableResult
    public func start(presentingWith present: (PKAddPaymentPassViewController) -> Void) -> Bool {
        guard let controller = makeViewController() else { return false }
        present(controller)
        return true
    }

    #if canImport(UIKit)
    /// Presents the sheet over `presenter`. Returns false when it cannot be made.
    @discardableResult
    public func present(from presenter: UIViewController, animated: Bool = true) -> Bool {
        start { presenter.present($0, animated: animated) }
    }
    #endif
}

extension AddPaymentPassCoordinator: @preconcurrency PKAddPaymentPassViewControllerDelegate {
    /// Answers Wallet through ``ProvisioningSession/generateRequest(certificates:nonce:nonceSignature:)``:
    /// `handler` runs exactly once, within the budget, with an empty request on any failure.
    public func addPaymentPassViewController(
        _ controller: PKAddPaymentPassViewController,
        generateRequestWithCertificateChain certificates: [Data],
        nonce: Data,
        nonceSignature: Data,
        completionHandler handler: @escaping (PKAddPaymentPassRequest) -> Void
    ) {
        let session = session
        Task { @MainActor in
            let request = await session.generateRequest(certificates: certificates, nonce: nonce, nonceSignature: nonceSignature)
            handler(request.passKitRequest())
        }
    }

    /// Closes the sheet (``dismissSheet``), ends the session with Wallet's result and reports
    /// the outcome.
    public func addPaymentPassViewController(_ controller: PKAddPaymentPassViewController, didFinishAdding pass: PKPaymentPass?, error: (any Error)?) {
        dismissSheet(controller)
        // Where the pass is, not where the app asked for it: with the card on neither device,
        // Wallet's sheet lets the cardholder pick the iPhone or the paired Watch.
        let result: WalletAddResult = error.map { .failed(WalletAddError($0)) } ?? .added(pass.map { WalletPass($0, device: $0.isRemotePass ? .watch : .phone) })
        let session = session
        // The task holds the coordinator until the outcome is reported, even if the dismissed
        // sheet (which kept it alive so far) is gone by then.
        Task { @MainActor in
            let (outcome, status) = await session.finish(result)
            if self.outcome == nil {
                self.outcome = outcome
                completion(outcome, status)
            }
        }
    }
}

extension PKAddPaymentPassViewController {
    /// Keeps `owner` alive until this sheet is deallocated.
    fileprivate func keepAlive(_ owner: AnyObject) {
        #if canImport(PassKit)
        objc_setAssociatedObject(self, AddPaymentPassCoordinatorKey.sheetOwner, owner, .OBJC_ASSOCIATION_RETAIN_NONATOMIC)
        #else
        passKitShimRetainedObjects.append(owner)
        #endif
    }
}

#if canImport(PassKit)
private enum AddPaymentPassCoordinatorKey {
    // nonisolated(unsafe): allocated once and never written or freed; only its address is
    // used, as the key of the associated object.
    nonisolated(unsafe) static let sheetOwner = UnsafeRawPointer(UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1))
}
#endif
#endif
