import ProvisioningModels

/// The identifier of a pass entry the non-UI extension offers, which Wallet hands back to
/// `generateAddPaymentPassRequestForPassEntryWithIdentifier`: the card id, and for an Apple
/// Watch entry the device as well.
///
/// - iPhone entries (`passEntries`): the card id itself, e.g. `card-1`.
/// - Apple Watch entries (`remotePassEntries`): the card id and `:WATCH`, e.g. `card-1:WATCH`.
///
/// Wallet gives the request no other sign of the device it is for, and the extension process
/// may be a new one by then, so the device travels in the identifier rather than in memory.
/// TMP card ids never contain `:`, so the two forms cannot be confused.
public struct ExtensionEntryIdentifier: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    /// The card.
    public var externalCardId: String
    /// The device the entry adds the card to.
    public var device: DeviceType

    private static let watchSuffix = ":" + DeviceType.watch.rawValue

    /// The identifier of the entry for `externalCardId` on `device`.
    public init(externalCardId: String, device: DeviceType) {
        self.externalCardId = externalCardId
        self.device = device
    }

    /// Reads an identifier; nil unless it holds a valid TMP card id (and, after a `:`, `WATCH`).
    public init?(rawValue: String) {
        let id: String
        let device: DeviceType
        if rawValue.hasSuffix(Self.watchSuffix) {
            id = String(rawValue.dropLast(Self.watchSuffix.count))
            device = .watch
        } else {
            id = rawValue
            device = .phone
        }
        guard CardIdentifier.isValid(id) else { return nil }
        self.init(externalCardId: id, device: device)
    }

    /// The identifier as Wallet sees it.
    public var rawValue: String {
        device == .watch ? externalCardId + Self.watchSuffix : externalCardId
    }

    /// The raw value.
    public var description: String { rawValue }
}
