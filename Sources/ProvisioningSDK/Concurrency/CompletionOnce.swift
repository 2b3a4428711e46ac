/// Wraps a completion handler so that it runs exactly once, however many callers race to
/// complete it — the guarantee Wallet's handlers need ("calling a completion handler twice is
/// a crash in real apps").
///
/// The first ``complete(_:)`` calls the handler and returns `true`; every later call is
/// ignored and returns `false`.
public final class CompletionOnce<Value: Sendable>: Sendable {
    private let handler: Locked<(@Sendable (Value) -> Void)?>

    /// Wraps `handler`.
    public init(_ handler: @escaping @Sendable (Value) -> Void) {
        self.handler = Locked(handler)
    }

    /// Calls the handler with `value` if nothing has completed it yet.
    @discardableResult
    public func complete(_ value: Value) -> Bool {
        // Take the handler out under the lock, call it outside: a handler that re-enters
        // `complete` must not deadlock.
        let taken = handler.withLock { handler in
            defer { handler = nil }
            return handler
        }
        guard let taken else { return false }
        taken(value)
        return true
    }

    /// Whether the handler has run.
    public var isCompleted: Bool {
        handler.withLock { $0 == nil }
    }
}
