import Foundation

/// A setting from the process's environment, read as `pushprov serve` reads its own: a variable
/// set to an empty value (an env file's `PUSHPROV_KEY_FILE=`) counts as unset, so the default
/// applies rather than an empty path.
enum EnvironmentSetting {
    /// The value of `name`, or nil when it is unset or empty.
    static func value(_ name: String, in environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }
}
