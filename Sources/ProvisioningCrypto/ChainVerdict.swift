import Crypto
import Foundation

/// The outcome of validating the certificates Wallet handed the app.
public enum ChainVerdict: Sendable {
    /// The chain meets Apple's issuer-encryption policy; seal for its leaf key.
    case accepted(AcceptedChain)
    /// The chain was refused; nothing may be encrypted for it.
    case refused(ChainRefusal)

    /// The accepted chain, or nil.
    public var acceptedChain: AcceptedChain? {
        if case .accepted(let chain) = self { chain } else { nil }
    }

    /// The refusal, or nil.
    public var refusal: ChainRefusal? {
        if case .refused(let refusal) = self { refusal } else { nil }
    }
}

/// What an accepted chain yields.
public struct AcceptedChain: Sendable {
    /// The leaf's P-256 key: the recipient for ECC_V2 sealing.
    public var leafPublicKey: P256.KeyAgreement.PublicKey
    /// Lowercase hex SHA-256 of the leaf's signed body (its DER `tbsCertificate`), for audit
    /// records: one value per certificate, whichever of its signature's two valid ECDSA forms
    /// the caller sent (so not the hash of the whole DER that `openssl x509 -fingerprint` prints).
    public var leafFingerprint: String
    /// The leaf's subject, for diagnostics.
    public var leafSubject: String
    /// The subject of the trust anchor the chain ends at. Any anchor may carry any name (an
    /// extra one may be named like Apple's root): ``anchorFingerprint`` tells which it is.
    public var anchorSubject: String
    /// Lowercase hex SHA-256 of the trust anchor's DER: ``TrustAnchors/appleRootCAG3Fingerprint``
    /// when the chain ends at Apple's root.
    public var anchorFingerprint: String
    /// Whether the chain ends at Apple Root CA - G3 itself (its pinned fingerprint), not at an
    /// extra anchor.
    public var isAnchoredAtApplesRoot: Bool { anchorFingerprint == TrustAnchors.appleRootCAG3Fingerprint }
    /// The earliest `notValidAfter` of the chain's certificates.
    public var validUntil: Date
    /// The latest `notValidBefore` of the chain's certificates.
    public var validFrom: Date
}
