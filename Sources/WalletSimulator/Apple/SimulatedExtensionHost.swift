#if !canImport(PassKit)
import Crypto
import Foundation
import PassKitShim
import ProvisioningModels

/// Wallet's side of the issuer's Wallet extensions ("From Apps on Your iPhone"): it calls
/// the issuer's `PKIssuerProvisioningExtensionHandler` subclass and its authorization view
/// controller as Wallet does, enforces Apple's budgets — `status` 100 ms, `passEntries` /
/// `remotePassEntries` and `generateAddPaymentPassRequest` 20 s — measures every call, and
/// reports a late answer, a missing answer or a completion handler called twice as a
/// violation. Adding an entry then goes through Apple's servers and the network like the
/// in-app sheet.
public struct SimulatedExtensionHost: Sendable {
    /// The Wallet (device and passes) to add to.
    public let wallet: SimulatedWallet
    /// Apple's certificates and the leaf's private key.
    public let pki: SimulatedApplePKI
    /// The card network the opened card goes to.
    public let network: any SimulatedPaymentNetwork
    /// Apple's budget for `status`.
    public var statusBudget: Duration
    /// Apple's budget for `passEntries` and `remotePassEntries`.
    public var entriesBudget: Duration
    /// Apple's budget for `generateAddPaymentPassRequestForPassEntryWithIdentifier`.
    public var generateBudget: Duration
    private let nonceKey = P256.Signing.PrivateKey()

    /// Creates the host with Apple's budgets.
    public init(wallet: SimulatedWallet, pki: SimulatedApplePKI, network: any SimulatedPaymentNetwork, statusBudget: Duration = .milliseconds(100), entriesBudget: Duration = .seconds(20), generateBudget: Duration = .seconds(20)) {
        self.wallet = wallet
        self.pki = pki
        self.network = network
        self.statusBudget = statusBudget
        self.entriesBudget = entriesBudget
        self.generateBudget = generateBudget
    }

    /// One call into the extension: its answer (nil when none came within the budget), how
    /// long it took, and the rules it broke.
    public struct Call<Value: Sendable>: Sendable {
        /// The answer Wallet used; nil when it came late or not at all.
        public var value: Value?
        /// How long the first answer took; nil when none came within the budget.
        public var elapsed: Duration?
        /// Wallet rules broken in this call; empty when it behaved.
        public var violations: [String]
    }

    /// The extension's status, as Wallet reads it.
    public struct Status: Sendable, Hashable {
        /// The user must authenticate in the UI extension first.
        public var requiresAuthentication: Bool
        /// At least one card can be added to this iPhone.
        public var passEntriesAvailable: Bool
        /// At least one card can be added to the paired Apple Watch.
        public var remotePassEntriesAvailable: Bool

        /// Creates a status.
        public init(requiresAuthentication: Bool, passEntriesAvailable: Bool, remotePassEntriesAvailable: Bool) {
            self.requiresAuthentication = requiresAuthentication
            self.passEntriesAvailable = passEntriesAvailable
            self.remotePassEntriesAvailable = remotePassEntriesAvailable
        }
    }

    /// A card the extension offers, as Wallet shows it.
    public struct Entry: Sendable, Hashable {
        /// The issuer's identifier for the card (comes back in `generateAddPaymentPassRequest`).
        public var identifier: String
        /// The device the entry was offered for: `.phone` from `passEntries`, `.watch` from
        /// `remotePassEntries`. Adding the entry adds it there.
        public var device: DeviceType
        /// The title Wallet shows.
        public var title: String
        /// The art's pixel size.
        public var artWidth: Int
        /// The art's pixel size.
        public var artHeight: Int
        /// The art's encoded bytes (PNG or PDF), so a test can tell which image it is.
        public var artData: Data
        /// Whether the entry is a payment pass entry with an add-request configuration.
        public var isPaymentPassEntry: Bool
        /// The configuration's values (nil fields where the issuer set none).
        public var encryptionScheme: String?
        /// The cardholder name the configuration shows.
        public var cardholderName: String?
        /// The card's last digits the configuration shows.
        public var primaryAccountSuffix: String?
        /// The card account the entry targets, if the issuer set it.
        public var primaryAccountIdentifier: String?
        /// The description the configuration shows.
        public var localizedDescription: String?
    }

    /// Calls `status` with the 100 ms budget.
    @MainActor
    public func status(of handler: PKIssuerProvisioningExtensionHandler) async -> Call<Status> {
        await call("status", budget: statusBudget) { answer in
            handler.status { status in
                answer(Status(requiresAuthentication: status.requiresAuthentication, passEntriesAvailable: status.passEntriesAvailable, remotePassEntriesAvailable: status.remotePassEntriesAvailable))
            }
        }
    }

    /// Calls `passEntries` (iPhone) or `remotePassEntries` (Watch) with the 20 s budget.
    @MainActor
    public func entries(of handler: PKIssuerProvisioningExtensionHandler, for device: DeviceType) async -> Call<[Entry]> {
        let name = device == .phone ? "passEntries" : "remotePassEntries"
        return await call(name, budget: entriesBudget) { answer in
            let completion: ([PKIssuerProvisioningExtensionPassEntry]) -> Void = { entries in answer(Self.entries(entries, device: device)) }
            if device == .phone { handler.passEntries(completion: completion) } else { handler.remotePassEntries(completion: completion) }
        }
    }

