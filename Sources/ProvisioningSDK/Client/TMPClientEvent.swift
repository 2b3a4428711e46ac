/// What ``TMPClient`` reports to the app's log: operation, attempt, status or error code, and
/// the delay before a retry — never the cardholder token, a header, a request body or a
/// response body.
public struct TMPClientEvent: Sendable, Hashable, CustomStringConvertible {
    /// What happened.
    public enum Kind: Sendable, Hashable {
        /// A request is being sent.
        case sending
        /// The server answered with this HTTP status.
        case answered(status: Int)
        /// The call failed with this error code.
        case failed(code: String)
        /// The call will be tried again after this delay.
        case retrying(after: Duration)
    }

    /// The call.
    public var operation: TMPOperation
    /// The attempt, from 1.
    public var attempt: Int
    /// What happened.
    public var kind: Kind

    /// Creates an event.
    public init(operation: TMPOperation, attempt: Int, kind: Kind) {
        self.operation = operation
        self.attempt = attempt
        self.kind = kind
    }

    /// One log line, e.g. `tokens/searches #1 answered 200`.
    public var description: String {
        let what: String
        switch kind {
        case .sending: what = "sending"
        case .answered(let status): what = "answered \(status)"
        case .failed(let code): what = "failed \(code)"
        case .retrying(let delay): what = "retrying after \(delay)"
        }
        return "\(operation.rawValue) #\(attempt) \(what)"
    }
}
