#if !canImport(PassKit)
import Crypto
import Foundation
import PassKitShim
import ProvisioningModels
import Synchronization

/// A secure-element pass in the simulated Wallet, on the iPhone or on the paired Apple Watch.
public struct SimulatedPass: Sendable, Hashable {
    /// Where a pass stands, as PassKit reports it.
    public enum ActivationState: String, Sendable, Hashable, CaseIterable {
        /// Ready for payments.
        case activated
        /// Waits for the issuer's in-app activation (yellow path).
        case requiresActivation
        /// Temporarily unusable.
        case suspended
        /// Removed for good (its token is deactivated).
        case deactivated

        /// The PassKit value.
        var passKit: PKSecureElementPass.PassActivationState {
            switch self {
            case .activated: .activated
            case .requiresActivation: .requiresActivation
            case .suspended: .suspended
            case .deactivated: .deactivated
            }
        }

        /// The state a pass takes when the network reports its token in `status`.
        init(_ status: TokenStatus) {
            switch status {
            case .active: self = .activated
            case .inactive: self = .requiresActivation
            case .suspended: self = .suspended
            case .deactivated: self = .deactivated
            }
        }
    }

    /// The pass's serial number (activation deep links carry it).
    public var serialNumber: String
    /// The network token reference (TMP's `tokenUniqueReference`).
    public var deviceAccountIdentifier: String
    /// The card account's identifier, the same on every device for one card.
    public var primaryAccountIdentifier: String
    /// The last four digits of the card's PAN.
    public var primaryAccountNumberSuffix: String
    /// The last four digits of the token.
    public var deviceAccountNumberSuffix: String
    /// The activation state.
    public var activationState: ActivationState
    /// The device the pass lives on.
    public var device: DeviceType
    /// The product name shown in Wallet.
    public var localizedName: String

    /// Creates a pass.
    public init(serialNumber: String, deviceAccountIdentifier: String, primaryAccountIdentifier: String, primaryAccountNumberSuffix: String, deviceAccountNumberSuffix: String, activationState: ActivationState, device: DeviceType, localizedName: String = "") {
        self.serialNumber = serialNumber
        self.deviceAccountIdentifier = deviceAccountIdentifier
        self.primaryAccountIdentifier = primaryAccountIdentifier
        self.primaryAccountNumberSuffix = primaryAccountNumberSuffix
        self.deviceAccountNumberSuffix = deviceAccountNumberSuffix
        self.activationState = activationState
        self.device = device
        self.localizedName = localizedName
    }

    /// The pass as PassKit hands it to the issuer's app.
    func passKitPass() -> PKPaymentPass {
        PKPaymentPass(
            passKitShimValues: PKPass.Values(
                passType: .secureElement, serialNumber: serialNumber, passTypeIdentifier: "paymentpass.com.apple",
                localizedName: localizedName, organizationName: "Issuer", isRemotePass: device == .watch,
                deviceName: device == .watch ? "Apple Watch" : "iPhone"
            ),
            account: PKSecureElementPass.Account(
                primaryAccountIdentifier: primaryAccountIdentifier, primaryAccountNumberSuffix: primaryAccountNumberSuffix,
                deviceAccountIdentifier: deviceAccountIdentifier, deviceAccountNumberSuffix: deviceAccountNumberSuffix,
                passActivationState: activationState.passKit
            )
        )
    }
}

