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
    private var found = 0

    init(capacity: Int) {
        entries = FirstInFirstOutMap(capacity: capacity)
    }

    subscript(key: [Data]) -> AcceptedChain? {
        get {
            lock.withLock {
                let chain = entries[key]
                if chain != nil { found &+= 1 }
                return chain
            }
        }
        set {
            guard let newValue else { return }
            lock.withLock { entries.insert(newValue, for: key) }
        }
    }

    var count: Int { lock.withLock { entries.count } }

    /// Chains remembered, and how many lookups found theirs.
    var statistics: (chains: Int, hits: Int) { lock.withLock { (entries.count, found) } }
}
