import Foundation
import ProvisioningModels

/// One in-app provisioning flow: one card, one target device, from the add sheet's first
/// request to its end.
///
/// Made by ``IssuerWallet/beginProvisioning(externalCardId:target:)``. The PassKit adapter
/// shows the sheet with ``configuration``, answers Wallet's `generateRequest` through
/// ``generateRequest(certificates:nonce:nonceSignature:)`` and reports the sheet's end to
/// ``finish(_:)``.
public final class ProvisioningSession: Sendable {
    /// The sheet's configuration: card, target device and what Wallet shows.
    public let configuration: AddPassConfiguration
    private let generator: AddPassRequestGenerator
    private let finished: @Sendable (WalletAddResult) async -> WalletStatusSnapshot?
    private let state = Locked(State())

    private struct State {
        var current: Task<AddPassRequestGenerator.Generation, Never>?
        var lastFailure: ProvisioningFailure?
        var outcome: ProvisioningOutcome?
    }

    /// Creates a session; `refresh` re-reads the wallet status when the flow ends.
    public convenience init(configuration: AddPassConfiguration, generator: AddPassRequestGenerator, refresh: @escaping @Sendable () async -> WalletStatusSnapshot?) {
        self.init(configuration: configuration, generator: generator, finished: { _ in await refresh() })
    }

    /// Creates a session; `finished` is told Wallet's result once, when the flow ends, and
    /// answers the wallet status read after it (``IssuerWallet`` keeps an added pass for its
    /// card there, then reads).
    public init(configuration: AddPassConfiguration, generator: AddPassRequestGenerator, finished: @escaping @Sendable (WalletAddResult) async -> WalletStatusSnapshot?) {
        self.configuration = configuration
        self.generator = generator
        self.finished = finished
    }

    /// Answers Wallet's request for the card data; returns within the generator's budget,
    /// whatever happens, with ``AddPassRequest/empty`` on any failure.
    ///
    /// Wallet may ask again in the same flow (a retry with a fresh nonce): the new call
    /// supersedes the old one, which answers ``AddPassRequest/empty`` at once. Once the flow
    /// has ended (``finish(_:)``: the cardholder cancelled while the request was on its way
    /// to the app), a request not yet started answers ``AddPassRequest/empty`` at once and
    /// seals nothing.
    public func generateRequest(certificates: [Data], nonce: Data, nonceSignature: Data) async -> AddPassRequest {
        let request = configuration.signedCardRequest(certificates: certificates, nonce: nonce, nonceSignature: nonceSignature)
        let generator = generator
        let started = state.withLock { state -> Task<AddPassRequestGenerator.Generation, Never>? in
            guard state.outcome == nil else { return nil }
            state.current?.cancel()
            // A new request (Wallet asking again) is what the flow now waits on: an earlier
            // failure no longer says how it ends (a cancel while this one runs is a cancel).
            state.lastFailure = nil
            let task = Task { await generator.generate(request) }
            state.current = task
            return task
        }
        guard let task = started else { return .empty }
        let generation = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        state.withLock { state in
            // A request superseded meanwhile says nothing of how the flow ends.
            guard state.current == task else { return }
            state.current = nil
            if let failure = generation.failure, failure != .cancelled { state.lastFailure = failure }
            if generation.failure == nil { state.lastFailure = nil }
        }
        return generation.request
    }

    /// Ends the flow with Wallet's result: abandons any request still running, decides the
    /// outcome, and refreshes the wallet status. A second call returns the first outcome.
    public func finish(_ result: WalletAddResult) async -> (outcome: ProvisioningOutcome, status: WalletStatusSnapshot?) {
        let (outcome, isFirst) = state.withLock { state -> (ProvisioningOutcome, Bool) in
            state.current?.cancel()
            state.current = nil
            if let outcome = state.outcome { return (outcome, false) }
            let outcome = Self.outcome(of: result, target: configuration.target, lastFailure: state.lastFailure)
            state.outcome = outcome
            return (outcome, true)
        }
        return (outcome, isFirst ? await finished(result) : nil)
    }

    /// The outcome of a flow: Wallet's word on success and cancellation, the issuer's
    /// failure (more precise than Wallet's generic error) when the last request failed.
    static func outcome(of result: WalletAddResult, target: DeviceType, lastFailure: ProvisioningFailure?) -> ProvisioningOutcome {
        switch result {
        case .added(let pass):
            // The device Wallet added to, which the cardholder may have picked in the sheet.
            // Without the pass (Wallet may hand over none) the target is the best guess; the
            // status read right after shows where the card really is.
            return .added(pass?.device ?? target)
        case .failed(let error):
            if let lastFailure { return .failed(lastFailure) }
            return error.reason == .userCancelled ? .cancelled : .failed(.wallet(error))
        }
    }
}
