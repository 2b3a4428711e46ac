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
    @Option(parsing: .unconditional, help: "Lifetime in seconds (1 to 86400).") var ttl: Int = 3600
    @Option(name: .customLong("jwt-issuer"), help: "The iss to sign (PUSHPROV_JWT_ISSUER), as given to `pushprov serve --jwt-issuer`.") var issuer: String?
    @Option(name: .customLong("jwt-audience"), help: "The aud to sign (PUSHPROV_JWT_AUDIENCE), as given to `pushprov serve --jwt-audience`.") var audience: String?
    @Option(name: .customLong("jwt-type"), help: "The header typ to sign (PUSHPROV_JWT_TYPE; default JWT), as given to `pushprov serve --jwt-type`.") var type: String?

    func run() throws {
        guard (1...86_400).contains(ttl) else { throw CLIError("--ttl must be from 1 to 86400 seconds") }
        // The server's own rule for user ids, so no token is made that it would refuse.
        guard InputRules.isUserId(user) else {
            throw CLIError("--user must be 1 to \(InputRules.maximumUserIdLength) bytes without control characters, line separators or bidirectional-text controls")
        }
        // Resolved as `pushprov serve` resolves them: the flag, then a non-empty variable.
        let env = { (name: String) in EnvironmentSetting.value(name) }
        let directory = dataDirectory ?? env("PUSHPROV_DATA_DIR") ?? "./.pushprov"
        try DataDirectoryCheck.check(directory)
        let path = (directory as NSString).appendingPathComponent("secrets.json")
        guard FileManager.default.fileExists(atPath: path) else {
            throw CLIError("\(path) does not exist; start `pushprov serve` with this data directory once first")
        }
        let secrets: EmbeddedSecrets
        do { secrets = try EmbeddedSecrets.load(at: path) } catch { throw CLIError("\(error)") }
        // The iss and aud `pushprov serve` checks when given them.
        let issuer = self.issuer.flatMap { $0.isEmpty ? nil : $0 } ?? env("PUSHPROV_JWT_ISSUER") ?? DevelopmentTokenIssuer.issuer
        let audience = self.audience.flatMap { $0.isEmpty ? nil : $0 } ?? env("PUSHPROV_JWT_AUDIENCE")
        let type = self.type.flatMap { $0.isEmpty ? nil : $0 } ?? env("PUSHPROV_JWT_TYPE") ?? "JWT"
        // A type `serve` would refuse to be configured with makes a token no server takes.
        do { try ServerSettings.checkJWTType(type) } catch { throw CLIError(error.message) }
        print(try DevelopmentTokenIssuer(key: secrets.cardholderDevelopmentKey, issuer: issuer, audience: audience, type: type).token(userId: user, lifetime: TimeInterval(ttl), now: Date()))
    }
}