    /// Runs the UI extension's authentication: hands the view controller Wallet's completion
    /// handler and waits (at most `patience`) for the user to finish.
    @MainActor
    public func authorize(_ provider: any PKIssuerProvisioningExtensionAuthorizationProviding, signIn: @MainActor () async -> Void, patience: Duration = .seconds(120)) async -> Call<PKIssuerProvisioningExtensionAuthorizationResult> {
        let watch = CompletionWatch<PKIssuerProvisioningExtensionAuthorizationResult>(budget: patience)
        let answer = watch.handler
        provider.completionHandler = { answer($0) }
        await signIn()
        let value = await watch.wait()
        return Call(value: value, elapsed: watch.elapsed, violations: violations("the authorization completionHandler", watch: watch, answered: value != nil, budget: patience))
    }

    /// The user picks `entry` on the device it was offered for (``Entry/device``): Wallet
    /// checks its configuration, asks the handler for the card data (20 s), and Apple's
    /// servers and the network do the rest.
    @MainActor
    public func add(_ entry: Entry, handler: PKIssuerProvisioningExtensionHandler) async -> (call: Call<SimulatedPass>, failure: String?) {
        let device = entry.device
        func failed(_ reason: String, violations: [String] = [], elapsed: Duration? = nil) -> (call: Call<SimulatedPass>, failure: String?) {
            (Call(value: nil, elapsed: elapsed, violations: violations), reason)
        }
        guard entry.isPaymentPassEntry, entry.encryptionScheme == "ECC_V2" else {
            return failed("the entry's configuration is not ECC_V2")
        }
        guard entry.cardholderName?.isEmpty == false || entry.primaryAccountSuffix?.isEmpty == false else {
            return failed("the entry's configuration names neither the cardholder nor the card's last digits")
        }
        guard wallet.canAdd(primaryAccountIdentifier: entry.primaryAccountIdentifier, to: device) else {
            return failed("the entry is for a card already on the \(device == .watch ? "Apple Watch" : "iPhone")")
        }
        guard let configuration = PKAddPaymentPassRequestConfiguration(encryptionScheme: .ECC_V2) else { return failed("no configuration") }
        configuration.cardholderName = entry.cardholderName
        configuration.primaryAccountSuffix = entry.primaryAccountSuffix
        configuration.primaryAccountIdentifier = entry.primaryAccountIdentifier
        configuration.localizedDescription = entry.localizedDescription
        let nonce = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        guard let nonceSignature = try? nonceKey.signature(for: nonce).derRepresentation else { return failed("could not sign the nonce") }
        let certificates = pki.walletCertificates
        let generated = await call("generateAddPaymentPassRequest", budget: generateBudget) { (answer: @escaping @Sendable (IssuerRequest?) -> Void) in
            handler.generateAddPaymentPassRequestForPassEntryWithIdentifier(
                entry.identifier, configuration: configuration, certificateChain: certificates, nonce: nonce, nonceSignature: nonceSignature
            ) { request in answer(request.map(IssuerRequest.init)) }
        }
        guard let answered = generated.value else {
            return failed("the extension did not answer within \(generateBudget)", violations: generated.violations)
        }
        guard let request = answered else {
            return failed("the extension answered without a request", violations: generated.violations, elapsed: generated.elapsed)
        }
        let provisioning = AppleProvisioning(wallet: wallet, pki: pki, network: network)
        switch await provisioning.complete(request, nonce: nonce, nonceSignature: nonceSignature, configuredAccount: entry.primaryAccountIdentifier, device: device, passName: entry.localizedDescription ?? entry.title) {
        case .added(let pass, _):
            return (Call(value: pass, elapsed: generated.elapsed, violations: generated.violations), nil)
        case .failed(let reason):
            return failed(reason, violations: generated.violations, elapsed: generated.elapsed)
        }
    }

    // MARK: Internals

    @MainActor
    private func call<Value: Sendable>(_ name: String, budget: Duration, _ invoke: (@escaping @Sendable (Value) -> Void) -> Void) async -> Call<Value> {
        let watch = CompletionWatch<Value>(budget: budget)
        invoke(watch.handler)
        let value = await watch.wait()
        // A second answer right behind the first would crash a real extension; let it show.
        await Task.yield()
        return Call(value: value, elapsed: watch.elapsed, violations: violations("\(name)'s completion handler", watch: watch, answered: value != nil, budget: budget))
    }

    /// The call's violations so far; a handler called again later is recorded on the Wallet
    /// (``SimulatedWallet/laterViolations``).
    private func violations<Value>(_ what: String, watch: CompletionWatch<Value>, answered: Bool, budget: Duration) -> [String] {
        var violations: [String] = []
        let seen = watch.calls
        if !answered { violations.append("\(what) was not called within \(budget)") }
        if seen > 1 { violations.append("\(what) was called \(seen) times") }
        let wallet = wallet
        watch.reportLaterCalls(after: seen) { calls in wallet.recordLaterViolation("\(what) was called \(calls) times") }
        return violations
    }

    /// Wallet's view of the entries one list offered for `device`. Nonisolated: the
    /// extension answers from any thread.
    private static func entries(_ entries: [PKIssuerProvisioningExtensionPassEntry], device: DeviceType) -> [Entry] {
        entries.map { entry($0, device: device) }
    }

    private static func entry(_ entry: PKIssuerProvisioningExtensionPassEntry, device: DeviceType) -> Entry {
        let configuration = (entry as? PKIssuerProvisioningExtensionPaymentPassEntry)?.addRequestConfiguration
        return Entry(
            identifier: entry.identifier, device: device, title: entry.title, artWidth: entry.art.width, artHeight: entry.art.height, artData: entry.art.passKitShimData,
            isPaymentPassEntry: configuration != nil, encryptionScheme: configuration?.encryptionScheme.rawValue,
            cardholderName: configuration?.cardholderName, primaryAccountSuffix: configuration?.primaryAccountSuffix,
            primaryAccountIdentifier: configuration?.primaryAccountIdentifier, localizedDescription: configuration?.localizedDescription
        )
    }
}
#endif
