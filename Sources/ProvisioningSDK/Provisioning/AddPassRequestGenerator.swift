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
    /// The largest budget a generation gets: Wallet's limit less one second to hand the
    /// answer back. Every budget is taken within 0…`maximumBudget` (see ``bounded(_:)``).
    public static let maximumBudget: Duration = .seconds(19)

    /// `budget` within 0…``maximumBudget``: a negative budget is none, a longer one than
    /// Wallet allows is cut to ``maximumBudget``.
    public static func bounded(_ budget: Duration) -> Duration {
        min(max(budget, .zero), maximumBudget)
    }

    /// How long a generation may take from the moment it starts; at most ``maximumBudget``
    /// (a longer one set here is taken as that).
    public var budget: Duration {
        didSet { budget = Self.bounded(budget) }
    }
    private let clock: any Clock<Duration>
    private let sign: @Sendable (SignedCardRequest, Duration) async throws(TMPClientError) -> SignedCardResponse

    /// A generator that calls `signed-cards` through `client`, with the smaller of the
    /// generation's budget and the client's `signed-cards` timeout
    /// (``TMPClient/Timeouts/signCard``) as the call's timeout.
    public init(client: TMPClient, budget: Duration = AddPassRequestGenerator.defaultBudget, clock: any Clock<Duration> = ContinuousClock()) {
        let signCardTimeout = client.configuration.timeouts.signCard
        self.init(budget: budget, clock: clock) { request, budget async throws(TMPClientError) in
            try await client.signCard(request, timeout: min(budget, signCardTimeout))
        }
    }

    /// A generator over any `signed-cards` implementation (the call gets the generation's
    /// budget, bounded as ``budget`` is, as its timeout).
    public init(budget: Duration = AddPassRequestGenerator.defaultBudget, clock: any Clock<Duration> = ContinuousClock(), sign: @escaping @Sendable (SignedCardRequest, Duration) async throws(TMPClientError) -> SignedCardResponse) {
        self.budget = Self.bounded(budget)
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
    /// budget; either at most ``maximumBudget``), at once when the calling task is
    /// cancelled. Never throws.
    public func generate(_ request: SignedCardRequest, budget: Duration? = nil) async -> Generation {
        let limit = Self.bounded(budget ?? self.budget)
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
