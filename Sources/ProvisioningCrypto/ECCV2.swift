import Crypto
import Foundation

/// Apple's ECC_V2 encryption scheme for in-app provisioning.
///
/// ECDH on P-256 between a fresh ephemeral key and the leaf certificate's key, a one-round
/// NIST SP 800-56A concatenation KDF over SHA-256, then AES-256-GCM with a 12-byte all-zero
/// IV and no additional data. The constant IV is safe only because every call uses a new
/// ephemeral key, and so a new AES key: ``seal(_:for:)`` generates one unless
/// a test injects a fixed key to reproduce a known-answer vector.
public enum ECCV2 {
    /// The KDF's algorithm identifier, preceded on the wire by its length byte (13).
    static let algorithmID = Array("id-aes256-GCM".utf8)
    /// Party U info: the ASCII bytes `Apple`.
    static let partyUInfo = Array("Apple".utf8)
    /// Size of the GCM tag appended to the ciphertext.
    public static let tagSize = 16
    /// Size of the raw uncompressed ephemeral public key.
    public static let ephemeralPublicKeySize = 65

    /// Seals `plaintext` for the holder of `recipient` (the leaf certificate's P-256 key), with
    /// a fresh ephemeral key (``ephemeralKey()``).
    ///
    /// - Parameters:
    ///   - plaintext: The pass-data JSON (see ``PassDataPayload``).
    ///   - recipient: The P-256 key of Apple's encipherment leaf.
    /// - Returns: `encryptedData` (ciphertext || tag) and the raw ephemeral public key.
    public static func seal(_ plaintext: some DataProtocol, for recipient: P256.KeyAgreement.PublicKey) throws -> SealedPassData {
        try seal(plaintext, for: recipient, ephemeralKey: ephemeralKey())
    }

    /// ``seal(_:for:)`` with a given ephemeral key: only to reproduce a known-answer vector
    /// (tests, `pushprov crypto seal --ephemeral-key`), so it is not part of the public API
    /// (`@_spi(KnownAnswerVectors) import ProvisioningCrypto`). Reusing an ephemeral key with the
    /// scheme's constant IV reuses the GCM key stream and its authentication key: both messages'
    /// XOR is revealed and tags can be forged.
    @_spi(KnownAnswerVectors)
    public static func seal(
        _ plaintext: some DataProtocol,
        for recipient: P256.KeyAgreement.PublicKey,
        ephemeralKey: P256.KeyAgreement.PrivateKey
    ) throws -> SealedPassData {
        let ephemeralPublicKey = ephemeralKey.publicKey.x963Representation
        let sharedSecret = try ephemeralKey.sharedSecretFromKeyAgreement(with: recipient)
        let key = derivedKey(sharedSecret: sharedSecret, ephemeralPublicKey: ephemeralPublicKey)
        let box = try AES.GCM.seal(plaintext, using: key, nonce: zeroNonce)
        var encrypted = Data(capacity: box.ciphertext.count + tagSize)
        encrypted.append(box.ciphertext)
        encrypted.append(box.tag)
        return SealedPassData(encryptedData: encrypted, ephemeralPublicKey: ephemeralPublicKey)
    }

    /// Opens a sealed response with the leaf's private key: what Apple's servers do.
    ///
    /// - Throws: ``ECCV2Error`` when the ephemeral key is not a valid P-256 point, the data is
    ///   shorter than a tag, or authentication fails (wrong key, altered bytes).
    public static func open(
        _ sealed: SealedPassData,
        with recipientKey: P256.KeyAgreement.PrivateKey
    ) throws -> Data {
        guard sealed.ephemeralPublicKey.count == ephemeralPublicKeySize,
            sealed.ephemeralPublicKey.first == 0x04,
            let ephemeral = try? P256.KeyAgreement.PublicKey(x963Representation: sealed.ephemeralPublicKey)
        else {
            throw ECCV2Error.invalidEphemeralPublicKey
        }
        guard sealed.encryptedData.count >= tagSize else {
            throw ECCV2Error.ciphertextTooShort
        }
        let sharedSecret = try recipientKey.sharedSecretFromKeyAgreement(with: ephemeral)
        let key = derivedKey(sharedSecret: sharedSecret, ephemeralPublicKey: sealed.ephemeralPublicKey)
        do {
            let box = try AES.GCM.SealedBox(
                nonce: zeroNonce,
                ciphertext: sealed.encryptedData.dropLast(tagSize),
                tag: sealed.encryptedData.suffix(tagSize)
            )
            return try AES.GCM.open(box, using: key)
        } catch {
            throw ECCV2Error.authenticationFailed
        }
    }

