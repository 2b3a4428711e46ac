import ServiceLifecycle

/// Runs `round` after every `interval` (not at once) until the service group shuts down
/// gracefully, the task is cancelled, or `round` answers false: the loop of the server's
/// periodic services (``TokenRealigner``, ``CardholderKeyReloader``).
func runPeriodically(every interval: Duration, _ round: () async -> Bool) async {
    while !Task.isCancelled, !Task.isShuttingDownGracefully {
        do {
            try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        } catch {
            return
        }
        guard !Task.isShuttingDownGracefully, await round() else { return }
    }
}
