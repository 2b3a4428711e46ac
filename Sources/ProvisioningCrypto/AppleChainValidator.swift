import Crypto
import Foundation
@_spi(DisableValidityCheck) import X509

/// Validates the certificates Wallet hands an issuer app against Apple's issuer-encryption
/// policy and yields the leaf key to seal for.
///
/// Steps, each with its own refusal code: bounds on count and size, DER parsing, order
/// (leaf first, each certificate followed by its issuer), the leaf and intermediate rules of
/// ``AppleIssuerEncryptionRules``, then swift-certificates' `Verifier` — RFC 5280 basics plus
/// ``AppleIssuerEncryptionPolicy`` — builds and signature-checks the chain to a trust anchor.
/// When the verifier finds no chain, the supplied links and the anchor are re-checked one
/// by one to name the broken signature or the untrusted root.
///
/// Accepted chains are remembered in a bounded cache keyed by their exact bytes, so a chain
/// seen before costs one dictionary lookup. Refusals are not cached.
public final class AppleChainValidator: Sendable {
    /// Limits and options.
    public struct Configuration: Sendable {
        /// The roots a chain may end at. Default: Apple Root CA - G3 only.
        public var trustAnchors: TrustAnchors
        /// The most certificates accepted in one request (Apple sends two or three).
        public var maximumCertificateCount: Int
        /// The largest single certificate accepted, in bytes (Apple's are under 2 KB).
        public var maximumCertificateSize: Int
        /// When set, every certificate must be within its validity period at the time this
        /// returns. Nil (the default) follows Apple's policy: no validity-period check.
        public var validationTime: (@Sendable () -> Date)?
        /// How many accepted chains to remember; 0 disables the cache.
        public var cacheCapacity: Int
        /// Which chains must have Apple's intermediate by name (``IntermediateNameCheck``).
        public var intermediateNameCheck: IntermediateNameCheck

        /// Creates a configuration; the defaults are the production ones.
        public init(
            trustAnchors: TrustAnchors = .apple,
            maximumCertificateCount: Int = 10,
            maximumCertificateSize: Int = 16 * 1024,
            validationTime: (@Sendable () -> Date)? = nil,
            cacheCapacity: Int = 1024,
            intermediateNameCheck: IntermediateNameCheck = .underApplesRoot
        ) {
            self.trustAnchors = trustAnchors
            self.maximumCertificateCount = maximumCertificateCount
            self.maximumCertificateSize = maximumCertificateSize
            self.validationTime = validationTime
            self.cacheCapacity = cacheCapacity
            self.intermediateNameCheck = intermediateNameCheck
        }
    }

    /// Which chains must name their intermediate "Apple Worldwide Developer Relations CA - G2",
    /// as Apple's own policy requires of chains under its production root.
    public enum IntermediateNameCheck: Sendable, Hashable {
        /// Chains that end at Apple Root CA - G3 (the default). A chain under another configured
        /// anchor — Apple's test environment's, whose intermediate has another name, or a
        /// simulator's — is not held to Apple's production name.
        case underApplesRoot
        /// Every chain, whatever its anchor.
        case everyAnchor
    }

    /// The configuration this validator was made with.
    public let configuration: Configuration
    private let anchorStore: CertificateStore
    private let cache: AcceptedChainCache

