import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The delegate of ``URLSessionTransport/ephemeralSession``: gathers each data task's body and
/// ends the task as soon as the body is known to be longer than its request allows.
///
/// One limiter serves every task of the session; each task's state is a ``Receiver`` found
/// by the task's identifier. A receiver is removed as soon as its call has its outcome (its
/// task is cancelled then unless it completed); later events of that task, and those of
/// tasks it did not start, are let through and their data dropped.
final class ResponseLimiter: NSObject, URLSessionDataDelegate, Sendable {
    private let receivers = Locked<[Int: Receiver]>([:])

    /// Runs `request` as a data task of `session` (whose delegate this is) and returns its
    /// response, or throws ``ResponseTooLargeError`` when the body is longer than
    /// `maximumResponseSize` bytes, URLSession's error, or `URLError(.cancelled)` when the
    /// calling task is cancelled (the data task is then cancelled too).
    func send(_ request: URLRequest, on session: URLSession, maximumResponseSize: Int?) async throws -> TransportResponse {
        let task = session.dataTask(with: request)
        let receiver = Receiver(limit: maximumResponseSize)
        let id = task.taskIdentifier
        receivers.withLock { $0[id] = receiver }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                receiver.wait(continuation)
                if Task.isCancelled {
                    finish(id, receiver, .failure(URLError(.cancelled)))
                    Self.cancel(task)
                } else {
                    task.resume()
                }
            }
        } onCancel: {
            finish(id, receiver, .failure(URLError(.cancelled)))
            Self.cancel(task)
        }
    }

    private func receiver(of task: URLSessionTask) -> Receiver? {
        receivers.withLock { $0[task.taskIdentifier] }
    }

    private func finish(_ id: Int, _ receiver: Receiver, _ outcome: Result<TransportResponse, any Error>) {
        receivers.withLock { receivers in
            if receivers[id] === receiver { receivers[id] = nil }
        }
        receiver.finish(outcome)
    }

    // MARK: URLSessionDataDelegate

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse, completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        guard let receiver = receiver(of: dataTask) else {
            completionHandler(.allow)
            return
        }
        let declared = Self.declaredLength(of: response)
        if let limit = receiver.limit, declared > Int64(limit) {
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            finish(dataTask.taskIdentifier, receiver, .failure(ResponseTooLargeError(statusCode: status, declaredLength: Int(clamping: declared), maximumResponseSize: limit)))
            completionHandler(.cancel)
            Self.cancel(dataTask)
            return
        }
        completionHandler(.allow)
    }

    /// The body length `response` declares: its `Content-Length` field, found whatever the
    /// field name's case (FoundationNetworking's `expectedContentLength` misses a lowercase
    /// `content-length`), else `expectedContentLength` (-1 when unknown).
    static func declaredLength(of response: URLResponse) -> Int64 {
        if let field = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Length"),
            let length = Int64(field.trimmingCharacters(in: .whitespaces))
        {
            return length
        }
        return response.expectedContentLength
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        // No receiver: the call already has its outcome (and its task was cancelled), or the
        // task is not one of ours; either way its data is not kept.
        guard let receiver = receiver(of: dataTask) else { return }
        if let limit = receiver.append(data) {
            let status = (dataTask.response as? HTTPURLResponse)?.statusCode ?? 0
            finish(dataTask.taskIdentifier, receiver, .failure(ResponseTooLargeError(statusCode: status, declaredLength: nil, maximumResponseSize: limit)))
            Self.cancel(dataTask)
        }
    }

    /// Cancels `task` without holding up the caller: FoundationNetworking's `cancel()` waits
    /// for the task's own queue, and on the delegate queue the data still arriving meanwhile
    /// would pile up behind it.
    private static func cancel(_ task: URLSessionTask) {
        DispatchQueue.global().async { task.cancel() }
    }

    /// Follows no redirect: the 3xx itself is the answer. A request carries its
    /// `Authorization` header (the cardholder's token, a TSP API key) to wherever a redirect
    /// points — URLSession copies the header to the new request — and the APIs called here
    /// never redirect.
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let receiver = receiver(of: task) else { return }
        if let error {
            finish(task.taskIdentifier, receiver, .failure(error))
        } else {
            finish(task.taskIdentifier, receiver, Result { try URLSessionTransport.response(task.response, body: receiver.body) })
        }
    }
}

extension ResponseLimiter {
    /// One data task's body so far, its limit, and the call waiting for its outcome.
    final class Receiver: Sendable {
        private struct State {
            var body = Data()
            var continuation: CheckedContinuation<TransportResponse, any Error>?
            var outcome: Result<TransportResponse, any Error>?
        }

        /// The longest body accepted, in bytes; nil for no limit.
        let limit: Int?
        private let state = Locked(State())

        init(limit: Int?) {
            self.limit = limit
        }

        /// The body received so far.
        var body: Data {
            state.withLock { $0.body }
        }

        /// Adds `data` to the body; returns the limit when the body is now longer than it
        /// (the data is then dropped), nil otherwise.
        func append(_ data: Data) -> Int? {
            state.withLock { state in
                if let limit, state.body.count + data.count > limit { return limit }
                state.body.append(data)
                return nil
            }
        }

        /// Hands the outcome to `continuation`, now if there is one already, else when it comes.
        func wait(_ continuation: CheckedContinuation<TransportResponse, any Error>) {
            let outcome = state.withLock { state in
                if state.outcome == nil { state.continuation = continuation }
                return state.outcome
            }
            if let outcome { continuation.resume(with: outcome) }
        }

        /// Settles the call with `outcome`, unless it is settled already; the first outcome wins.
        func finish(_ outcome: Result<TransportResponse, any Error>) {
            let continuation = state.withLock { state -> CheckedContinuation<TransportResponse, any Error>? in
                guard state.outcome == nil else { return nil }
                state.outcome = outcome
                state.body = Data()
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(with: outcome)
        }
    }
}
