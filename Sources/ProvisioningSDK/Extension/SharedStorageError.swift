/// Why the storage the app shares with its Wallet extensions (``SharedWalletDirectory``,
/// ``SecretStore``) refused an operation: a stable code and a message naming what is wrong.
/// Never carries a secret.
public struct SharedStorageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine codes.
    public enum Code: String, Sendable, Hashable {
        /// A key or file name outside `A–Z a–z 0–9 . _ -` (or empty, or too long).
        case invalidName = "invalid_name"
        /// A secret file that group or others may read, or that is not a plain file of ours.
        case insecureFile = "insecure_file"
        /// More bytes than the store accepts.
        case tooLarge = "too_large"
        /// The operating system refused to read, write or remove.
        case io = "io"
        /// The shared folder's lock stayed with another process longer than the caller would wait.
        case busy = "busy"
    }

    /// What went wrong.
    public var code: Code
    /// What is wrong and what to do, for people.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}