/// Apple Wallet on a simulated iPhone with an optional paired Apple Watch: their pass
/// libraries, what the device allows, and the card accounts Apple knows.
///
/// It stands behind the PassKit shim (`PassKitShimBackend`), so the issuer app's real
/// ProvisioningPassKit code reads these passes through `PKPassLibrary` exactly as it would on
/// a phone. Install it with ``install()`` or, per task, with ``withInstalled(_:)``.
public final class SimulatedWallet: Sendable {
    /// What the simulated device is and allows.
    public struct Configuration: Sendable, Hashable {
        /// Whether an Apple Watch is paired.
        public var hasPairedWatch: Bool
        /// Whether the device has a pass library (`PKPassLibrary.isPassLibraryAvailable()`).
        public var passLibraryAvailable: Bool
        /// Whether the issuer app carries the `com.apple.developer.payment-pass-provisioning`
        /// entitlement (without it `PKAddPaymentPassViewController` cannot be created).
        public var hasProvisioningEntitlement: Bool
        /// PassKit's known false answer: `canAddSecureElementPass(primaryAccountIdentifier:)`
        /// says false once the iPhone holds the card, though a paired Watch still lacks it
        /// (reference/apple-requirements.md). Off by default; an app must cope with it when on.
        public var canAddAnswersFalseWhileTheWatchLacksTheCard: Bool
        /// A device like the iPads that cannot add payment cards: it has a pass library,
        /// `PKAddPaymentPassViewController.canAddPaymentPass()` is true and the sheet can be
        /// made, but every add ends `unsupported` before the issuer is asked for card data
        /// (the add sheet's and the extension host's alike). Off by default.
        public var canAddPaymentPassAnswersTrueThoughNothingCanBeAdded: Bool

        /// An iPhone, by default with a paired Watch, a pass library and the entitlement, and
        /// PassKit answering `canAddSecureElementPass` and `canAddPaymentPass` truthfully.
        public init(hasPairedWatch: Bool = true, passLibraryAvailable: Bool = true, hasProvisioningEntitlement: Bool = true, canAddAnswersFalseWhileTheWatchLacksTheCard: Bool = false, canAddPaymentPassAnswersTrueThoughNothingCanBeAdded: Bool = false) {
            self.hasPairedWatch = hasPairedWatch
            self.passLibraryAvailable = passLibraryAvailable
            self.hasProvisioningEntitlement = hasProvisioningEntitlement
            self.canAddAnswersFalseWhileTheWatchLacksTheCard = canAddAnswersFalseWhileTheWatchLacksTheCard
            self.canAddPaymentPassAnswersTrueThoughNothingCanBeAdded = canAddPaymentPassAnswersTrueThoughNothingCanBeAdded
        }
    }

    private struct State {
        var configuration: Configuration
        var passes: [SimulatedPass] = []
        /// Apple's card-account identifiers, by a hash of the card number (never the number).
        var accountIdentifiers: [Data: String] = [:]
        var openedLinks: [URL] = []
        /// Card accounts being added right now, per device: one add at a time per slot.
        var adding: Set<String> = []
        /// State changes the network reported for tokens whose pass is not on the device yet
        /// (a change made while the pass was being added), oldest first; the pass takes the
        /// latest when it arrives, as Apple's servers hand a new pass the token's current state.
        var earlyStates: [(deviceAccountIdentifier: String, state: SimulatedPass.ActivationState)] = []
        var laterViolations: [String] = []
    }

    /// How many early state changes a Wallet remembers (those of other devices' tokens too,
    /// since the network tells every observer): the oldest go first.
    static let earlyStateCapacity = 4_096

    private let state: Mutex<State>

    /// Creates an empty Wallet.
    public init(configuration: Configuration = Configuration()) {
        state = Mutex(State(configuration: configuration))
    }

    /// What the device is and allows.
    public var configuration: Configuration {
        get { state.withLock { $0.configuration } }
    }

    /// Changes what the device is and allows (pairing a Watch, removing the entitlement…).
    public func setConfiguration(_ configuration: Configuration) {
        state.withLock { $0.configuration = configuration }
    }

    /// Every pass on both devices, in the order they were added.
    public var allPasses: [SimulatedPass] { state.withLock { $0.passes } }

    /// The passes on one device.
    public func passes(on device: DeviceType) -> [SimulatedPass] {
        state.withLock { $0.passes.filter { $0.device == device } }
    }

    /// The pass with this serial number, on either device.
    public func pass(serialNumber: String) -> SimulatedPass? {
        state.withLock { $0.passes.first { $0.serialNumber == serialNumber } }
    }

    /// The pass of this token, on either device.
    public func pass(deviceAccountIdentifier: String) -> SimulatedPass? {
        state.withLock { $0.passes.first { $0.deviceAccountIdentifier == deviceAccountIdentifier } }
    }