    /// A fresh ephemeral key for one ``seal(_:for:)``: a private scalar drawn
    /// uniformly from [1, n − 1] (n, the order of P-256) out of 32 bytes of the system's
    /// cryptographic random number generator, by rejection.
    ///
    /// swift-crypto's `P256.KeyAgreement.PrivateKey()` also runs BoringSSL's FIPS
    /// pairwise-consistency test on each key it generates (an ECDSA signature, its verification,
    /// and the public key computed again), and by default wants a public point with a compact
    /// representation. Measured in `Benchmarks/`, a key and its ECDH take about 185 µs that way,
    /// the same with `compactRepresentable: false`, and 83 µs here: the difference is the test,
    /// which was 37 % of the whole crypto of a `signed-cards` call. For a key that agrees on one
    /// secret and is dropped the test guards nothing: a key whose public half did not match its
    /// private half would only make Apple's decryption fail. (ECC_V2 sends the uncompressed
    /// point, so compactness was never needed.) The scalar is loaded through swift-crypto's
    /// `init(rawRepresentation:)`, which refuses 0 and anything ≥ n (BoringSSL's
    /// `EC_KEY_set_private_key`) and computes the public point; the heap copies of the scalar
    /// are wiped when freed.
    public static func ephemeralKey() -> P256.KeyAgreement.PrivateKey {
        ephemeralKey(candidates: { SymmetricKey(size: .bits256) })
    }

    /// ``ephemeralKey()`` drawing its candidate scalars from `candidates` (tests inject
    /// out-of-range ones). A candidate of 0 or ≥ n, which the system's generator produces about
    /// once in 2³² draws, is drawn again.
    static func ephemeralKey(candidates: () -> SymmetricKey) -> P256.KeyAgreement.PrivateKey {
        for _ in 0..<maximumEphemeralDraws {
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: candidates()) { return key }
        }
        // 64 draws out of range in a row means the generator is broken: nothing may be sealed.
        preconditionFailure("\(maximumEphemeralDraws) random P-256 scalars in a row were 0 or not below the group order")
    }

    /// How many out-of-range candidates ``ephemeralKey(candidates:)`` draws again before it
    /// stops the process.
    static let maximumEphemeralDraws = 64

    /// The ECDH shared secret `Z` (the 32-byte x coordinate), exposed for known-answer tests
    /// only (`@_spi(KnownAnswerVectors)`).
    @_spi(KnownAnswerVectors)
    public static func sharedSecret(
        ephemeralKey: P256.KeyAgreement.PrivateKey,
        recipient: P256.KeyAgreement.PublicKey
    ) throws -> Data {
        try ephemeralKey.sharedSecretFromKeyAgreement(with: recipient).withUnsafeBytes { Data($0) }
    }

    /// The AES-256 key: `SHA-256(00000001 || Z || 0x0D || "id-aes256-GCM" || "Apple" || ephemeralPublicKey)`.
    public static func derivedKey(sharedSecret: some ContiguousBytes, ephemeralPublicKey: some DataProtocol) -> SymmetricKey {
        var hash = SHA256()
        hash.update(data: [0, 0, 0, 1])
        sharedSecret.withUnsafeBytes { hash.update(bufferPointer: $0) }
        hash.update(data: [UInt8(algorithmID.count)])
        hash.update(data: algorithmID)
        hash.update(data: partyUInfo)
        hash.update(data: ephemeralPublicKey)
        return SymmetricKey(data: hash.finalize())
    }

    /// The 12-byte all-zero IV the scheme prescribes.
    private static let zeroNonce = try! AES.GCM.Nonce(data: Data(count: 12))
}

/// Why an ECC_V2 response could not be opened.
public enum ECCV2Error: String, Error, Sendable, CustomStringConvertible {
    /// `ephemeralPublicKey` is not a 65-byte uncompressed point on P-256.
    case invalidEphemeralPublicKey = "invalid_ephemeral_public_key"
    /// `encryptedData` is shorter than the 16-byte tag.
    case ciphertextTooShort = "ciphertext_too_short"
    /// The tag did not verify: wrong recipient key or altered bytes.
    case authenticationFailed = "authentication_failed"

    /// A sentence saying what went wrong.
    public var description: String {
        switch self {
        case .invalidEphemeralPublicKey: "ephemeralPublicKey is not a 65-byte uncompressed P-256 point"
        case .ciphertextTooShort: "encryptedData is shorter than the 16-byte GCM tag"
        case .authenticationFailed: "encryptedData did not authenticate: wrong recipient key or altered bytes"
        }
    }
}
