import ArgumentParser

/// The `pushprov` command: the TMP server, the demo and the cryptography tools in one binary.
@main
struct PushProv: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushprov",
        abstract: "Apple Pay push provisioning for card issuers: TMP server, demo and crypto tools.",
        subcommands: [DemoCommand.self, ServeCommand.self, MigrateCommand.self, PruneCommand.self, VaultCommand.self, DevTokenCommand.self, CryptoCommand.self, CardArtCommand.self]
    )
}