    /// Whether an Apple Watch is paired with the iPhone.
    public var hasPairedWatch: Bool { state.withLock { $0.configuration.hasPairedWatch } }

    /// Whether `device` can take a pass for the card account `primaryAccountIdentifier`: it
    /// exists and holds no live (not deactivated) pass of that account.
    public func canAdd(primaryAccountIdentifier: String?, to device: DeviceType) -> Bool {
        state.withLock { Self.canAdd(primaryAccountIdentifier, to: device, in: $0) }
    }

    private static func canAdd(_ primaryAccountIdentifier: String?, to device: DeviceType, in state: State) -> Bool {
        guard device == .phone || state.configuration.hasPairedWatch else { return false }
        guard let primaryAccountIdentifier else { return true }
        return !state.passes.contains {
            $0.device == device && $0.primaryAccountIdentifier == primaryAccountIdentifier && $0.activationState != .deactivated
        }
    }

    /// Apple's identifier for the card account of `pan`: the same for every device and every
    /// later add of that card, made on first sight.
    func primaryAccountIdentifier(forCardNumber digits: String) -> String {
        let key = Data(SHA256.hash(data: Data(digits.utf8)))
        return state.withLock { state in
            if let known = state.accountIdentifiers[key] { return known }
            let made = "PAI" + Self.randomHex(12)
            state.accountIdentifiers[key] = made
            return made
        }
    }

    /// Puts a pass into the device's library.
    /// Wallet's rules broken after the call that broke them had returned its result: a
    /// completion handler Wallet handed to issuer code (the add sheet's `generateRequest`,
    /// an extension's) called again later, which would crash a real app. Empty when none was.
    public var laterViolations: [String] { state.withLock { $0.laterViolations } }

    /// Records a rule broken after its call had returned.
    func recordLaterViolation(_ violation: String) {
        state.withLock { $0.laterViolations.append(violation) }
    }

    /// Reserves the slot of card account `primaryAccountIdentifier` on `device` for one add:
    /// false when another add of it is under way (or the device cannot take the card), so two adds at once (a double tap, the sheet and an
    /// extension together) cannot both put the card on the device. The add ends with
    /// ``add(_:)`` or ``endAdding(primaryAccountIdentifier:to:)``.
    func beginAdding(primaryAccountIdentifier: String, to device: DeviceType) -> Bool {
        // One look under one lock: an add ending between a check and a reservation would
        // otherwise let a second add of the card through.
        state.withLock { state in
            guard Self.canAdd(primaryAccountIdentifier, to: device, in: state) else { return false }
            return state.adding.insert(Self.slot(primaryAccountIdentifier, device)).inserted
        }
    }

    /// Frees a slot ``beginAdding(primaryAccountIdentifier:to:)`` reserved, for an add that failed.
    func endAdding(primaryAccountIdentifier: String, to device: DeviceType) {
        _ = state.withLock { $0.adding.remove(Self.slot(primaryAccountIdentifier, device)) }
    }

    private static func slot(_ account: String, _ device: DeviceType) -> String { "\(device.rawValue):\(account)" }

    /// Puts `pass` on its device, in the latest state the network reported for its token if
    /// one came before the pass, and frees its account's slot. Returns the pass as added.
    func add(_ pass: SimulatedPass) -> SimulatedPass {
        state.withLock { state in
            var pass = pass
            if let early = state.earlyStates.last(where: { $0.deviceAccountIdentifier == pass.deviceAccountIdentifier }) {
                pass.activationState = early.state
                state.earlyStates.removeAll { $0.deviceAccountIdentifier == pass.deviceAccountIdentifier }
            }
            state.passes.append(pass)
            state.adding.remove(Self.slot(pass.primaryAccountIdentifier, pass.device))
            return pass
        }
    }

    /// The cardholder removes the pass with this serial number from Wallet ("Remove Card"):
    /// it leaves the device's library at once. Returns the pass removed, nil when there is
    /// none. The network hears of it through ``TokenServiceSimulator/change(_:tokenUniqueReference:)``
    /// with ``NetworkTokenChange/passRemoved`` (``TokenServicePaymentNetwork/removePass(serialNumber:from:)``
    /// does both).
    @discardableResult
    public func removePass(serialNumber: String) -> SimulatedPass? {
        state.withLock { state in
            guard let index = state.passes.firstIndex(where: { $0.serialNumber == serialNumber }) else { return nil }
            return state.passes.remove(at: index)
        }
    }

