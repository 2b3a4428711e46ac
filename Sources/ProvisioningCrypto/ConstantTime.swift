import Foundation

/// Compares two byte sequences in time that depends only on their lengths.
///
/// Use for secrets and values derived from them (API keys, MACs, hashes) so a caller cannot
/// learn a prefix from response timing.
public func constantTimeEquals(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
    guard lhs.count == rhs.count else { return false }
    var difference: UInt8 = 0
    for (a, b) in zip(lhs, rhs) { difference |= a ^ b }
    return difference == 0
}

/// Compares two strings' UTF-8 bytes in time that depends only on their lengths.
public func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
    constantTimeEquals(Array(lhs.utf8), Array(rhs.utf8))
}
