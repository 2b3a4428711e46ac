#if !canImport(PassKit)
import Crypto
import Foundation
import PassKitShim
import ProvisioningCrypto
import ProvisioningModels

/// The values of a `PKAddPaymentPassRequest` (a mutable class) as they were handed to Wallet.
struct IssuerRequest: Sendable {
    var encryptedPassData: Data?
    var activationData: Data?
    var ephemeralPublicKey: Data?

    init(_ request: PKAddPaymentPassRequest) {
        encryptedPassData = request.encryptedPassData
        activationData = request.activationData
        ephemeralPublicKey = request.ephemeralPublicKey
    }
}

/// Apple Wallet's add sheet (`PKAddPaymentPassViewController`) and Apple's servers behind it,
/// played for the issuer app's real delegate code.
///
/// Presenting a controller runs the whole in-app flow as Wallet does: check the
/// configuration, let the user pick the device, ask the delegate for the card data with the
/// leaf and intermediate of Apple's (simulated) chain, a fresh nonce and Apple's signature over
/// it, within Wallet's 20-second budget; open `encryptedPassData` with the leaf's private key
/// and check its five fields, the nonce and its signature; hand the card and the activation
/// data to the network; add the pass to the chosen device; and report `didFinishAdding`.
/// Misuse that a real device punishes — a late answer, no answer, a second call of the
/// completion handler — is recorded in ``Result/violations``.
public struct SimulatedAddPaymentPassSheet: Sendable {
    /// The Wallet (device and passes) the sheet adds to.
    public let wallet: SimulatedWallet
    /// Apple's certificates and the leaf's private key.
    public let pki: SimulatedApplePKI
    /// The card network the opened card goes to.
    public let network: any SimulatedPaymentNetwork
    /// How long the delegate has to answer `generateRequestWithCertificateChain` (Wallet: 20 s).
    public var budget: Duration
    /// How many times Wallet asks the delegate for card data in one flow: after an answer
    /// that could not be added (data that does not open or match, a network decline) it asks
    /// again with a fresh nonce, as Apple may (reference/apple-requirements.md). 1 (the
    /// default) asks once.
    public var generateRequestAttempts: Int
    private let nonceKey: P256.Signing.PrivateKey

    /// Creates the sheet.
    public init(wallet: SimulatedWallet, pki: SimulatedApplePKI, network: any SimulatedPaymentNetwork, budget: Duration = .seconds(20), generateRequestAttempts: Int = 1) {
        self.wallet = wallet
        self.pki = pki
        self.network = network
        self.budget = budget
        self.generateRequestAttempts = max(1, generateRequestAttempts)
        nonceKey = P256.Signing.PrivateKey()
    }

    /// What the user does on the sheet.
    public enum UserAction: Sendable, Hashable {
        /// Goes on, adding to this device when the sheet lets them choose (else to the only
        /// device it offers).
        case add(preferring: DeviceType)
        /// Taps Cancel before anything is generated.
        case cancel
        /// Goes on (to the iPhone when the sheet offers it, else the only device it offers),
        /// then taps Cancel once Wallet has asked the delegate for the card data, before the
        /// answer is used: Wallet reports `didFinishAdding(nil, userCancelled)` with the
        /// delegate's completion handler still pending. Its answer is then ignored (one
        /// call is no fault: ``Result/ignoredAnswers``; a second is a violation).
        case cancelWhileGenerating
    }

    /// How a presentation ended.
    public struct Result: Sendable {
        /// The pass added, or why none was.
        public enum Outcome: Sendable, Hashable {
            /// The pass is in Wallet on its device.
            case added(SimulatedPass)
            /// Nothing was added; `code` is what `didFinishAdding` reported, `reason` says why.
            case failed(code: PKAddPaymentPassError, reason: String)
        }

        /// The outcome.
        public var outcome: Outcome
        /// The device the sheet chose, once it got that far.
        public var device: DeviceType?
        /// How long the delegate took to hand back the (last) request; nil when it did not in time.
        public var generateRequestTime: Duration?
        /// How many times the delegate was asked for card data (more than once only with
        /// ``SimulatedAddPaymentPassSheet/generateRequestAttempts``).
        public var generateRequestCalls = 0
        /// Wallet rules the issuer code broke (late or missing answer, a completion handler
        /// called more than once); empty when it behaved.
        public var violations: [String]
        /// The activation deep link the network sent the issuer app (yellow path).
        public var activationLink: URL?
        /// Answers Wallet ignored without fault: the delegate's completion handler called
        /// after the cardholder had cancelled (``UserAction/cancelWhileGenerating``).
        public var ignoredAnswers: [String] = []

        /// The added pass, if any.
        public var pass: SimulatedPass? {
            if case .added(let pass) = outcome { return pass }
            return nil
        }
    }

