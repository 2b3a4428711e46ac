import Crypto
import Foundation
import ProvisioningModels

/// Encrypts PANs at rest and finds cards by PAN without storing it in clear.
///
/// - Encryption: AES-256-GCM with a random 96-bit nonce. The additional authenticated data
///   binds the ciphertext to its key id and card id, so a stored PAN copied onto another
///   card's row does not decrypt. Old keys stay readable while ``PANVaultKeys`` lists them;
///   new values always use the current key (rotation).
/// - Lookup: HMAC-SHA256 of the digits under a separate key, so the lookup column reveals
///   nothing without that key and cannot be brute-forced offline from the database alone.
public struct PANVault: Sendable {
    /// The keys in use.
    public let keys: PANVaultKeys

    /// Creates a vault.
    public init(keys: PANVaultKeys) {
        self.keys = keys
    }

    /// Encrypts `pan` for the card `cardID` under the current key.
    public func encrypt(_ pan: PrimaryAccountNumber, cardID: String) throws -> EncryptedPAN {
        let keyID = keys.currentEncryptionKeyID
        let box = try AES.GCM.seal(
            Data(pan.digits.utf8),
            using: keys.encryptionKeys[keyID]!,
            authenticating: Self.additionalData(keyID: keyID, cardID: cardID)
        )
        return EncryptedPAN(keyID: keyID, sealedBox: box.combined!)
    }

    /// Decrypts a stored PAN of the card `cardID`.
    ///
    /// - Throws: ``PANVaultError`` when the key id is unknown or the value does not
    ///   authenticate (altered, or stored for another card).
    public func decrypt(_ encrypted: EncryptedPAN, cardID: String) throws -> PrimaryAccountNumber {
        guard let key = keys.encryptionKeys[encrypted.keyID] else {
            throw PANVaultError.unknownKeyID(encrypted.keyID)
        }
        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(combined: encrypted.sealedBox)
            plaintext = try AES.GCM.open(box, using: key, authenticating: Self.additionalData(keyID: encrypted.keyID, cardID: cardID))
        } catch {
            throw PANVaultError.authenticationFailed
        }
        do {
            return try PrimaryAccountNumber(String(decoding: plaintext, as: UTF8.self))
        } catch {
            throw PANVaultError.authenticationFailed
        }
    }

    /// Whether a stored value should be re-encrypted because it uses an older key.
    public func needsRotation(_ encrypted: EncryptedPAN) -> Bool {
        encrypted.keyID != keys.currentEncryptionKeyID
    }

    /// The keyed hash used to find a card by PAN: lowercase hex HMAC-SHA256 of the digits.
    public func lookupHash(_ pan: PrimaryAccountNumber) -> String {
        Data(HMAC<SHA256>.authenticationCode(for: Data(pan.digits.utf8), using: keys.lookupKey)).lowercaseHex
    }

    private static func additionalData(keyID: String, cardID: String) -> Data {
        Data("pushprov-pan-v1\u{0}\(keyID)\u{0}\(cardID)".utf8)
    }
}

/// An encrypted PAN as stored: key id plus GCM nonce, ciphertext and tag.
public struct EncryptedPAN: Sendable, Hashable {
    /// The id of the key it was encrypted with.
    public var keyID: String
    /// `nonce (12) || ciphertext || tag (16)`.
    public var sealedBox: Data

    /// How a value stored under `keyID` begins: `v1.<keyID>.`.
    public static func storedPrefix(keyID: String) -> String { "v1.\(keyID)." }

    /// Wraps stored parts.
    public init(keyID: String, sealedBox: Data) {
        self.keyID = keyID
        self.sealedBox = sealedBox
    }

    /// The storage form: `v1.<key id>.<base64 sealed box>`.
    public var serialized: String { "v1.\(keyID).\(sealedBox.base64EncodedString())" }

    /// Reads the storage form; nil when it is not one.
    ///
    /// The form is ASCII, so it is read as UTF-8 bytes (every `signed-cards` call reads one).
    public init?(serialized: String) {
        let dot = UInt8(ascii: ".")
        let utf8 = serialized.utf8
        guard utf8.starts(with: "v1.".utf8) else { return nil }
        let keyStart = utf8.index(utf8.startIndex, offsetBy: 3)
        guard let keyEnd = utf8[keyStart...].firstIndex(of: dot), keyEnd != keyStart else { return nil }
        let boxStart = utf8.index(after: keyEnd)
        guard !utf8[boxStart...].contains(dot), let keyID = String(utf8[keyStart..<keyEnd]), let boxText = String(utf8[boxStart...]),
            let box = Data(base64Encoded: boxText), box.count > 28
        else { return nil }
        self.init(keyID: keyID, sealedBox: box)
    }
}

/// Why a stored PAN could not be decrypted.
public enum PANVaultError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The value names a key the vault does not hold.
    case unknownKeyID(String)
    /// The value was altered or belongs to another card.
    case authenticationFailed

    /// A sentence saying what went wrong.
    public var description: String {
        switch self {
        case .unknownKeyID(let id): "stored PAN uses encryption key \(id), which is not configured"
        case .authenticationFailed: "stored PAN does not authenticate: altered, or stored for another card"
        }
    }
}