    /// Sets the activation state of the pass of token `deviceAccountIdentifier`; false when
    /// no pass has that token yet. Such a change is remembered, and a pass of that token added
    /// later takes it (a token the network changed while its pass was being added).
    @discardableResult
    public func setActivationState(_ activationState: SimulatedPass.ActivationState, deviceAccountIdentifier: String) -> Bool {
        state.withLock { state in
            guard let index = state.passes.firstIndex(where: { $0.deviceAccountIdentifier == deviceAccountIdentifier }) else {
                state.earlyStates.append((deviceAccountIdentifier, activationState))
                if state.earlyStates.count > Self.earlyStateCapacity { state.earlyStates.removeFirst(state.earlyStates.count - Self.earlyStateCapacity) }
                return false
            }
            state.passes[index].activationState = activationState
            return true
        }
    }

    /// Why nothing can be added on this device; nil when payment cards can be.
    var cannotAddPaymentPasses: String? {
        configuration.canAddPaymentPassAnswersTrueThoughNothingCanBeAdded ? "this device cannot add payment cards to Wallet" : nil
    }

    /// Records that the system opened `url` for the issuer's app (an activation deep link).
    func open(_ url: URL) {
        state.withLock { $0.openedLinks.append(url) }
    }

    /// The links the system opened for the issuer's app, oldest first.
    public var openedLinks: [URL] { state.withLock { $0.openedLinks } }

    /// Makes this Wallet the one behind PassKit for the whole process.
    public func install() {
        PassKitShim.install(self)
    }

    /// Runs `operation` with this Wallet behind PassKit for the current task and its children.
    public func withInstalled<T>(isolation: isolated (any Actor)? = #isolation, _ operation: () async throws -> T) async rethrows -> T {
        try await PassKitShim.withBackend(self, isolation: isolation, operation: operation)
    }

    /// Runs `operation` with this Wallet behind PassKit, synchronously.
    public func withInstalled<T>(_ operation: () throws -> T) rethrows -> T {
        try PassKitShim.$scopedBackend.withValue(self, operation: operation)
    }

    static func randomHex(_ bytes: Int) -> String {
        (0..<bytes).map { _ in String(format: "%02X", UInt8.random(in: 0...255)) }.joined()
    }
}

extension SimulatedWallet: PassKitShimBackend {
    package func isPassLibraryAvailable() -> Bool { configuration.passLibraryAvailable }

    package func passes() -> [PKPass] {
        guard configuration.passLibraryAvailable else { return [] }
        return passes(on: .phone).map { $0.passKitPass() }
    }

    package func remoteSecureElementPasses() -> [PKSecureElementPass] {
        guard configuration.passLibraryAvailable, configuration.hasPairedWatch else { return [] }
        return passes(on: .watch).map { $0.passKitPass() }
    }

    package func canAddSecureElementPass(primaryAccountIdentifier: String) -> Bool {
        let configuration = configuration
        guard configuration.passLibraryAvailable else { return false }
        let onPhone = canAdd(primaryAccountIdentifier: primaryAccountIdentifier, to: .phone)
        if configuration.canAddAnswersFalseWhileTheWatchLacksTheCard, !onPhone { return false }
        return onPhone || canAdd(primaryAccountIdentifier: primaryAccountIdentifier, to: .watch)
    }

    package func isSecureElementPassActivationAvailable() -> Bool { configuration.passLibraryAvailable }

    // True on a device that cannot add (canAddPaymentPassAnswersTrueThoughNothingCanBeAdded), as PassKit is.
    package func canAddPaymentPass() -> Bool { configuration.passLibraryAvailable }

    package func allowsAddPaymentPassViewController(configuration: PKAddPaymentPassRequestConfiguration) -> Bool {
        self.configuration.hasProvisioningEntitlement && self.configuration.passLibraryAvailable
    }
}
#endif
