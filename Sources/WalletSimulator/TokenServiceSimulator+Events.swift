import ProvisioningModels

/// The token-event outbox: events leave in the order they were queued, one at a time, each
/// with a unique event id; an event TMP could not be reached for stays at the head and is
/// tried again by the next delivery, so a later event never overtakes it (unless
/// ``TokenServiceFaults/reorderEvents`` is injected).
extension TokenServiceSimulator {
    /// Sends every queued event and returns when the queue is empty or TMP could not be
    /// reached (the undelivered events stay queued; see ``pendingEvents``).
    public func drainEvents() async {
        guard !isShutDown else { return }
        guard let task = deliveryTask ?? (outbox.isEmpty ? nil : startDelivery()) else { return }
        await task.value
    }

    /// Events queued and not yet acknowledged by TMP, oldest first.
    public var pendingEvents: [TokenEventRequest] { outbox }

    /// What became of the most recent events (at most ``deliveryLogCapacity``), oldest first.
    public var deliveryLog: [TokenEventDelivery] { deliveries }

    /// Queues `type` for `token`, applying the injected drop and duplicate faults.
    func enqueueEvent(_ type: TokenEventType, for token: NetworkToken) {
        let event = TokenEventRequest(
            eventId: "EVT" + randomHex(16),
            tokenUniqueReference: token.tokenUniqueReference,
            panUniqueReference: token.panUniqueReference,
            event: type,
            walletType: token.walletType,
            deviceType: token.deviceType,
            tokenLast4: token.tokenLast4,
            occurredAt: EventTime(now())
        )
        if configuration.faults.dropEvents.contains(type) {
            record(TokenEventDelivery(event: event, outcome: .dropped))
            return
        }
        // The head is being sent while a delivery runs: only a waiting event can be overtaken.
        if configuration.faults.reorderEvents, outbox.count >= (deliveryTask == nil ? 1 : 2) {
            outbox.insert(event, at: outbox.count - 1)
        } else {
            outbox.append(event)
        }
        if configuration.faults.duplicateEvents.contains(type) { outbox.append(event) }
        if configuration.eventDelivery == .background, !isShutDown { _ = startDelivery() }
    }

    /// The running delivery, or a new one: there is never more than one, so events keep their order.
    func startDelivery() -> Task<Void, Never> {
        if let deliveryTask { return deliveryTask }
        let task = Task { await deliverQueued() }
        deliveryTask = task
        return task
    }

    private func deliverQueued() async {
        defer { deliveryTask = nil }
        while !isShutDown, let event = outbox.first {
            guard let client else {
                record(TokenEventDelivery(event: event, outcome: .failed(TokenServiceSimulatorError.notConnected.description)))
                scheduleRetry()
                return
            }
            let outcome: TokenEventDelivery.Outcome
            do {
                let response = try await client.report(event)
                switch response.result {
                case "APPLIED": outcome = .applied(response.tokenStatus)
                case "DUPLICATE": outcome = .duplicate(response.tokenStatus)
                case "STALE": outcome = .stale(response.tokenStatus)
                default:
                    // Not an answer TMP gives: whether it took the event is unknown, so it goes again.
                    record(TokenEventDelivery(event: event, outcome: .failed("token event answered with result \(response.result.debugDescription), not APPLIED, DUPLICATE or STALE")))
                    scheduleRetry()
                    return
                }
            } catch where !error.isRefusalOfTheCall {
                // No clear answer (an outage, a garbled or oversized answer, a redirect, an error
                // page without TMP's envelope): TMP may have applied the event, and its repeat is
                // then answered DUPLICATE. It stays queued and goes again, as a network re-sends
                // a notification it had no clear answer to.
                // A refused credential (401, 403) says nothing of the event: the simulator's key
                // is wrong or was rotated. The event stays queued, as for an outage, until
                // `connect(to:)` brings the right key.
                if error.isCredentialRefusal {
                    logger.warning("TMP refused the token service's credential; events stay queued", metadata: ["event": "\(event.event.rawValue)", "error": "\(error.description)"])
                }
                record(TokenEventDelivery(event: event, outcome: .failed(error.description)))
                scheduleRetry()
                return
            } catch .refused(_, _, let code, let message) {
                outcome = .rejected(code: code, message: message)
            } catch {
                // Not reached: only TMP's refusals are left for these clauses.
                outcome = .rejected(code: "refused", message: error.description)
            }
            if case .rejected = outcome {
                logger.warning("token event rejected by TMP", metadata: ["event": "\(event.event.rawValue)", "token": "\(Redaction.prefix(event.tokenUniqueReference))", "outcome": "\(outcome)"])
            }
            outbox.removeFirst()
            failedRetries = 0
            record(TokenEventDelivery(event: event, outcome: outcome))
        }
    }

    /// After a failed delivery, with background delivery: tries again after a wait that
    /// doubles with each failed retry (``Configuration/firstEventRetryDelay`` up to
    /// ``Configuration/longestEventRetryDelay``), at most ``Configuration/eventRetries`` times
    /// in a row, as a network retries its notifications. One retry waits at a time.
    func scheduleRetry() {
        guard configuration.eventDelivery == .background, !isShutDown, retryTask == nil, failedRetries < configuration.eventRetries else { return }
        let doublings = min(failedRetries, 20)
        let delay = min(configuration.firstEventRetryDelay * (1 << doublings), configuration.longestEventRetryDelay)
        failedRetries += 1
        retryTask = Task { [weak self] in
            // A retry cancelled by connect(to:) ends here; its replacement is scheduled.
            do { try await Task.sleep(for: delay) } catch { return }
            await self?.retryDelivery()
        }
    }

    private func retryDelivery() {
        // Cancelled by connect(to:) after its wait ended, while it waited for the actor: the
        // retry that replaced it is in `retryTask`, and stays the only one.
        guard !Task.isCancelled else { return }
        retryTask = nil
        if !outbox.isEmpty { _ = startDelivery() }
    }

    private func record(_ delivery: TokenEventDelivery) {
        deliveries.append(delivery)
        if deliveries.count > Self.deliveryLogCapacity { deliveries.removeFirst(deliveries.count - Self.deliveryLogCapacity) }
    }
}
