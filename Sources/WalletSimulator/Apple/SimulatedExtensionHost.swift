#if !canImport(PassKit)
import Crypto
import Foundation
import PassKitShim
import ProvisioningModels
import Synchronization

/// Wallet's side of the issuer's Wallet extensions ("From Apps on Your iPhone"): it calls
/// the issuer's `PKIssuerProvisioningExtensionHandler` subclass and its authorization view
/// controller as Wallet does, enforces Apple's budgets — `status` 100 ms, `passEntries` /
/// `remotePassEntries` and `generateAddPaymentPassRequest` 20 s — measures every call, and
/// reports a late answer, a missing answer or a completion handler called twice as a
/// violation. Adding an entry then goes through Apple's servers and the network like the
/// in-app sheet.
///
/// It keeps Wallet's order per handler: `passEntries` / `remotePassEntries` only after a
/// `status` that answered within its budget and said cards can be added to that device, and,
/// when that status required authentication, after an authorization that succeeded since (or
/// a later status that no longer requires it); `generateAddPaymentPassRequest` only for an
/// entry the handler's last list for that device offered, while that still holds. A call out
/// of that order comes back with no value and a violation naming what Wallet would not do, and
/// the handler is not called. Copies of a host share what it has seen.
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
    private let flows = ExtensionFlows()

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
        /// The payment network the configuration names (`PKPaymentNetwork`'s raw value).
        public var paymentNetwork: String?
        /// The card account the entry targets, if the issuer set it.
        public var primaryAccountIdentifier: String?
        /// The description the configuration shows.
        public var localizedDescription: String?
    }

    /// Calls `status` with the 100 ms budget. Its answer, or its absence, is what Wallet's
    /// next calls to `handler` go by.
    @MainActor
    public func status(of handler: PKIssuerProvisioningExtensionHandler) async -> Call<Status> {
        let status = await call("status", budget: statusBudget) { answer in
            handler.status { status in
                answer(Status(requiresAuthentication: status.requiresAuthentication, passEntriesAvailable: status.passEntriesAvailable, remotePassEntriesAvailable: status.remotePassEntriesAvailable))
            }
        }
        flows.recordStatus(status.value, of: handler)
        return status
    }

    /// Calls `passEntries` (iPhone) or `remotePassEntries` (Watch) with the 20 s budget.
    ///
    /// Each entry must carry what Apple requires — a title, card art of 1536 × 969 pixels, and
    /// a payment configuration with the cardholder name, the card's last digits and the
    /// payment network — and must not offer a card already on that device (a live pass of its
    /// `primaryAccountIdentifier`, or without one, of its last digits). Every entry that
    /// falls short is a violation of the call, and so is an empty list after a `status` that
    /// said entries were available ("at least one"); the entries are returned as answered.
    ///
    /// Wallet asks only after a `status` that allows it (see the type's description); asked
    /// out of that order, the handler is not called and the call comes back with no value and
    /// the violation.
    @MainActor
    public func entries(of handler: PKIssuerProvisioningExtensionHandler, for device: DeviceType) async -> Call<[Entry]> {
        let name = Self.entriesCall(device)
        if device == .watch, !wallet.hasPairedWatch {
            return Call(value: nil, elapsed: nil, violations: ["Wallet does not ask \(name): no Apple Watch is paired"])
        }
        if let refusal = flows.refusal(for: handler, device: device) {
            return Call(value: nil, elapsed: nil, violations: ["Wallet does not ask \(name): \(refusal)"])
        }
        let entries = await call(name, budget: entriesBudget) { answer in
            let completion: ([PKIssuerProvisioningExtensionPassEntry]) -> Void = { entries in answer(Self.entries(entries, device: device)) }
            if device == .phone { handler.passEntries(completion: completion) } else { handler.remotePassEntries(completion: completion) }
        }
        flows.recordOffer(entries.value ?? [], of: handler, device: device)
        guard let offered = entries.value else { return entries }
        var checked = entries
        if offered.isEmpty {
            // `passEntriesAvailable` promises at least one (PassKit's header): Wallet would show
            // the issuer with nothing to add.
            checked.violations.append("status said cards can be added to the \(device == .watch ? "Apple Watch" : "iPhone"), but \(name) offered none")
        }
        checked.violations += offered.flatMap { shortcomings(of: $0) }
        return checked
    }

    /// Apple's size for card art, in pixels.
    static let artSize = (width: 1536, height: 969)

    /// What `entry` lacks or gets wrong by Apple's rules for a pass entry.
    private func shortcomings(of entry: Entry) -> [String] {
        let name = "the entry \(entry.identifier)"
        var found: [String] = []
        func missing(_ value: String?) -> Bool { value?.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty != false }
        if missing(entry.title) { found.append("\(name) has no title") }
        if (entry.artWidth, entry.artHeight) != Self.artSize {
            found.append("\(name) has art of \(entry.artWidth)×\(entry.artHeight) pixels, not \(Self.artSize.width)×\(Self.artSize.height)")
        }
        guard entry.isPaymentPassEntry else { return found + ["\(name) is not a payment pass entry"] }
        if missing(entry.cardholderName) { found.append("\(name) has no cardholder name") }
        if missing(entry.primaryAccountSuffix) { found.append("\(name) has no last digits of the card (primaryAccountSuffix)") }
        if missing(entry.paymentNetwork) { found.append("\(name) names no payment network") }
        let live = wallet.passes(on: entry.device).filter { $0.activationState != .deactivated }
        // Judged by the card account only: without one, a pass with the same last digits may
        // be another card of the issuer's (two cards ending alike), which the entry rightly offers.
        let onDevice: Bool
        if let account = entry.primaryAccountIdentifier, !account.isEmpty {
            onDevice = live.contains { $0.primaryAccountIdentifier == account }
        } else {
            onDevice = false
        }
        if onDevice { found.append("\(name) offers a card already on the \(entry.device == .watch ? "Apple Watch" : "iPhone")") }
        return found
    }

    /// Runs the UI extension's authentication: hands the view controller Wallet's completion
    /// handler and waits (at most `patience`) for the user to finish.
    ///
    /// The UI extension is the issuer's, not one handler's: an `.authorized` answer lets
    /// every handler whose last `status` required authentication go on to its entries.
    @MainActor
    public func authorize(_ provider: any PKIssuerProvisioningExtensionAuthorizationProviding, signIn: @MainActor () async -> Void, patience: Duration = .seconds(120)) async -> Call<PKIssuerProvisioningExtensionAuthorizationResult> {
        let watch = CompletionWatch<PKIssuerProvisioningExtensionAuthorizationResult>(budget: patience)
        let answer = watch.handler
        provider.completionHandler = { answer($0) }
        await signIn()
        let value = await watch.wait()
        if value == .authorized { flows.recordAuthorization() }
        return Call(value: value, elapsed: watch.elapsed, violations: violations("the authorization completionHandler", watch: watch, answered: value != nil, budget: patience))
    }

    /// The user picks `entry` on the device it was offered for (``Entry/device``): Wallet
    /// checks its configuration, asks the handler for the card data (20 s), and Apple's
    /// servers and the network do the rest.
    ///
    /// Wallet asks only for an entry the handler's last list for that device offered (the
    /// same values), while its `status` still allows that list; otherwise the handler is not
    /// called, and the violation is also the failure.
    @MainActor
    public func add(_ entry: Entry, handler: PKIssuerProvisioningExtensionHandler) async -> (call: Call<SimulatedPass>, failure: String?) {
        let device = entry.device
        func failed(_ reason: String, violations: [String] = [], elapsed: Duration? = nil) -> (call: Call<SimulatedPass>, failure: String?) {
            (Call(value: nil, elapsed: elapsed, violations: violations), reason)
        }
        if let refusal = flows.refusal(for: handler, device: device) ?? flows.refusal(toAdd: entry, by: handler) {
            let violation = "Wallet does not ask generateAddPaymentPassRequest: \(refusal)"
            return failed(violation, violations: [violation])
        }
        if entry.device == .watch, !wallet.hasPairedWatch {
            let violation = "Wallet does not ask generateAddPaymentPassRequest: no Apple Watch is paired"
            return failed(violation, violations: [violation])
        }
        if let reason = wallet.cannotAddPaymentPasses { return failed(reason) }
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

    /// The handler method that lists the entries for `device`.
    fileprivate static func entriesCall(_ device: DeviceType) -> String {
        device == .phone ? "passEntries" : "remotePassEntries"
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
            cardholderName: configuration?.cardholderName, primaryAccountSuffix: configuration?.primaryAccountSuffix, paymentNetwork: configuration?.paymentNetwork?.rawValue,
            primaryAccountIdentifier: configuration?.primaryAccountIdentifier, localizedDescription: configuration?.localizedDescription
        )
    }
}

