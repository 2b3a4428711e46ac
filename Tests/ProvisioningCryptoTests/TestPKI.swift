import Crypto
import Foundation
import ProvisioningCrypto
import SwiftASN1
import X509
import _CryptoExtras

/// Builds Apple-shaped certificate chains with knobs for every way a chain can be wrong.
struct TestPKI {
    enum LeafKey { case p256, p384, rsa }
    enum Marker { case absent, critical, nonCritical, criticalWithValue([UInt8]) }

    struct Options {
        var leafKey: LeafKey = .p256
        var leafKeyUsage = KeyUsage(keyEncipherment: true, keyAgreement: true)
        var leafKeyUsageCritical = true
        var intermediateKeyP384 = false
        var leafMarker: Marker = .critical
        var intermediateMarker = true
        /// The intermediate's subject, also the leaf's issuer.
        var intermediateName = TestPKI.intermediateName
        /// The intermediate's key usage; nil for none stated.
        var intermediateKeyUsage: KeyUsage? = KeyUsage(keyCertSign: true, cRLSign: true)
        var notValidBefore = Date(timeIntervalSince1970: 1_600_000_000)
        var notValidAfter = Date(timeIntervalSince1970: 1_900_000_000)
    }

    static let rootName = try! DistinguishedName {
        CountryName("US")
        OrganizationName("Test Apple Inc.")
        CommonName("Test Root CA - G3")
    }
    static let intermediateName = try! DistinguishedName {
        CountryName("US")
        OrganizationName("Test Apple Inc.")
        CommonName(AppleIssuerEncryptionRules.intermediateCommonName)
    }
    static let leafName = try! DistinguishedName {
        CountryName("US")
        OrganizationName("Test Apple Inc.")
        CommonName("test-encipherment")
    }

    let rootKey = P384.Signing.PrivateKey()
    let root: Certificate
    let intermediateKey = P256.Signing.PrivateKey()

    init(rootName: DistinguishedName = rootName) throws {
        root = try Self.makeRoot(key: rootKey, name: rootName)
    }

    static func makeRoot(key: P384.Signing.PrivateKey, name: DistinguishedName = rootName) throws -> Certificate {
        try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date(timeIntervalSince1970: 1_400_000_000),
            notValidAfter: Date(timeIntervalSince1970: 2_200_000_000),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA384,
            extensions: Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true),
                try Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
            ]),
            issuerPrivateKey: .init(key)
        )
    }

    func intermediate(options: Options = Options(), signedBy issuerKey: P384.Signing.PrivateKey? = nil) throws -> Certificate {
        var extensions = [try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: 0), critical: true)]
        if let usage = options.intermediateKeyUsage {
            extensions.append(try Certificate.Extension(usage, critical: true))
        }
        if options.intermediateMarker {
            extensions.append(Certificate.Extension(oid: AppleIssuerEncryptionRules.intermediateMarkerOID, critical: false, value: [0x05, 0x00]))
        }
        return try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: options.intermediateKeyP384 ? .init(P384.Signing.PrivateKey().publicKey) : .init(intermediateKey.publicKey),
            notValidBefore: Date(timeIntervalSince1970: 1_400_000_000),
            notValidAfter: Date(timeIntervalSince1970: 2_100_000_000),
            issuer: root.subject,
            subject: options.intermediateName,
            signatureAlgorithm: .ecdsaWithSHA384,
            extensions: Certificate.Extensions(extensions),
            issuerPrivateKey: .init(issuerKey ?? rootKey)
        )
    }

    /// A leaf and, for P-256 leaves, its key-agreement private key.
    func leaf(options: Options = Options()) throws -> (certificate: Certificate, key: P256.KeyAgreement.PrivateKey?) {
        var extensions = [
            try Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true),
            try Certificate.Extension(options.leafKeyUsage, critical: options.leafKeyUsageCritical),
        ]
        switch options.leafMarker {
        case .absent: break
        case .critical: extensions.append(Certificate.Extension(oid: AppleIssuerEncryptionRules.leafMarkerOID, critical: true, value: [0x05, 0x00]))
        case .nonCritical: extensions.append(Certificate.Extension(oid: AppleIssuerEncryptionRules.leafMarkerOID, critical: false, value: [0x05, 0x00]))
        case .criticalWithValue(let value): extensions.append(Certificate.Extension(oid: AppleIssuerEncryptionRules.leafMarkerOID, critical: true, value: value[...]))
        }
        let publicKey: Certificate.PublicKey
        var agreementKey: P256.KeyAgreement.PrivateKey?
        switch options.leafKey {
        case .p256:
            let key = P256.KeyAgreement.PrivateKey()
            agreementKey = key
            publicKey = .init(try P256.Signing.PublicKey(rawRepresentation: key.publicKey.rawRepresentation))
        case .p384:
            publicKey = .init(P384.Signing.PrivateKey().publicKey)
        case .rsa:
            publicKey = .init(try _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey)
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: publicKey,
            notValidBefore: options.notValidBefore,
            notValidAfter: options.notValidAfter,
            issuer: options.intermediateName,
            subject: Self.leafName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions(extensions),
            issuerPrivateKey: .init(intermediateKey)
        )
        return (certificate, agreementKey)
    }

    /// `[leaf, intermediate]` as DER, the way Wallet hands them over.
    func chain(options: Options = Options()) throws -> [Data] {
        [try leaf(options: options).certificate.derData, try intermediate(options: options).derData]
    }

    /// A validator trusting only this PKI's root.
    func validator(validationTime: (@Sendable () -> Date)? = nil, cacheCapacity: Int = 16, intermediateNameCheck: AppleChainValidator.IntermediateNameCheck = .underApplesRoot) -> AppleChainValidator {
        AppleChainValidator(
            configuration: .init(trustAnchors: TrustAnchors(certificates: [root]), validationTime: validationTime, cacheCapacity: cacheCapacity, intermediateNameCheck: intermediateNameCheck)
        )
    }
}