    /// Creates a validator.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.anchorStore = CertificateStore(configuration.trustAnchors.certificates)
        self.cache = AcceptedChainCache(capacity: configuration.cacheCapacity)
    }

    /// The accepted chains remembered, and how many validations were answered from them
    /// (each still checked against the clock).
    public var cacheStatistics: (chains: Int, hits: Int) { cache.statistics }

    /// Validates DER certificates, leaf first, with or without the root.
    public func validate(_ certificates: [Data]) async -> ChainVerdict {
        if let refusal = checkBounds(certificates) { return .refused(refusal) }
        if let cached = cache[certificates] {
            if let refusal = checkValidity(from: cached.validFrom, until: cached.validUntil) { return .refused(refusal) }
            return .accepted(cached)
        }
        let verdict = await validateUncached(certificates)
        if case .accepted(let chain) = verdict { cache[certificates] = chain }
        return verdict
    }

    private func checkBounds(_ certificates: [Data]) -> ChainRefusal? {
        if certificates.isEmpty {
            return ChainRefusal(.emptyChain, "no certificates were supplied; send the certificates Wallet passed to the app, leaf first")
        }
        if certificates.count > configuration.maximumCertificateCount {
            return ChainRefusal(.tooManyCertificates, "\(certificates.count) certificates supplied; at most \(configuration.maximumCertificateCount) are accepted")
        }
        if let index = certificates.firstIndex(where: { $0.count > configuration.maximumCertificateSize }) {
            return ChainRefusal(.certificateTooLarge, "certificate \(index + 1) is \(certificates[index].count) bytes; at most \(configuration.maximumCertificateSize) are accepted")
        }
        return nil
    }

    private func validateUncached(_ derCertificates: [Data]) async -> ChainVerdict {
        var certificates: [Certificate] = []
        for (index, der) in derCertificates.enumerated() {
            guard let certificate = try? Certificate(derEncoded: Array(der)) else {
                return .refused(ChainRefusal(.malformedCertificate, "certificate \(index + 1) is not a DER-encoded X.509 certificate"))
            }
            certificates.append(certificate)
        }
        let leaf = certificates[0]
        for index in certificates.indices.dropLast() where certificates[index].issuer != certificates[index + 1].subject {
            return .refused(ChainRefusal(.wrongOrder, "certificate \(index + 2) did not issue certificate \(index + 1); list the certificates leaf first, each followed by its issuer"))
        }
        if let refusal = AppleIssuerEncryptionRules.checkLeaf(leaf) {
            // A CA first in the list is nearly always an order mistake, and says so.
            if refusal.code == .leafIsCertificateAuthority, certificates.count > 1 {
                return .refused(ChainRefusal(.wrongOrder, "the first certificate is a CA certificate; list the encipherment leaf first, then its issuer"))
            }
            return .refused(refusal)
        }
        guard certificates.count >= 2 else {
            return .refused(ChainRefusal(.incompleteChain, "only the leaf was supplied; Wallet also supplies the intermediate that issued it — send every certificate Wallet passed"))
        }
        if let refusal = AppleIssuerEncryptionRules.checkIntermediate(certificates[1]) { return .refused(refusal) }
        // Wallet sends the leaf and the intermediate; the root may follow, and must then be a
        // trust anchor itself, byte for byte. Anything more, or a look-alike root, is refused
        // rather than ignored by path building: so few lists are ever accepted, and the
        // cache of accepted chains holds at most eight variants of one chain (with or without
        // the root; each of the two signatures in either of ECDSA's valid forms, s or n − s),
        // each verified in full first.
        if certificates.count > 3 {
            return .refused(ChainRefusal(.wrongChainLength, "the chain must be leaf, intermediate and at most the root; \(certificates.count) certificates were supplied"))
        }
        if certificates.count == 3, !configuration.trustAnchors.certificates.contains(certificates[2]) {
            let top = certificates[2]
            let sameName = configuration.trustAnchors.certificates.contains { $0.subject == top.subject }
            return .refused(ChainRefusal(
                .untrustedRoot,
                sameName
                    ? "certificate 3 has the name of trust anchor \"\(top.subject)\" but is a different certificate"
                    : "certificate 3, \"\(top.subject)\", is not a trust anchor; send the leaf and the intermediate, or those and the root"
            ))
        }

        var verifier = Verifier(rootCertificates: anchorStore) {
            RFC5280Policy.withValidityCheckDisabled()
            AppleIssuerEncryptionPolicy()
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore(certificates.dropFirst()))
        guard case .validCertificate(let chain) = result else {
            return .refused(diagnoseUnverifiedChain(certificates, result: result))
        }
        let chainCertificates = Array(chain)
        let validFrom = chainCertificates.map(\.notValidBefore).max()!
        let validUntil = chainCertificates.map(\.notValidAfter).min()!
        if let refusal = checkValidity(of: chainCertificates) { return .refused(refusal) }
        let anchorFingerprint = chainCertificates.last!.sha256Fingerprint
        if configuration.intermediateNameCheck == .everyAnchor || anchorFingerprint == TrustAnchors.appleRootCAG3Fingerprint,
            let refusal = AppleIssuerEncryptionRules.checkIntermediateName(certificates[1])
        {
            return .refused(refusal)
        }
        // The leaf passed checkLeaf, so its key is P-256.
        let signingKey = P256.Signing.PublicKey(leaf.publicKey)!
        let leafKey = try! P256.KeyAgreement.PublicKey(rawRepresentation: signingKey.rawRepresentation)
        return .accepted(
            AcceptedChain(
                leafPublicKey: leafKey,
                // The signed body, not the whole DER: an ECDSA signature has two valid forms,
                // (r, s) and (r, n − s), so a caller could send one leaf under two DER hashes.
                leafFingerprint: Data(SHA256.hash(data: leaf.tbsCertificateBytes)).lowercaseHex,
                leafSubject: leaf.subject.description,
                anchorSubject: chainCertificates.last!.subject.description,
                anchorFingerprint: anchorFingerprint,
                validUntil: validUntil,
                validFrom: validFrom
            )
        )
    }

    /// Names what broke when the verifier found no chain: a supplied link whose signature
    /// fails, or a top certificate that no anchor vouches for.
    private func diagnoseUnverifiedChain(_ certificates: [Certificate], result: CertificateValidationResult) -> ChainRefusal {
        for index in certificates.indices.dropLast() {
            let child = certificates[index]
            guard certificates[index + 1].publicKey.isValidSignature(child.signature, for: child) else {
                return ChainRefusal(.badSignature, "the signature of certificate \(index + 1) does not verify with the key of certificate \(index + 2)")
            }
        }
        let anchors = configuration.trustAnchors.certificates
        let top = certificates[certificates.count - 1]
        let topIsSelfIssued = top.subject == top.issuer
        if topIsSelfIssued, !anchors.contains(top) {
            let sameName = anchors.contains { $0.subject == top.subject }
            return ChainRefusal(
                .untrustedRoot,
                sameName
                    ? "certificate \(certificates.count) has the name of trust anchor \"\(top.subject)\" but is a different certificate"
                    : "the chain ends at \"\(top.subject)\", which is not a trust anchor"
            )
        }
        if !topIsSelfIssued {
            let namedAnchors = anchors.filter { $0.subject == top.issuer }
            if namedAnchors.isEmpty {
                return ChainRefusal(.untrustedRoot, "certificate \(certificates.count) was issued by \"\(top.issuer)\", which is not a trust anchor")
            }
            if !namedAnchors.contains(where: { $0.publicKey.isValidSignature(top.signature, for: top) }) {
                return ChainRefusal(.untrustedRoot, "certificate \(certificates.count) names trust anchor \"\(top.issuer)\" as issuer but was not signed by its key")
            }
        }
        if certificates.count + (topIsSelfIssued ? 0 : 1) != 3 {
            return ChainRefusal(.wrongChainLength, "the chain must be leaf, intermediate, root; this one has \(certificates.count + (topIsSelfIssued ? 0 : 1)) certificates")
        }
        let reasons = result.policyFailures.map(\.policyFailureReason.description)
        return ChainRefusal(.verifierRefused, "the chain failed certificate path validation" + (reasons.isEmpty ? "" : ": " + reasons.joined(separator: "; ")))
    }

    private func checkValidity(of chain: [Certificate]) -> ChainRefusal? {
        guard let now = configuration.validationTime?() else { return nil }
        for (index, certificate) in chain.enumerated() {
            if now < certificate.notValidBefore {
                return ChainRefusal(.certificateNotYetValid, "certificate \(index + 1) (\(certificate.subject)) is not valid before \(certificate.notValidBefore)")
            }
            if now > certificate.notValidAfter {
                return ChainRefusal(.certificateExpired, "certificate \(index + 1) (\(certificate.subject)) expired at \(certificate.notValidAfter)")
            }
        }
        return nil
    }

    private func checkValidity(from: Date, until: Date) -> ChainRefusal? {
        guard let now = configuration.validationTime?() else { return nil }
        if now < from { return ChainRefusal(.certificateNotYetValid, "a certificate of the chain is not valid before \(from)") }
        if now > until { return ChainRefusal(.certificateExpired, "a certificate of the chain expired at \(until)") }
        return nil
    }
}

extension CertificateValidationResult {
    fileprivate var policyFailures: [PolicyFailure] {
        if case .couldNotValidate(let failures) = self { failures } else { [] }
    }
}
