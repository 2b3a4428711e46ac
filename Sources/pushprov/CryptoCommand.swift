import ArgumentParser

/// `pushprov crypto …`: check a back end against Apple's vectors and inspect certificate chains.
struct CryptoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crypto",
        abstract: "ECC_V2 sealing and Apple certificate-chain checks.",
        subcommands: [SealCommand.self, VerifyChainCommand.self, CryptoThroughputCommand.self]
    )
}