/// What Wallet has seen of each handler's flow, so the host calls a handler only in Wallet's
/// order: its last `status`, the entries it last offered per device, and the issuer's last
/// successful authorization. Events are numbered in the order they happened.
private final class ExtensionFlows: Sendable {
    /// A handler, by identity only.
    private struct Handler: @unchecked Sendable {
        // @unchecked: the reference is only compared (===), never used, so the handler's own
        // state is not shared across threads through it.
        weak var object: PKIssuerProvisioningExtensionHandler?
        let id: ObjectIdentifier

        init(_ handler: PKIssuerProvisioningExtensionHandler) {
            object = handler
            id = ObjectIdentifier(handler)
        }
    }

    private struct Flow {
        /// The handler, to tell it from a later one at the same address.
        var handler: Handler
        /// The last status answered within its budget, and its number; nil when the last
        /// status came late or not at all.
        var status: (value: SimulatedExtensionHost.Status, event: Int)?
        /// The entries the last list for each device offered.
        var offered: [DeviceType: [SimulatedExtensionHost.Entry]] = [:]
    }

    private struct State {
        var events = 0
        /// The number of the last authorization that succeeded.
        var authorized: Int?
        var flows: [ObjectIdentifier: Flow] = [:]

        /// The flow of `handler`, a fresh one if none is known (or another handler's at the
        /// same address, which has since gone).
        func flow(of handler: Handler) -> Flow {
            if let flow = flows[handler.id], flow.handler.object != nil, flow.handler.object === handler.object { return flow }
            return Flow(handler: handler)
        }
    }

