import Foundation
import ProvisioningModels

/// Turns what Wallet hands the issuer (certificates, nonce, nonce signature) into the add-pass
/// request through `signed-cards`, and always answers inside Wallet's budget.
///
/// Used by in-app provisioning (`PKAddPaymentPassViewControllerDelegate`) and by the Wallet
/// extension (`generateAddPaymentPassRequestForPassEntryWithIdentifier`) alike. Whatever
/// happens — the server refuses, is slow, cannot be reached, or the caller is cancelled —
/// the answer comes before the deadline, and is ``AddPassRequest/empty`` unless the card was
/// sealed, so Wallet shows its error rather than hangs.
public struct AddPassRequestGenerator: Sendable {
    /// Wallet's own limit for an answer.
    public static let walletBudget: Duration = .seconds(20)
    /// The default budget: Wallet's limit less time to hand the answer back.
    public static let defaultBudget: Duration = .seconds(18)

    /// How long a generation may take from the moment it starts.
    public var budget: Duration
    private let clock: any Clock<Duration>
    private let sign: @Sendable (SignedCardRequest, Duration) async throws(TMPClientError) -> SignedCardResponse

    /// A generator that calls `signed-cards` through `client`.
    public init(client: TMPClient, budget: Duration = AddPassRequestGenerator.defaultBudget, clock: any Clock<Duration> = ContinuousClock()) {
        self.init(budget: budget, clock: clock) { request, timeout async throws(TMPClientError) in
            try await client.signCard(request, timeout: timeout)
        }
    }

    /// A generator over any `signed-cards` implementation (the call gets the budget as its timeout).
    public init(budget: Duration = AddPassRequestGenerator.defaultBudget, clock: any Clock<Duration> = ContinuousClock(), sign: @escaping @Sendable (SignedCardRequest, Duration) async throws(TMPClientError) -> SignedCardResponse) {
        self.budget = budget
        self.clock = clock
        self.sign = sign
    }

    /// The result of one generation: the request to hand Wallet and, when it is empty, why.
    public struct Generation: Sendable, Hashable {
        /// What to hand Wallet; ``AddPassRequest/empty`` unless the card was sealed.
        public var request: AddPassRequest
        /// Why the request is empty; nil on success.
        public var failure: ProvisioningFailure?
    }

    /// Generates the request for `request` and returns within `budget` (or this generator's
    /// budget), at once when the calling task is cancelled. Never throws.
    public func generate(_ request: SignedCardRequest, budget: Duration? = nil) async -> Generation {
        let limit = budget ?? self.budget
        let sign = sign
        let outcome = await Deadline.run(within: limit, clock: clock) { () async throws(TMPClientError) -> SignedCardResponse in
            try await sign(request, limit)
        }
        switch outcome {
        case .finished(.success(let response)):
            return Generation(request: AddPassRequest(response), failure: nil)
        case .finished(.failure(let error as TMPClientError)) where error.kind == .timedOut:
            return Generation(request: .empty, failure: .timedOut)
        case .finished(.failure(let error as TMPClientError)) where error.kind == .cancelled:
            return Generation(request: .empty, failure: .cancelled)
        case .finished(.failure(let error as TMPClientError)):
            return Generation(request: .empty, failure: .server(error))
        case .finished(.failure):
            return Generation(request: .empty, failure: .cancelled)
        case .timedOut:
            return Generation(request: .empty, failure: .timedOut)
        case .cancelled:
            return Generation(request: .empty, failure: .cancelled)
        }
    }

    /// Starts generating for `request` and calls `completion` exactly once, within the
    /// budget: with the request, or with ``AddPassRequest/empty`` on any failure or when the
    /// returned task is cancelled.
    @discardableResult
    public func generate(_ request: SignedCardRequest, budget: Duration? = nil, completion: @escaping @Sendable (AddPassRequest) -> Void) -> Task<Generation, Never> {
        let once = CompletionOnce(completion)
        return Task {
            let generation = await generate(request, budget: budget)
            once.complete(generation.request)
            return generation
        }
    }
}
