import ProvisioningModels
import ProvisioningSDK

/// A pass library in memory that behaves like PassKit's: `canAddSecureElementPass` is true
/// while some device (this iPhone, the Watch when one is paired) has no live pass of that
/// account.
public final class FakePassLibrary: PassLibrary, Sendable {
    private struct State {
        var passes: [WalletPass]
        var available: Bool
        var watchPaired: Bool
        var pairingKnown: Bool
        var canAddAnswer: Bool?
        var canAddQueries: [String] = []
    }

    private let state: Locked<State>

    /// A library holding `passes`. `pairingKnown` makes ``isWatchPaired()`` report
    /// `watchPaired` (as an app using WatchConnectivity would); `canAddAnswer` replaces
    /// `canAddSecureElementPass`'s computed answer (PassKit's wrong answers).
    public init(passes: [WalletPass] = [], available: Bool = true, watchPaired: Bool = true, pairingKnown: Bool = false, canAddAnswer: Bool? = nil) {
        state = Locked(State(passes: passes, available: available, watchPaired: watchPaired, pairingKnown: pairingKnown, canAddAnswer: canAddAnswer))
    }

    /// `watchPaired` when the pairing is known, else nil.
    public func isWatchPaired() async -> Bool? {
        state.current.pairingKnown ? state.current.watchPaired : nil
    }

    /// The passes now in the library.
    public var passes: [WalletPass] {
        get { state.current.passes }
        set { state.withValue { $0.passes = newValue } }
    }

    /// The accounts `canAddSecureElementPass` was asked about, in order.
    public var canAddQueries: [String] { state.current.canAddQueries }

    /// Whether the library exists (as set at creation).
    public func isPassLibraryAvailable() async -> Bool { state.current.available }

    /// The passes now in the library.
    public func secureElementPasses() async -> [WalletPass] { state.current.passes }

    /// True while this iPhone or a paired Watch has no live pass of the account.
    public func canAddSecureElementPass(primaryAccountIdentifier: String) async -> Bool {
        state.withValue { state in
            state.canAddQueries.append(primaryAccountIdentifier)
            guard state.available else { return false }
            if let answer = state.canAddAnswer { return answer }
            let devices: [DeviceType] = state.watchPaired ? [.phone, .watch] : [.phone]
            return devices.contains { device in
                !state.passes.contains { $0.device == device && $0.primaryAccountIdentifier == primaryAccountIdentifier && $0.activationState != .deactivated }
            }
        }
    }
}
