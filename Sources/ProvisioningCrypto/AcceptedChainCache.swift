import Foundation
import ProvisioningModels

/// A bounded map from a chain's exact DER bytes to its accepted verdict.
///
/// Eviction is least-recently-inserted (FIFO): Wallet rotates leaves rarely, so nearly every
/// request repeats one of a handful of chains and recency tracking would buy nothing.
final class AcceptedChainCache: @unchecked Sendable {
    // @unchecked: every access to `entries` happens while holding `lock`.
    private let lock = NSLock()
    private var entries: FirstInFirstOutMap<[Data], AcceptedChain>

    init(capacity: Int) {
        entries = FirstInFirstOutMap(capacity: capacity)
    }

    subscript(key: [Data]) -> AcceptedChain? {
        get { lock.withLock { entries[key] } }
        set {
            guard let newValue else { return }
            lock.withLock { entries.insert(newValue, for: key) }
        }
    }

    var count: Int { lock.withLock { entries.count } }
}
