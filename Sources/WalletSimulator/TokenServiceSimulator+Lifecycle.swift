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
        guard var token = tokens[reference] else { throw .unknownToken(reference) }
        if token.status == rule.target { return }
        guard rule.from.contains(token.status) else {
            throw .illegalTransition(tokenUniqueReference: reference, from: token.status, to: rule.target)
        }
        token.status = rule.target
        token.updatedAt = now()
        tokens[reference] = token
        logger.info("token \(operation.rawValue)", metadata: ["token": "\(Redaction.prefix(reference))", "status": "\(rule.target.rawValue)"])
        enqueueEvent(rule.event, for: token)
        // On the actor, with no suspension since the change: two commands for one token
        // notify in the order they changed it.
        for observer in observers {
            observer.tokenStateDidChange(tokenUniqueReference: reference, to: rule.target)
        }
        if configuration.faults.applyThenTimeOut.contains(operation) {
            try? await sleep(configuration.faults.hangDuration)
            throw .timedOut(operation)
        }
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
