import ProvisioningModels

/// Learns when the token service changes a token on TMP's command, so the simulated device can
/// change the activation state of the pass whose `deviceAccountIdentifier` is that token.
public protocol TokenStateObserver: Sendable {
    /// The token `tokenUniqueReference` is now `status`.
    ///
    /// Called once per change, after the token service recorded it and before the command
    /// returns to TMP; not called for a command that changed nothing. Synchronous, on the
    /// token service: notices arrive in the order of the changes (an asynchronous notice
    /// would leave the service free to make the next change, whose notice could overtake it
    /// and leave the pass in the older state). Keep it quick; start a task for slow work.
    func tokenStateDidChange(tokenUniqueReference: String, to status: TokenStatus)
}