    /// Runs the flow for `controller` (made by the issuer app with its delegate) and returns
    /// once `didFinishAdding` has been delivered. After ``UserAction/cancelWhileGenerating``
    /// it returns once the pending completion handler has been called, or Wallet's budget
    /// for it has run out.
    @MainActor
    public func present(_ controller: PKAddPaymentPassViewController, user: UserAction = .add(preferring: .phone)) async -> Result {
        let (ran, pending) = await run(controller, user: user)
        var result = ran
        let pass = result.pass?.passKitPass()
        let error: NSError? = switch result.outcome {
        case .added: nil
        case .failed(let code, let reason): NSError(domain: PKPassKitErrorDomain, code: code.rawValue, userInfo: [NSLocalizedDescriptionKey: reason])
        }
        guard let delegate = controller.delegate else {
            result.violations.append("the add sheet's delegate was released before the flow ended")
            return result
        }
        delegate.addPaymentPassViewController(controller, didFinishAdding: pass, error: error)
        if let pending {
            // Wallet has let go of the handler; a call now is ignored. Waited for here only so
            // the result can tell what the issuer did with it.
            _ = await pending.wait()
            await Task.yield()
            let calls = pending.calls
            if calls > 0 {
                result.ignoredAnswers.append("the generateRequest completion handler was called after the cardholder cancelled; Wallet ignored it")
            }
            if calls > 1 { result.violations.append("the generateRequest completion handler was called \(calls) times") }
            let sink = wallet
            pending.reportLaterCalls(after: calls) { calls in sink.recordLaterViolation("the generateRequest completion handler was called \(calls) times") }
        }
        return result
    }

    /// The flow up to `didFinishAdding`, and the delegate's completion handler when the
    /// cardholder cancelled with it still pending.
    @MainActor
    private func run(_ controller: PKAddPaymentPassViewController, user: UserAction) async -> (Result, pending: CompletionWatch<IssuerRequest>?) {
        var result = Result(outcome: .failed(code: .systemCancelled, reason: ""), violations: [])
        func fail(_ code: PKAddPaymentPassError, _ reason: String) -> (Result, pending: CompletionWatch<IssuerRequest>?) {
            result.outcome = .failed(code: code, reason: reason)
            return (result, nil)
        }
        if let reason = wallet.cannotAddPaymentPasses { return fail(.unsupported, reason) }
        let configuration = controller.passKitShimRequestConfiguration
        guard configuration.encryptionScheme == .ECC_V2 else {
            return fail(.unsupported, "encryption scheme \(configuration.encryptionScheme.rawValue) is not ECC_V2")
        }
        guard configuration.cardholderName?.isEmpty == false || configuration.primaryAccountSuffix?.isEmpty == false else {
            return fail(.unsupported, "the configuration names neither the cardholder nor the card's last digits")
        }
        // The devices the sheet offers: those without a live pass of the configured account.
        let offered = DeviceType.allCases.filter { wallet.canAdd(primaryAccountIdentifier: configuration.primaryAccountIdentifier, to: $0) }
        let preferred: DeviceType
        switch user {
        case .add(let device): preferred = device
        case .cancelWhileGenerating: preferred = .phone
        case .cancel: return fail(.userCancelled, "the user cancelled")
        }
        guard !offered.isEmpty else {
            return fail(.unsupported, "this card is already in Wallet on every device")
        }
        let device = offered.contains(preferred) ? preferred : offered[0]
        result.device = device

        let sink = wallet
        for attempt in 1...generateRequestAttempts {
            let nonce = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
            guard let nonceSignature = try? nonceKey.signature(for: nonce).derRepresentation else {
                return fail(.systemCancelled, "could not sign the nonce")
            }
            guard let delegate = controller.delegate else { return fail(.systemCancelled, "the add sheet has no delegate") }
            let watch = CompletionWatch<IssuerRequest>(budget: budget)
            let answer = watch.handler
            delegate.addPaymentPassViewController(
                controller, generateRequestWithCertificateChain: pki.walletCertificates, nonce: nonce, nonceSignature: nonceSignature,
                completionHandler: { answer(IssuerRequest($0)) }
            )
            if user == .cancelWhileGenerating {
                result.generateRequestCalls = attempt
                result.outcome = .failed(code: .userCancelled, reason: "the user cancelled while the issuer prepared the card data")
                return (result, watch)
            }
            let answered = await watch.wait()
            result.generateRequestTime = watch.elapsed
            result.generateRequestCalls = attempt
            guard let request = answered else {
                watch.reportLaterCalls(after: watch.calls) { calls in sink.recordLaterViolation("the generateRequest completion handler was called \(calls) times") }
                result.violations.append("generateRequestWithCertificateChain was not answered within \(budget)")
                return fail(.systemCancelled, "the issuer did not answer within \(budget)")
            }
            // A second call would crash a real app; give it a moment to show itself.
            await Task.yield()
            let seen = watch.calls
            if seen > 1 { result.violations.append("the generateRequest completion handler was called \(seen) times") }
            // One that comes later (the issuer's own deadline answered, then the network's late
            // answer calls it again) is recorded on the Wallet.
            watch.reportLaterCalls(after: seen) { calls in sink.recordLaterViolation("the generateRequest completion handler was called \(calls) times") }

            switch await AppleProvisioning(wallet: wallet, pki: pki, network: network).complete(
                request, nonce: nonce, nonceSignature: nonceSignature, configuredAccount: configuration.primaryAccountIdentifier,
                device: device, passName: configuration.localizedDescription ?? ""
            ) {
            case .added(let pass, let link):
                result.outcome = .added(pass)
                result.activationLink = link
                return (result, nil)
            case .failed(let reason):
                // Asked again, with a fresh nonce, while attempts are left.
                result.outcome = .failed(code: .unsupported, reason: reason)
            }
        }
        return (result, nil)
    }
}
#endif
