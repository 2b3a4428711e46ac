import ArgumentParser
import Crypto
import Foundation
@_spi(KnownAnswerVectors) import ProvisioningCrypto
import X509

/// `pushprov crypto seal`: ECC_V2-seal a plaintext for a leaf certificate.
struct SealCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract: "Seal a plaintext for an Apple encipherment leaf with ECC_V2.",
        discussion: """
            Prints encryptedData (ciphertext || tag) and the raw 65-byte ephemeralPublicKey as \
            uppercase hex. With --ephemeral-key the output is deterministic, which is how an \
            issuer reproduces Apple's known-answer vectors; never use a fixed key in production.
            """
    )

    @Option(name: .long, help: ArgumentHelp("The recipient leaf certificate (PEM or DER).", valueName: "cert.pem|cert.der"))
    var leaf: String

    @Option(name: .long, help: ArgumentHelp("The file whose bytes are sealed, as is.", valueName: "file"))
    var plaintext: String

    @Option(name: .customLong("ephemeral-key"), help: ArgumentHelp("A fixed 32-byte ephemeral private key in hex (vectors only).", valueName: "hex"))
    var ephemeralKey: String?

    @Flag(name: .long, help: "Also print both values as base64, as the signed-cards response carries them.")
    var base64 = false

    func run() throws {
        let certificates = try InputFiles.certificates(leaf)
        guard let leafCertificate = certificates.first else { throw CLIError("\(leaf): holds no certificate") }
        // A chain file, or a CA's certificate, would be sealed for a key Apple never decrypts with.
        guard certificates.count == 1 else {
            throw CLIError("\(leaf): holds \(certificates.count) certificates; give the leaf alone (the first of Wallet's certificates)")
        }
        guard let signingKey = P256.Signing.PublicKey(leafCertificate.publicKey),
            let recipient = try? P256.KeyAgreement.PublicKey(rawRepresentation: signingKey.rawRepresentation)
        else {
            throw CLIError("\(leaf): the certificate's key is not EC P-256; ECC_V2 needs Apple's P-256 encipherment leaf")
        }
        if case .isCertificateAuthority = try? leafCertificate.extensions.basicConstraints {
            throw CLIError("\(leaf): is a certificate authority's certificate (\(leafCertificate.subject)), not a leaf; give Apple's encipherment leaf")
        }
        let message = try InputFiles.read(plaintext)
        let sealed: SealedPassData
        if let ephemeralKey {
            guard let raw = Data(hex: ephemeralKey), raw.count == 32 else {
                throw CLIError("--ephemeral-key must be 64 hex digits (a 32-byte P-256 private key)")
            }
            guard let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: raw) else {
                throw CLIError("--ephemeral-key is not a valid P-256 private key")
            }
            sealed = try ECCV2.seal(message, for: recipient, ephemeralKey: key)
        } else {
            sealed = try ECCV2.seal(message, for: recipient)
        }
        print("encryptedData: \(sealed.encryptedData.lowercaseHex.uppercased())")
        print("ephemeralPublicKey: \(sealed.ephemeralPublicKey.lowercaseHex.uppercased())")
        if base64 {
            print("encryptedData (base64): \(sealed.encryptedData.base64EncodedString())")
            print("ephemeralPublicKey (base64): \(sealed.ephemeralPublicKey.base64EncodedString())")
        }
    }
}
