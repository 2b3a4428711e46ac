/// A map of at most ``capacity`` entries that, when full, forgets the entry inserted first.
///
/// For caches where nearly every lookup repeats one of a few keys (the chains Wallet sends,
/// the cardholder tokens of the apps signed in), so recency tracking would buy nothing. Not
/// synchronized: the caches holding one guard it with their own lock.
public struct FirstInFirstOutMap<Key: Hashable, Value> {
    /// The most entries kept (0 keeps none).
    public let capacity: Int
    private var entries: [Key: Value] = [:]
    private var order: [Key] = []
    private var head = 0

    /// An empty map of at most `capacity` entries.
    public init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// The value for `key`, if kept.
    public subscript(key: Key) -> Value? { entries[key] }

    /// The number of entries kept.
    public var count: Int { entries.count }

    /// Keeps `value` for `key`: replaces the value of a key already kept (its place in the
    /// order stays), or adds the key and, when full, forgets the one inserted first.
    public mutating func insert(_ value: Value, for key: Key) {
        guard capacity > 0 else { return }
        if entries.updateValue(value, forKey: key) != nil { return }
        if order.count < capacity {
            order.append(key)
        } else {
            entries[order[head]] = nil
            order[head] = key
            head = (head + 1) % capacity
        }
    }

    /// Forgets every entry.
    public mutating func removeAll() {
        entries.removeAll()
        order.removeAll()
        head = 0
    }
}

extension FirstInFirstOutMap: Sendable where Key: Sendable, Value: Sendable {}
