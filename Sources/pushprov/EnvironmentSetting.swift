import Foundation
import TokenPlatform

/// A setting from the process's environment, read as `pushprov serve` reads its own: a variable
/// set to an empty value (an env file's `PUSHPROV_KEY_FILE=`) counts as unset, so the default
/// applies rather than an empty path.
enum EnvironmentSetting {
    /// The value of `name`, or nil when it is unset or empty.
    static func value(_ name: String, in environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// The data directory check `pushprov serve` makes, for the commands that read a file of the
/// data directory's (the key file, `secrets.json`): one every user can write is refused, since
/// anyone could have put their own file there; one its group can write, or another user owns,
/// is warned of on standard error. A directory that does not exist is left to the command.
enum DataDirectoryCheck {
    /// The refusal of an empty `--data-dir`.
    static let emptyRefusal = CLIError("--data-dir must not be empty (it would be the current directory, unchecked); name the directory, e.g. --data-dir .")

    static func check(_ directory: String) throws {
        // An empty path would be the current directory, taken unchecked.
        guard !directory.isEmpty else { throw emptyRefusal }
        guard FileManager.default.fileExists(atPath: directory) else { return }
        var notices: [String] = []
        do {
            try ServerSettings.checkDataDirectory(directory, notices: &notices)
        } catch {
            throw CLIError(error.message)
        }
        for notice in notices { FileHandle.standardError.write(Data((notice + "\n").utf8)) }
    }
}
