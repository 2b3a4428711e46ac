import ArgumentParser
import Foundation
import ProvisioningCrypto
import ProvisioningModels

/// `pushprov crypto throughput`: the crypto-only rate of a `signed-cards` call, as the
/// baseline a server load test is compared with.
///
/// Each operation is what the server does per call apart from HTTP and storage: validate the
/// chain (cached after the first call, as in the server), decrypt the stored card number from
/// the PAN vault, build the pass-data payload, seal it with a fresh ephemeral key and issue
/// activation data.
struct CryptoThroughputCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "throughput",
        abstract: "Measure the crypto-only rate of signed-cards (chain check, PAN decryption, seal, activation data)."
    )

    @Argument(help: ArgumentHelp("Certificate files, leaf first (PEM or DER), e.g. Apple's production chain.", valueName: "cert"))
    var certificates: [String]

    // `.unconditional`: a negative number is taken as the value (and refused as out of
    // range), not mistaken for an option and reported as a missing value.
    @Option(parsing: .unconditional, help: "How long to measure, in seconds (more than 0, at most 600).") var seconds: Double = 10
    @Option(parsing: .unconditional, help: "Concurrent workers, 1 to 256 (the default is the number of cores).") var workers: Int = ProcessInfo.processInfo.activeProcessorCount

    func run() async throws {
        guard seconds > 0, seconds <= 600, workers >= 1, workers <= 256 else { throw CLIError("--seconds must be in (0, 600] and --workers in 1...256") }
        let der = try certificates.flatMap { try InputFiles.derCertificates($0) }
        let validator = AppleChainValidator()
        if case .refused(let refusal) = await validator.validate(der) {
            throw CLIError("the certificates are not an accepted Apple chain: \(refusal.code.rawValue): \(refusal.message)")
        }
        let issuer = ActivationDataIssuer(signingKey: .generate())
        let vault = PANVault(keys: .generate())
        let stored = try vault.encrypt(PrimaryAccountNumber("4111111111111111"), cardID: "card-bench").serialized
        let expiration = try CardExpiration("12/29")
        let cpuBefore = Self.processCPUSeconds()
        let deadline = ContinuousClock.now + .seconds(seconds)
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    var count = 0
                    // Wallet's nonce arrives in the request, so the server draws nothing for
                    // it: each worker draws 32 bytes once and numbers them per operation
                    // (drawing them each time would time four system calls the server never
                    // makes, and understate the crypto-only rate).
                    var random = SystemRandomNumberGenerator()
                    var nonce = withUnsafeBytes(of: (random.next(), random.next(), random.next(), random.next()) as (UInt64, UInt64, UInt64, UInt64)) { Data($0) }
                    while ContinuousClock.now < deadline {
                        guard let chain = await validator.validate(der).acceptedChain else { throw CLIError("chain refused during measurement") }
                        nonce.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(count), as: UInt64.self) }
                        guard let encrypted = EncryptedPAN(serialized: stored) else { throw CLIError("stored PAN unreadable") }
                        let pan = try vault.decrypt(encrypted, cardID: "card-bench")
                        let payload = try PassDataPayload(primaryAccountNumber: pan, expiration: expiration, name: "Jane Appleseed", nonce: nonce, nonceSignature: nonce)
                        _ = try ECCV2.seal(payload.jsonData(), for: chain.leafPublicKey)
                        _ = try issuer.issue(panUniqueReference: "PUR-bench", nonce: nonce, deviceType: .phone, now: Date())
                        count += 1
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        let cpu = Self.processCPUSeconds() - cpuBefore
        guard total > 0 else { throw CLIError("no operation finished within --seconds \(seconds); measure for longer (10 s gives a steady figure)") }
        print(String(format: "crypto-only signed-cards: %.0f ops/s (%d ops in %.1f s on %d workers); CPU: %.3f ms per op", Double(total) / seconds, total, seconds, workers, cpu * 1000 / Double(max(total, 1))))
    }

    /// User + system CPU time of this process so far, in seconds.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        #if os(Linux)
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
