import Foundation

/// A bounded map from a chain's exact DER bytes to its accepted verdict.
///
/// Eviction is least-recently-inserted (FIFO): Wallet rotates leaves rarely, so nearly every
/// request repeats one of a handful of chains and recency tracking would buy nothing.
final class AcceptedChainCache: @unchecked Sendable {
    // @unchecked: every access to `entries` and `order` happens while holding `lock`.
    private let lock = NSLock()
    private let capacity: Int
    private var entries: [[Data]: AcceptedChain] = [:]
    private var order: [[Data]] = []
    private var head = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    subscript(key: [Data]) -> AcceptedChain? {
        get {
            lock.lock()
            defer { lock.unlock() }
            return entries[key]
        }
        set {
            guard capacity > 0, let newValue else { return }
            lock.lock()
            defer { lock.unlock() }
            if entries.updateValue(newValue, forKey: key) != nil { return }
            if order.count < capacity {
                order.append(key)
            } else {
                entries[order[head]] = nil
                order[head] = key
                head = (head + 1) % capacity
            }
        }
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return entries.count
    }
}
