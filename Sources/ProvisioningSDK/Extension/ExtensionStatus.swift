/// The non-UI extension's answer to Wallet's `status`: the values of
/// `PKIssuerProvisioningExtensionStatus`.
public struct ExtensionStatus: Sendable, Hashable {
    /// No valid cardholder session: Wallet runs the authorization (UI) extension first.
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
