import ArgumentParser
import Foundation
import TokenPlatform

/// `pushprov dev-token`: a cardholder JWT the embedded server accepts.
struct DevTokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-token",
        abstract: "Print a cardholder JWT (ES256) signed with the embedded run's development key."
    )

    @Option(help: "The user id (the JWT's sub).") var user: String
    @Option(name: .customLong("data-dir"), help: "Data directory (PUSHPROV_DATA_DIR; default ./.pushprov).") var dataDirectory: String?
    @Option(help: "Lifetime in seconds (1 to 86400).") var ttl: Int = 3600

    func run() throws {
        guard (1...86_400).contains(ttl) else { throw CLIError("--ttl must be from 1 to 86400 seconds") }
        guard !user.isEmpty, user.utf8.count <= 128 else { throw CLIError("--user must be 1 to 128 characters") }
        let directory = dataDirectory ?? ProcessInfo.processInfo.environment["PUSHPROV_DATA_DIR"] ?? "./.pushprov"
        let path = (directory as NSString).appendingPathComponent("secrets.json")
        guard FileManager.default.fileExists(atPath: path) else {
            throw CLIError("\(path) does not exist; start `pushprov serve` with this data directory once first")
        }
        let secrets: EmbeddedSecrets
        do { secrets = try EmbeddedSecrets.load(at: path) } catch { throw CLIError("\(error)") }
        print(try DevelopmentTokenIssuer(key: secrets.cardholderDevelopmentKey).token(userId: user, lifetime: TimeInterval(ttl), now: Date()))
    }
}
