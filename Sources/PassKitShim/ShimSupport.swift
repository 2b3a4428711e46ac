#if !canImport(PassKit)
import Foundation

/// A lock-guarded value (NOT PART OF APPLE'S PASSKIT).
final class ShimLock<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched inside `withLock`, under `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Carries a value across a task boundary the way the Objective-C runtime does for
/// PassKit's handler methods (NOT PART OF APPLE'S PASSKIT).
///
/// @unchecked: PassKit's own API gives these values no Sendable guarantee either; the shim
/// hands each value to exactly one task and never touches it again.
struct UncheckedTransfer<Value>: @unchecked Sendable {
    let value: Value
}
#endif
