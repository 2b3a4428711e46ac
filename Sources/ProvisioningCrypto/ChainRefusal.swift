/// Why a certificate chain was refused, with a stable code and a message a person can act on.
public struct ChainRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine-readable reasons. The raw values are part of the API: they appear in
    /// server error responses and CLI output, and do not change.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// No certificates were supplied.
        case emptyChain = "empty_chain"
        /// More certificates than the configured bound.
        case tooManyCertificates = "too_many_certificates"
        /// A certificate is larger than the configured bound.
        case certificateTooLarge = "certificate_too_large"
        /// A certificate is not a DER-encoded X.509 certificate.
        case malformedCertificate = "malformed_certificate"
        /// The certificates are not listed leaf first, each followed by its issuer.
        case wrongOrder = "wrong_order"
        /// Only the leaf was supplied; the intermediate is missing.
        case incompleteChain = "incomplete_chain"
        /// The leaf is a CA certificate.
        case leafIsCertificateAuthority = "leaf_is_ca"
        /// The leaf's key is not an EC P-256 key.
        case leafKeyNotP256 = "leaf_key_not_p256"
        /// The leaf lacks keyEncipherment and keyAgreement.
        case leafKeyUsage = "leaf_key_usage"
        /// The leaf's key usage extension is not marked critical.
        case leafKeyUsageNotCritical = "leaf_key_usage_not_critical"
        /// The leaf lacks the Apple marker extension 1.2.840.113635.100.6.39.
        case leafMarkerMissing = "leaf_marker_missing"
        /// The leaf carries the marker extension but not as critical.
        case leafMarkerNotCritical = "leaf_marker_not_critical"
        /// The leaf's marker extension holds something other than an ASN.1 NULL.
        case leafMarkerValue = "leaf_marker_value"
        /// The intermediate lacks the Apple marker extension 1.2.840.113635.100.6.2.15.
        case intermediateMarkerMissing = "intermediate_marker_missing"
        /// The intermediate's key is not an EC P-256 key.
        case intermediateKeyNotP256 = "intermediate_key_not_p256"
        /// The intermediate is not a CA certificate.
        case intermediateNotCertificateAuthority = "intermediate_not_ca"
        /// The intermediate states a key usage without keyCertSign.
        case intermediateKeyUsage = "intermediate_key_usage"
        /// The intermediate is not named "Apple Worldwide Developer Relations CA - G2".
        case intermediateNameMismatch = "intermediate_name_mismatch"
        /// A certificate's signature does not verify with its issuer's key.
        case badSignature = "bad_signature"
        /// The chain does not end at a configured trust anchor.
        case untrustedRoot = "untrusted_root"
        /// The chain is not leaf, intermediate, trust anchor.
        case wrongChainLength = "wrong_chain_length"
        /// A certificate is expired at the validation time (only when validity is checked).
        case certificateExpired = "certificate_expired"
        /// A certificate is not yet valid at the validation time (only when validity is checked).
        case certificateNotYetValid = "certificate_not_yet_valid"
        /// swift-certificates' verifier refused a chain that passed every rule above.
        case verifierRefused = "verifier_refused"
    }

    /// The stable reason.
    public var code: Code
    /// What is wrong and, where possible, what to do about it.
    public var message: String

    /// Creates a refusal.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}
