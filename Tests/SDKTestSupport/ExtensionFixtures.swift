import Foundation
import ProvisioningModels
import ProvisioningSDK

/// A fresh folder under the temporary directory, for one test.
public struct TemporaryDirectory: Sendable {
    /// The folder.
    public let url: URL

    /// Creates the folder.
    public init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-test-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// Removes the folder and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// A wall clock the test sets.
public final class FixedDate: Sendable {
    private let value: Locked<Date>

    /// A clock showing `date` (2026-09-21 by default).
    public init(_ date: Date = Date(timeIntervalSince1970: 1_790_000_000)) {
        value = Locked(date)
    }

    /// The time shown.
    public var now: Date { value.current }
    /// The clock as the SDK takes it.
    public var function: @Sendable () -> Date { { self.now } }

    /// Moves the clock.
    public func advance(_ seconds: TimeInterval) {
        value.withValue { $0 += seconds }
    }
}

extension Fixtures {
    /// A snapshot card: `ACTIVE`, Visa, with the given presence per device.
    public static func snapshotCard(_ id: String, last4: String = "1111", status: CardStatus = .active, account: String? = nil, phone: WalletCardState = .notAdded, watch: WalletCardState = .notAdded, art: String? = nil) -> ExtensionSnapshot.Card {
        ExtensionSnapshot.Card(
            externalCardId: id,
            panLast4: last4,
            cardholderName: "Jane Appleseed",
            network: .visa,
            productTitle: "Everyday Debit",
            artFileName: art,
            status: status,
            primaryAccountIdentifier: account,
            phone: .init(hasPass: phone != .notAdded, state: phone),
            watch: .init(hasPass: watch != .notAdded, state: watch)
        )
    }

    /// A snapshot of `cards` for user `user`.
    public static func snapshot(_ cards: [ExtensionSnapshot.Card], user: String = "alice", writtenAt: Date = Date(timeIntervalSince1970: 1_790_000_000)) -> ExtensionSnapshot {
        ExtensionSnapshot(userId: user, writtenAt: writtenAt, passLibraryAvailable: true, cards: cards)
    }

    /// A session of `user` valid for `lifetime` seconds from `now`.
    public static func session(user: String = "alice", token: String = "cardholder-jwt", now: Date = Date(timeIntervalSince1970: 1_790_000_000), lifetime: TimeInterval = 300) -> ExtensionSession {
        ExtensionSession(cardholderToken: token, expiresAt: now.addingTimeInterval(lifetime), userId: user)
    }
}
