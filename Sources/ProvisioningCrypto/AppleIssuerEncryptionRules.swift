import Crypto
import _CryptoExtras
import SwiftASN1
import X509

/// Apple's "issuer encryption" rules for the two certificates below the root, as pure checks.
///
/// These are the rules Apple's own Security framework applies to the encipherment chain
/// Wallet hands an issuer app. ``AppleChainValidator`` runs them on the supplied order to
/// report a precise reason, and ``AppleIssuerEncryptionPolicy`` runs the same functions inside
/// swift-certificates' `Verifier` on whatever chain it builds, so the two cannot disagree.
public enum AppleIssuerEncryptionRules {
    /// Marker extension every Apple encipherment leaf carries, critical, with a NULL value.
    public static let leafMarkerOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 39]
    /// Marker extension of the Apple Worldwide Developer Relations intermediate.
    public static let intermediateMarkerOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 15]
    /// The common name Apple's policy requires of the intermediate (the leaf's issuer).
    public static let intermediateCommonName = "Apple Worldwide Developer Relations CA - G2"

    /// Checks the leaf: end entity, P-256 key, keyEncipherment + keyAgreement in a critical
    /// key usage, critical marker.
    public static func checkLeaf(_ leaf: Certificate) -> ChainRefusal? {
        if case .isCertificateAuthority = try? leaf.extensions.basicConstraints {
            return ChainRefusal(.leafIsCertificateAuthority, "the first certificate is a CA certificate; list the encipherment leaf first")
        }
        guard P256.Signing.PublicKey(leaf.publicKey) != nil else {
            return ChainRefusal(.leafKeyNotP256, "the leaf's key is \(keyDescription(leaf.publicKey)); Apple's encipherment leaf has an EC P-256 key")
        }
        guard let usage = try? leaf.extensions.keyUsage, usage.keyEncipherment, usage.keyAgreement else {
            return ChainRefusal(.leafKeyUsage, "the leaf's key usage must include keyEncipherment and keyAgreement")
        }
        guard leaf.extensions[oid: .X509ExtensionID.keyUsage]?.critical == true else {
            return ChainRefusal(.leafKeyUsageNotCritical, "the leaf's key usage extension must be critical")
        }
        guard let marker = leaf.extensions[oid: leafMarkerOID] else {
            return ChainRefusal(.leafMarkerMissing, "the leaf lacks Apple's encipherment marker extension \(leafMarkerOID)")
        }
        guard marker.critical else {
            return ChainRefusal(.leafMarkerNotCritical, "the leaf's marker extension \(leafMarkerOID) must be critical")
        }
        // Apple's leaf carries the marker as an ASN.1 NULL; any other value is not Apple's marker.
        guard marker.value.elementsEqual([0x05, 0x00]) else {
            return ChainRefusal(.leafMarkerValue, "the leaf's marker extension \(leafMarkerOID) must hold an ASN.1 NULL")
        }
        return nil
    }

    /// Checks the intermediate: a CA that may sign certificates (RFC 5280: `keyCertSign` when
    /// it states a key usage), carrying Apple's WWDR marker extension, with a P-256 key. (Its
    /// name is checked apart, by ``checkIntermediateName(_:)``, for chains under Apple's root.)
    public static func checkIntermediate(_ intermediate: Certificate) -> ChainRefusal? {
        guard case .isCertificateAuthority = try? intermediate.extensions.basicConstraints else {
            return ChainRefusal(.intermediateNotCertificateAuthority, "the second certificate is not a CA certificate; it must be the intermediate that issued the leaf")
        }
        if intermediate.extensions[oid: .X509ExtensionID.keyUsage] != nil {
            guard let usage = try? intermediate.extensions.keyUsage, usage.keyCertSign else {
                return ChainRefusal(.intermediateKeyUsage, "the intermediate's key usage does not include keyCertSign, so it may not sign the leaf")
            }
        }
        guard intermediate.extensions[oid: intermediateMarkerOID] != nil else {
            return ChainRefusal(.intermediateMarkerMissing, "the intermediate lacks Apple's marker extension \(intermediateMarkerOID)")
        }
        guard P256.Signing.PublicKey(intermediate.publicKey) != nil else {
            return ChainRefusal(.intermediateKeyNotP256, "the intermediate's key is \(keyDescription(intermediate.publicKey)); Apple's Worldwide Developer Relations CA - G2 has an EC P-256 key")
        }
        return nil
    }

    /// Checks the intermediate's name: exactly one common name, "Apple Worldwide Developer
    /// Relations CA - G2", as Apple's policy requires of the leaf's issuer.
    public static func checkIntermediateName(_ intermediate: Certificate) -> ChainRefusal? {
        let commonNames = intermediate.subject.flatMap { $0 }.filter { $0.type == .RDNAttributeType.commonName }.map { String($0.value) }
        guard commonNames.count == 1, commonNames[0] == intermediateCommonName else {
            return ChainRefusal(.intermediateNameMismatch, "the intermediate's common name must be \"\(intermediateCommonName)\", as Apple's policy requires of a chain under Apple Root CA - G3")
        }
        return nil
    }

    /// A readable name for a certificate's key type.
    static func keyDescription(_ key: Certificate.PublicKey) -> String {
        if P384.Signing.PublicKey(key) != nil { return "EC P-384" }
        if P521.Signing.PublicKey(key) != nil { return "EC P-521" }
        if _RSA.Signing.PublicKey(key) != nil { return "RSA" }
        if Curve25519.Signing.PublicKey(key) != nil { return "Ed25519" }
        return "of an unsupported type"
    }
}
