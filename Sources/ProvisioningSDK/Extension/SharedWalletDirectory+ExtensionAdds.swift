import Foundation
import ProvisioningModels

/// A card the Wallet extension sealed for a device: Wallet then went on to add it (or not).
///
/// The app reads these (``IssuerWallet``) so that a card added from Wallet is not offered
/// again in the app before TMP hears of its token: each recent one becomes an ``AddedPass``
/// without a pass, matched to the one live pass on the device that TMP does not list and that
/// carries the card's last four digits. It holds no PAN, token or pass identifier.
public struct ExtensionAdd: Sendable, Hashable, Codable {
    /// The card sealed.
    public var externalCardId: String
    /// The device it was sealed for.
    public var device: DeviceType
    /// The cardholder whose session sealed it.
    public var userId: String
    /// When TMP answered with the sealed card.
    public var at: Date

    /// Creates a record.
    public init(externalCardId: String, device: DeviceType, userId: String, at: Date) {
        self.externalCardId = externalCardId
        self.device = device
        self.userId = userId
        self.at = at
    }
}

extension SharedWalletDirectory {
    /// The most extension adds kept (the newest).
    public static let maximumExtensionAdds = 16
    /// How long an extension add is kept and read: as long as an added pass waits to show in
    /// the pass library (``AddedPass/appearanceGrace``).
    public static let extensionAddLifetime: TimeInterval = AddedPass.appearanceGrace
    private static let maximumExtensionAddBytes = 64 * 1024
    /// The longest user id an extension add holds (longer ones are not recorded).
    public static let maximumExtensionAddUserIdLength = 1024

    /// The file of recent extension adds.
    public var extensionAddsURL: URL { url.appendingPathComponent("extension-adds.json") }

    /// Adds `add` to the recent ones, keeping the newest ``maximumExtensionAdds`` younger than
    /// ``extensionAddLifetime`` at `now`; the file is replaced atomically. Call it under the
    /// folder's lock (two extension processes may record at once): from `async` code through
    /// ``withLockWithoutBlocking(waitingAtMost:isolation:_:)``, which holds no thread while it waits.
    public func recordExtensionAdd(_ add: ExtensionAdd, now: Date) throws {
        guard Self.isPlausible(add) else {
            throw SharedStorageError(.invalidName, "an extension add needs a TMP card id and a cardholder id of at most \(Self.maximumExtensionAddUserIdLength) bytes")
        }
        let kept = (readExtensionAdds(now: now) + [add]).suffix(Self.maximumExtensionAdds)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try JSONEncoder().encode(Array(kept)).write(to: extensionAddsURL, options: Self.atomicWrite)
    }

    /// The recent extension adds at `now`, oldest first: none for a missing, oversized or
    /// damaged file; a record this SDK cannot read (a newer one's), with a card id TMP would
    /// never issue, or older than ``extensionAddLifetime`` (or from the future), left out.
    public func readExtensionAdds(now: Date) -> [ExtensionAdd] {
        guard let handle = try? FileHandle(forReadingFrom: extensionAddsURL) else { return [] }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: Self.maximumExtensionAddBytes + 1), data.count <= Self.maximumExtensionAddBytes,
            let records = try? JSONDecoder().decode([Lenient].self, from: data)
        else { return [] }
        return records.compactMap(\.add).filter { add in
            let age = now.timeIntervalSince(add.at)
            return Self.isPlausible(add) && age >= 0 && age < Self.extensionAddLifetime
        }.suffix(Self.maximumExtensionAdds).map { $0 }
    }

    private static func isPlausible(_ add: ExtensionAdd) -> Bool {
        CardIdentifier.isValid(add.externalCardId) && !add.userId.isEmpty && add.userId.utf8.count <= maximumExtensionAddUserIdLength
    }

    /// One record of the file, or nil for one this SDK cannot read.
    private struct Lenient: Decodable {
        let add: ExtensionAdd?
        init(from decoder: any Decoder) throws {
            add = try? ExtensionAdd(from: decoder)
        }
    }
}
