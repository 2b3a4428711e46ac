/// The device's Wallet pass library, as the SDK sees it: the seam between the SDK and PassKit.
///
/// ProvisioningPassKit implements it over `PKPassLibrary`; tests and previews substitute
/// their own. Calls are `async` so an implementation may hop to the main actor.
public protocol PassLibrary: Sendable {
    /// Whether this device has a Wallet pass library at all (`PKPassLibrary.isPassLibraryAvailable()`).
    func isPassLibraryAvailable() async -> Bool

    /// The secure-element passes on this iPhone (``WalletPass/device`` `.phone`) and on the
    /// paired Apple Watch (`.watch`, PassKit's `remoteSecureElementPasses`).
    func secureElementPasses() async -> [WalletPass]

    /// Whether a pass for this card account can still be added to this iPhone or a paired
    /// device (`PKPassLibrary.canAddSecureElementPass(primaryAccountIdentifier:)`).
    func canAddSecureElementPass(primaryAccountIdentifier: String) async -> Bool

    /// Whether an Apple Watch is paired with this iPhone, when the app knows it; nil when it
    /// does not (the default).
    ///
    /// PassKit has no such query, and `canAddSecureElementPass` has been seen answering false
    /// while a paired Watch still lacked the card. Known, the pairing decides whether the
    /// Watch is offered a card already on the iPhone (``WalletStatusCalculator``).
    func isWatchPaired() async -> Bool?
}

extension PassLibrary {
    /// Unknown: the Watch is offered as `canAddSecureElementPass` says.
    public func isWatchPaired() async -> Bool? { nil }
}
