import ArgumentParser
import Foundation
import ProvisioningCrypto
import X509

/// `pushprov crypto verify-chain`: Apple's issuer-encryption policy on certificate files.
struct VerifyChainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-chain",
        abstract: "Check certificates (leaf first) against Apple's issuer-encryption policy.",
        discussion: """
            Trusts Apple Root CA - G3 plus any --anchor. Prints "accepted" with the leaf's \
            fingerprint, or "refused" with a stable reason code and message. Exit status 0 \
            only when the chain is accepted.
            """
    )

    @Argument(help: ArgumentHelp("Certificate files, leaf first (PEM, possibly several per file, or DER).", valueName: "cert"))
    var certificates: [String]

    @Option(name: .customLong("anchor"), help: ArgumentHelp("An extra trust anchor (PEM or DER); repeatable.", valueName: "pem"))
    var anchors: [String] = []

    @Flag(name: .customLong("check-validity"), help: "Also require every certificate to be within its validity period now (Apple's policy does not).")
    var checkValidity = false

    func run() async throws {
        guard !certificates.isEmpty else { throw CLIError("name at least one certificate file, leaf first") }
        var der: [Data] = []
        for path in certificates {
            // A file that cannot be read is an error; one read that holds no certificate is
            // judged like any other refused chain, on standard output.
            let data = try InputFiles.read(path)
            do {
                der += try InputFiles.derCertificates(in: data, source: path)
            } catch let error as CLIError {
                print("refused: malformed_certificate: \(error.description)")
                throw ExitCode.failure
            }
        }
        var extra: [Certificate] = []
        for path in anchors { extra += try InputFiles.certificates(path) }
        var configuration = AppleChainValidator.Configuration(trustAnchors: TrustAnchors.apple.adding(extra))
        if checkValidity { configuration.validationTime = { Date() } }
        let validator = AppleChainValidator(configuration: configuration)
        switch await validator.validate(der) {
        case .accepted(let chain):
            print("accepted: \(chain.leafSubject)")
            print("  leaf fingerprint (sha256 of its signed body): \(chain.leafFingerprint)")
            // An extra anchor may carry Apple's root's name: say which certificate it is.
            let which = chain.isAnchoredAtApplesRoot ? "Apple's root" : "an extra --anchor, not Apple's root; sha256 \(chain.anchorFingerprint)"
            print("  anchored at: \(chain.anchorSubject) (\(which))")
        case .refused(let refusal):
            print("refused: \(refusal.code.rawValue): \(refusal.message)")
            throw ExitCode.failure
        }
    }
}
