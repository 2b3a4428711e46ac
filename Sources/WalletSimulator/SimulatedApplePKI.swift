import Crypto
import Foundation
import ProvisioningCrypto
import SwiftASN1
import X509

/// An Apple-shaped certificate hierarchy made at start: a P-384 root, a P-256 intermediate
/// carrying Apple's WWDR marker 1.2.840.113635.100.6.2.15, and a P-256 encipherment leaf with
/// the critical marker 1.2.840.113635.100.6.39 and keyEncipherment + keyAgreement.
///
/// It has the same shape as Apple's real chain, so TMP's Apple policy runs unchanged against
/// it — but only when its root is configured as an extra trust anchor. The leaf's private
/// key lets the simulated Apple side open what TMP seals.
public struct SimulatedApplePKI: Sendable {
    /// The root; configure it as a trust anchor (never in production).
    public let root: Certificate
    /// The intermediate.
    public let intermediate: Certificate
    /// The encipherment leaf.
    public let leaf: Certificate
    /// The leaf's key, for opening sealed pass data.
    public let leafPrivateKey: P256.KeyAgreement.PrivateKey

    /// Makes a fresh hierarchy valid from an hour before `now` for two years.
    public init(now: Date = Date()) throws {
        let rootKey = P384.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        let leafKey = P256.KeyAgreement.PrivateKey()
        let start = now.addingTimeInterval(-3600)
        let rootName = try DistinguishedName {
            CountryName("US")
            OrganizationName("PushProvisioning Simulator")
            CommonName("Simulated Apple Root CA - G3")
        }
        let intermediateName = try DistinguishedName {
            CountryName("US")
            OrganizationName("PushProvisioning Simulator")
            // Apple's intermediate's name, as in a real chain (the name is required under
            // Apple's root only; this root is the simulator's).
            CommonName(AppleIssuerEncryptionRules.intermediateCommonName)
        }
        let leafName = try DistinguishedName {
            CountryName("US")
            OrganizationName("PushProvisioning Simulator")
            CommonName("simulated-ecc-crypto-services-encipherment")
        }
        root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey),
            notValidBefore: start, notValidAfter: start.addingTimeInterval(10 * 365 * 86_400),
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA384,
            extensions: Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true),
                try Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
            ]),
            issuerPrivateKey: .init(rootKey)
        )
        intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey),
            notValidBefore: start, notValidAfter: start.addingTimeInterval(5 * 365 * 86_400),
            issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA384,
            extensions: Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: 0), critical: true),
                try Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
                Certificate.Extension(oid: AppleIssuerEncryptionRules.intermediateMarkerOID, critical: false, value: [0x05, 0x00]),
            ]),
            issuerPrivateKey: .init(rootKey)
        )
        leaf = try Certificate(
            version: .v3, serialNumber: .init(),
            publicKey: .init(try P256.Signing.PublicKey(rawRepresentation: leafKey.publicKey.rawRepresentation)),
            notValidBefore: start, notValidAfter: start.addingTimeInterval(2 * 365 * 86_400),
            issuer: intermediateName, subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true),
                try Certificate.Extension(KeyUsage(keyEncipherment: true, keyAgreement: true), critical: true),
                Certificate.Extension(oid: AppleIssuerEncryptionRules.leafMarkerOID, critical: true, value: [0x05, 0x00]),
            ]),
            issuerPrivateKey: .init(intermediateKey)
        )
        leafPrivateKey = leafKey
    }

    /// What Wallet hands the app: leaf and intermediate, DER, leaf first.
    public var walletCertificates: [Data] { [leaf.derData, intermediate.derData] }

    /// The root as PEM, for `--trust-anchor`.
    public func rootPEM() throws -> String { try root.serializeAsPEM().pemString }
}
