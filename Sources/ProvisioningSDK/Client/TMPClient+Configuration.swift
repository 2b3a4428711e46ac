import Foundation

extension TMPClient {
    /// Where the TMP server is and how patient the client is with it.
    public struct Configuration: Sendable, Hashable {
        /// The server's base URL, e.g. `https://tmp.bank.example/`; API paths are appended.
        public var baseURL: URL
        /// Per-operation time limits for a whole call, retries included.
        public var timeouts: Timeouts
        /// How idempotent reads are retried.
        public var retry: RetryPolicy
        /// The largest response body accepted; anything longer is a malformed response.
        public var maximumResponseBytes: Int

        /// Creates a configuration with the default timeouts and retry policy.
        public init(baseURL: URL, timeouts: Timeouts = Timeouts(), retry: RetryPolicy = RetryPolicy(), maximumResponseBytes: Int = 1 << 20) {
            self.baseURL = baseURL
            self.timeouts = timeouts
            self.retry = retry
            self.maximumResponseBytes = maximumResponseBytes
        }
    }

    /// Time limits per operation. Each bounds the whole call, retries and back-off included;
    /// a call may pass its own limit instead.
    public struct Timeouts: Sendable, Hashable {
        /// `tokens/searches`.
        public var searchTokens: Duration
        /// `signed-cards`; provisioning (in the app and in the Wallet extension) uses the
        /// smaller of this and its budget (``AddPassRequestGenerator/budget``).
        public var signCard: Duration
        /// `tokens/activations`.
        public var activateToken: Duration
        /// `GET cards`.
        public var listCards: Duration
        /// `GET cards/{externalCardId}/art`.
        public var cardArt: Duration

        /// Creates limits; the defaults suit a mobile network.
        public init(searchTokens: Duration = .seconds(10), signCard: Duration = .seconds(15), activateToken: Duration = .seconds(20), listCards: Duration = .seconds(10), cardArt: Duration = .seconds(10)) {
            self.searchTokens = searchTokens
            self.signCard = signCard
            self.activateToken = activateToken
            self.listCards = listCards
            self.cardArt = cardArt
        }

        /// The limit for `operation`.
        public subscript(operation: TMPOperation) -> Duration {
            switch operation {
            case .searchTokens: searchTokens
            case .signCard: signCard
            case .activateToken: activateToken
            case .listCards: listCards
            case .cardArt: cardArt
            }
        }
    }

    /// Retries for idempotent reads: exponential back-off, capped, a bounded number of attempts.
    public struct RetryPolicy: Sendable, Hashable {
        /// Attempts in all, the first included (1 = never retry).
        public var maximumAttempts: Int
        /// The wait before the second attempt.
        public var initialBackoff: Duration
        /// The longest wait between two attempts.
        public var maximumBackoff: Duration

        /// Creates a policy; by default 3 attempts, waiting 0.5 s then 1 s, never more than 4 s.
        public init(maximumAttempts: Int = 3, initialBackoff: Duration = .milliseconds(500), maximumBackoff: Duration = .seconds(4)) {
            self.maximumAttempts = max(1, maximumAttempts)
            self.initialBackoff = initialBackoff
            self.maximumBackoff = maximumBackoff
        }

        /// No retries at all.
        public static let none = RetryPolicy(maximumAttempts: 1)

        /// The wait after failed attempt `attempt` (from 1): `initialBackoff · 2^(attempt-1)`, capped.
        public func backoff(afterAttempt attempt: Int) -> Duration {
            let doublings = min(max(attempt - 1, 0), 30)
            let delay = initialBackoff * (1 << doublings)
            return min(delay, maximumBackoff)
        }
    }
}