    private let state = Mutex(State())

    func recordStatus(_ status: SimulatedExtensionHost.Status?, of handler: PKIssuerProvisioningExtensionHandler) {
        let handler = Handler(handler)
        state.withLock { state in
            state.events += 1
            var flow = state.flow(of: handler)
            flow.status = status.map { ($0, state.events) }
            state.flows[handler.id] = flow
        }
    }

    func recordAuthorization() {
        state.withLock { state in
            state.events += 1
            state.authorized = state.events
        }
    }

    func recordOffer(_ entries: [SimulatedExtensionHost.Entry], of handler: PKIssuerProvisioningExtensionHandler, device: DeviceType) {
        let handler = Handler(handler)
        state.withLock { state in
            var flow = state.flow(of: handler)
            flow.offered[device] = entries
            state.flows[handler.id] = flow
        }
    }

    /// Why Wallet would not ask `handler` for `device`'s entries now; nil when it would.
    func refusal(for handler: PKIssuerProvisioningExtensionHandler, device: DeviceType) -> String? {
        let handler = Handler(handler)
        return state.withLock { state in
            guard let status = state.flow(of: handler).status else {
                return "status has not answered within its budget"
            }
            let available = device == .phone ? status.value.passEntriesAvailable : status.value.remotePassEntriesAvailable
            guard available else {
                return "status said no cards can be added to the \(device == .watch ? "Apple Watch" : "iPhone")"
            }
            if status.value.requiresAuthentication, (state.authorized ?? 0) < status.event {
                return "status said the cardholder must authenticate, and no authorization has succeeded since"
            }
            return nil
        }
    }

    /// Why Wallet would not ask `handler` for the card data of `entry`; nil when its last
    /// list for the entry's device offered it.
    func refusal(toAdd entry: SimulatedExtensionHost.Entry, by handler: PKIssuerProvisioningExtensionHandler) -> String? {
        let handler = Handler(handler)
        return state.withLock { state in
            guard state.flow(of: handler).offered[entry.device]?.contains(entry) == true else {
                return "the extension's last \(SimulatedExtensionHost.entriesCall(entry.device)) answer did not offer this entry (\(entry.identifier))"
            }
            return nil
        }
    }
}
#endif
