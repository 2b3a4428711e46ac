import ArgumentParser
import Foundation
import ProvisioningCrypto
import TokenPlatform

/// `pushprov vault`: the PAN vault's upkeep.
struct VaultCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "PAN vault upkeep: encrypt stored card numbers again under the current key.",
        subcommands: [VaultReencryptCommand.self]
    )
}

/// `pushprov vault reencrypt`: puts every stored PAN under the key file's current PAN key.
struct VaultReencryptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reencrypt",
        abstract: "Encrypt every stored card number that is not under the key file's current PAN key again under it.",
        discussion: """
            The last step of a PAN key rotation: once every server runs with a key file that \
            holds the new key as current and the old one beside it, run this against their \
            database; when it reports nothing left under other keys, the old key can leave the \
            key file. It may run while the servers serve (short transactions of --batch-size \
            cards) and can be run again after a failure. --dry-run changes nothing: it counts the \
            cards and checks each one as the run would (its key, the lookup key). Exit status: \
            0 when no card is left under another key (or, for --dry-run, when the check passed), \
            3 when the run ended with cards still under other keys (run it again), 1 on failure.
            """
    )

    @OptionGroup var databaseOptions: DatabaseOptions
    @Option(name: .customLong("data-dir"), help: "Data directory holding the default SQLite file and key file (PUSHPROV_DATA_DIR; default ./.pushprov).") var dataDirectory: String?
    @Option(name: .customLong("key-file"), help: "The key file the servers use (PUSHPROV_KEY_FILE; default <data-dir>/keys.json). Never created here.") var keyFile: String?
    @Option(name: .customLong("batch-size"), parsing: .unconditional, help: "Cards per transaction (1 to 10000).") var batchSize: Int = VaultReencryption.defaultBatchSize
    @Flag(name: .customLong("dry-run"), help: "Count and check the cards under other keys, change nothing.") var dryRun = false

    func run() async throws {
        guard (1...10_000).contains(batchSize) else { throw CLIError("--batch-size must be from 1 to 10000 (got \(batchSize))") }
        // It decrypts every stored card number: as `serve --production`, no core file should
        // it crash, and no other process of the user may attach to it or read its memory.
        for notice in ProcessHardening.withholdMemoryFromDumps(production: true) { print(notice) }
        // As `pushprov serve` reads them: the flag, then a non-empty variable.
        let directory = dataDirectory ?? EnvironmentSetting.value("PUSHPROV_DATA_DIR") ?? ".pushprov"
        let configuredKeyFile = keyFile ?? EnvironmentSetting.value("PUSHPROV_KEY_FILE")
        // The key file taken from the data directory: the directory is checked as `serve` checks it.
        if configuredKeyFile == nil { try DataDirectoryCheck.check(directory) }
        let path = configuredKeyFile ?? (directory as NSString).appendingPathComponent("keys.json")
        let keys: LocalKeys
        do {
            keys = try LocalKeyFile.load(at: path)
        } catch {
            throw CLIError("\(error)")
        }
        let vault = PANVault(keys: keys.panVault)
        let current = keys.panVault.currentEncryptionKeyID
        // The schema must be current: this never migrates.
        let (database, store, _) = try await databaseOptions.openStore(dataDirectory: dataDirectory, migrate: false)
        // Said first: a run on the wrong database (a setting forgotten) must not pass for done.
        print("database \(database)")
        let reencryption = VaultReencryption(store: store, vault: vault, batchSize: batchSize)
        var done = VaultReencryption.Totals()
        do {
            // A dry run reads and checks every card as the run would, so a wrong key file
            // stops it as it would stop the run.
            let pending = try await dryRun ? reencryption.check() : reencryption.count()
            if dryRun || pending == 0 {
                print("\(Self.cards(pending)) under keys other than the current key \(current)\(dryRun && pending > 0 ? " would be encrypted again" : "")")
                await store.close()
                return
            }
            print("encrypting \(Self.cards(pending)) again under key \(current)")
            fflush(nil)
            let totals = try await reencryption.run { totals in
                // Progress on long runs, every 10,000 cards, shown at once even through a pipe.
                let seen = totals.reencrypted + totals.changedMeanwhile
                let seenBefore = done.reencrypted + done.changedMeanwhile
                if seen / 10_000 > seenBefore / 10_000 {
                    print("\(Self.cards(totals.reencrypted)) encrypted again so far")
                    fflush(nil)
                }
                done = totals
            }
            let left = try await reencryption.count()
            print("encrypted \(Self.cards(totals.reencrypted)) again under key \(current)\(totals.changedMeanwhile > 0 ? "; \(Self.cards(totals.changedMeanwhile)) changed meanwhile and were left as stored" : "")")
            print(left == 0 ? "no card is left under another key: keys other than \(current) can leave the key file once every server has restarted with it" : "\(Self.cards(left)) still under other keys (stored meanwhile by a server with an older key file?): run it again")
            if left > 0 {
                // A script that removes the old key when this succeeds must not take this for done.
                await store.close()
                throw ExitCode(Self.cardsLeftStatus)
            }
        } catch let exit as ExitCode {
            throw exit
        } catch {
            await store.close()
            let reason = (error as? VaultReencryption.Failure)?.message ?? DatabaseConfiguration.reason(error)
            if dryRun { throw CLIError("the dry run found what would stop the re-encryption (nothing changed): \(reason)") }
            throw CLIError("re-encryption stopped (\(done.reencrypted == 0 ? "nothing changed" : "\(Self.cards(done.reencrypted)) encrypted again so far"); run it again to go on): \(reason)")
        }
        await store.close()
    }

    /// The exit status of a run that ended with cards still under other keys (stored meanwhile
    /// by a server with an older key file): the old key must not leave the key file yet.
    static let cardsLeftStatus: Int32 = 3

    /// "1 card", "5 cards".
    static func cards(_ count: Int) -> String { count == 1 ? "1 card" : "\(count) cards" }
}
