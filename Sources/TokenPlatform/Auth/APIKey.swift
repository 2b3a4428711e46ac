import Crypto
import Foundation

/// A shared-secret API key (issuer back office, token service provider).
///
/// Only the SHA-256 of the key is kept in memory after start-up; presented keys are hashed
/// and compared in constant time, so neither the comparison nor a memory dump reveals it.
public struct APIKey: Sendable {
    private let digest: [UInt8]

    /// Wraps a configured key.
    public init(_ key: String) {
        digest = Array(SHA256.hash(data: Data(key.utf8)))
    }

    /// Whether `presented` is this key.
    public func matches(_ presented: String) -> Bool {
        let candidate = Array(SHA256.hash(data: Data(presented.utf8)))
        var difference: UInt8 = 0
        for (a, b) in zip(digest, candidate) { difference |= a ^ b }
        return difference == 0
    }

    /// A new random key: 32 bytes, base64url.
    public static func generate() -> String {
        Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
