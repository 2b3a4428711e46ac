import ProvisioningModels
import TokenPlatform

/// TMP's lifecycle commands: each changes the simulator's token, tells the observers, and is
/// echoed to TMP as a token event.
///
/// TMP calls these inside its own request handling and records the change itself once the
/// call returns, so the echo is sent asynchronously (see ``TokenEventDeliveryMode``); a
/// command that finds the token already in the target state changes nothing and echoes nothing.
extension TokenServiceSimulator {
    /// Activates an inactive (yellow-path) token.
    public func activate(_ token: TokenRecord) async throws {
        try await perform(.activate, on: token.tokenUniqueReference)
    }

    /// Suspends an active token.
    public func suspend(_ token: TokenRecord) async throws {
        try await perform(.suspend, on: token.tokenUniqueReference)
    }

    /// Resumes a suspended token.
    public func resume(_ token: TokenRecord) async throws {
        try await perform(.resume, on: token.tokenUniqueReference)
    }

    /// Deactivates a token for good.
    public func deactivate(_ token: TokenRecord) async throws {
        try await perform(.deactivate, on: token.tokenUniqueReference)
    }

    /// Applies a lifecycle command to the token `reference`.
    ///
    /// - Throws: ``TokenServiceSimulatorError/timedOut(_:)`` for an injected timeout,
    ///   `unknownToken`, or `illegalTransition`; the token is unchanged in every case but an
    ///   injected ``TokenServiceFaults/applyThenTimeOut``, where it changed before the timeout.
    func perform(_ operation: TokenServiceOperation, on reference: String) async throws(TokenServiceSimulatorError) {
        if configuration.faults.timeOut.contains(operation) {
            try? await sleep(configuration.faults.hangDuration)
            throw .timedOut(operation)
        }
        guard let rule = Self.rule(for: operation) else { preconditionFailure("\(operation) is not a lifecycle command") }
        // Read after the possible wait: the actor may have run other calls meanwhile.
        let changed = try apply(rule, named: operation.rawValue, to: reference)
        // Only a command that took effect loses its answer: one that finds the token already
        // in its target state (TMP sending it again after a FAILED) succeeds as a no-op.
        if changed, configuration.faults.applyThenTimeOut.contains(operation) {
            try? await sleep(configuration.faults.hangDuration)
            throw .timedOut(operation)
        }
    }

    /// Changes the token `reference` by `rule`, queues the rule's event for TMP and tells the
    /// observers; false (nothing done) when the token is already in the target state.
    @discardableResult
    private func apply(_ rule: (from: Set<TokenStatus>, target: TokenStatus, event: TokenEventType), named name: String, to reference: String) throws(TokenServiceSimulatorError) -> Bool {
        guard var token = tokens[reference] else { throw .unknownToken(reference) }
        if token.status == rule.target { return false }
        guard rule.from.contains(token.status) else {
            throw .illegalTransition(tokenUniqueReference: reference, from: token.status, to: rule.target)
        }
        token.status = rule.target
        token.updatedAt = now()
        tokens[reference] = token
        logger.info("token \(name)", metadata: ["token": "\(Redaction.prefix(reference))", "status": "\(rule.target.rawValue)"])
        enqueueEvent(rule.event, for: token)
        // On the actor, with no suspension since the change: two changes of one token notify
        // in the order they were made.
        for observer in observers {
            observer.tokenStateDidChange(tokenUniqueReference: reference, to: rule.target)
        }
        return true
    }

    /// Changes a token at the network's or the device's own initiative, not TMP's: the
    /// cardholder removed the pass from Wallet (``NetworkTokenChange/passRemoved``), the
    /// device was reported lost (``NetworkTokenChange/deviceLost``) or found again
    /// (``NetworkTokenChange/deviceFound``). The token changes, the device's Wallet is told
    /// (observers), and the event goes to TMP like any other: the event faults (drop,
    /// duplicate, reorder) apply, the command timeouts do not.
    ///
    /// A change to the state the token already has (a lost device's token the issuer has
    /// suspended) changes nothing and sends nothing: the simulator keeps one status per
    /// token, not one suspension per party.
    ///
    /// - Throws: `unknownToken`, or `illegalTransition` for a change the token's state does
    ///   not allow (a lost device's token that is inactive, a found device's token that is
    ///   deactivated); nothing changes then.
    public func change(_ change: NetworkTokenChange, tokenUniqueReference reference: String) throws(TokenServiceSimulatorError) {
        let rule: (from: Set<TokenStatus>, target: TokenStatus, event: TokenEventType) =
            switch change {
            case .passRemoved: ([.inactive, .active, .suspended], .deactivated, .deactivated)
            case .deviceLost: ([.active], .suspended, .suspended)
            case .deviceFound: ([.suspended], .active, .resumed)
            }
        try apply(rule, named: change.rawValue, to: reference)
    }

    /// What a command does: the states it applies to, the state it leads to, the event it echoes.
    private static func rule(for operation: TokenServiceOperation) -> (from: Set<TokenStatus>, target: TokenStatus, event: TokenEventType)? {
        switch operation {
        case .activate: ([.inactive], .active, .activated)
        case .suspend: ([.active], .suspended, .suspended)
        case .resume: ([.suspended], .active, .resumed)
        case .deactivate: ([.inactive, .active, .suspended], .deactivated, .deactivated)
        case .tokenizationDecision: nil
        }
    }
}

/// A token change the network or the device makes of its own accord (see
/// ``TokenServiceSimulator/change(_:tokenUniqueReference:)``).
public enum NetworkTokenChange: String, Sendable, Hashable, CaseIterable {
    /// The cardholder removed the pass from Wallet: the token is deactivated.
    case passRemoved = "pass-removed"
    /// The device was reported lost (Find My): its active token is suspended.
    case deviceLost = "device-lost"
    /// The lost device was found: its suspended token is resumed.
    case deviceFound = "device-found"
}
