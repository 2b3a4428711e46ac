import Foundation

/// One step of the demo: what was tried, whether it came out as expected, and how long it took.
public struct DemoStep: Sendable, Hashable, Codable {
    /// A short name, e.g. `status.initial`.
    public var name: String
    /// What the step does, for people.
    public var title: String
    /// Whether the outcome was the expected one.
    public var passed: Bool
    /// What happened (the outcome, or what differed from the expectation).
    public var detail: String
    /// How long the step took, in milliseconds.
    public var milliseconds: Double
}

/// The demo's record of steps, printed as they finish.
public final class DemoTrace: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [DemoStep] = []
    private let echo: (@Sendable (DemoStep, Int) -> Void)?

    /// A trace that calls `echo` with each step as it finishes (and its 1-based number).
    public init(echo: (@Sendable (DemoStep, Int) -> Void)? = nil) {
        self.echo = echo
    }

    /// The steps so far.
    public var steps: [DemoStep] { lock.withLock { recorded } }

    /// Whether every step so far came out as expected.
    public var passed: Bool { steps.allSatisfy(\.passed) }

    /// Runs one step: `body` returns what happened, or throws ``DemoExpectation`` (or any
    /// error) when the outcome is not the expected one.
    @discardableResult
    public func step(_ name: String, _ title: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> String) async -> Bool {
        let start = ContinuousClock.now
        var passed = true
        var detail: String
        do {
            detail = try await body()
        } catch {
            passed = false
            detail = "\(error)"
        }
        let elapsed = ContinuousClock.now - start
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        let step = DemoStep(name: name, title: title, passed: passed, detail: detail, milliseconds: (milliseconds * 10).rounded() / 10)
        let number = lock.withLock {
            recorded.append(step)
            return recorded.count
        }
        echo?(step, number)
        return passed
    }

    /// The step as the readable trace prints it.
    public static func line(_ step: DemoStep, number: Int) -> String {
        let mark = step.passed ? "ok  " : "FAIL"
        let time = String(format: "%7.1f ms", step.milliseconds)
        return "\(mark) \(String(format: "%2d", number)). \(step.title)  [\(time)]\n          \(step.detail)"
    }

    /// The whole trace as JSON (for `--json`).
    public func json() throws -> Data {
        struct Report: Encodable {
            var passed: Bool
            var steps: [DemoStep]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(Report(passed: passed, steps: steps))
    }
}

/// An outcome other than the one the demo expects.
public struct DemoExpectation: Error, CustomStringConvertible {
    /// What was expected and what happened.
    public var description: String

    /// Creates the failure.
    public init(_ description: String) {
        self.description = description
    }
}

/// Fails the step with `message` unless `condition` holds.
func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw DemoExpectation(message()) }
}
