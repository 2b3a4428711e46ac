import Crypto
import Foundation
@_spi(KnownAnswerVectors) import ProvisioningCrypto
import Testing
import X509

/// One known-answer vector as stored in `Resources/vectors/*.json`.
struct ECCV2Vector: Decodable, CustomTestStringConvertible {
    var name: String
    var recipientCertificate: String
    var recipientPublicKey: String
    var ephemeralPrivateKey: String
    var ephemeralPublicKey: String
    var sharedSecret: String
    var aesKey: String
    var plaintext: String?
    var encryptedPassData: String?

    var testDescription: String { name }

    static func load(_ file: String) throws -> ECCV2Vector {
        try JSONDecoder().decode(ECCV2Vector.self, from: TestResources.data("vectors/\(file)"))
    }
}

@Suite("ECC_V2 known-answer vectors")
struct ECCV2VectorTests {
    @Test func everyVectorFileIsPresent() {
        #expect(TestResources.vectorFiles == ["ecc-v2-vector-1.json", "ecc-v2-vector-2.json"])
    }

    /// The one helper every vector runs through: each intermediate value and the output must match.
    @Test(arguments: TestResources.vectorFiles)
    func reproducesVector(_ file: String) throws {
        let vector = try ECCV2Vector.load(file)
        let leaf = try TestResources.certificate(vector.recipientCertificate)
        let signingKey = try #require(P256.Signing.PublicKey(leaf.publicKey))
        let recipient = try P256.KeyAgreement.PublicKey(rawRepresentation: signingKey.rawRepresentation)
        #expect(recipient.x963Representation.lowercaseHex == vector.recipientPublicKey.lowercased())

        let ephemeral = try P256.KeyAgreement.PrivateKey(rawRepresentation: try #require(Data(hex: vector.ephemeralPrivateKey)))
        #expect(ephemeral.publicKey.x963Representation.lowercaseHex == vector.ephemeralPublicKey.lowercased())

        let z = try ECCV2.sharedSecret(ephemeralKey: ephemeral, recipient: recipient)
        #expect(z.lowercaseHex == vector.sharedSecret.lowercased())

        let key = ECCV2.derivedKey(sharedSecret: z, ephemeralPublicKey: ephemeral.publicKey.x963Representation)
        #expect(key.withUnsafeBytes { Data($0) }.lowercaseHex == vector.aesKey.lowercased())

        // Vector 1 carries the whole seal; a file that lost it must fail, not skip the check.
        if file == "ecc-v2-vector-1.json" {
            #expect(vector.plaintext != nil && vector.encryptedPassData != nil, "vector 1 lost its plaintext or output")
        }
        if let plaintext = vector.plaintext, let expected = vector.encryptedPassData {
            let sealed = try ECCV2.seal(Data(plaintext.utf8), for: recipient, ephemeralKey: ephemeral)
            #expect(sealed.encryptedData.lowercaseHex == expected.lowercased())
            #expect(sealed.ephemeralPublicKey.lowercaseHex == vector.ephemeralPublicKey.lowercased())
            #expect(sealed.ephemeralPublicKey.count == 65)
        }
    }

    @Test func sixteenByteZeroIVWouldNotReproduceVectorOne() throws {
        // Guards the classic mistake the reference warns about: GCM with a 16-byte IV.
        let vector = try ECCV2Vector.load("ecc-v2-vector-1.json")
        let key = SymmetricKey(data: try #require(Data(hex: vector.aesKey)))
        let box = try AES.GCM.seal(Data(try #require(vector.plaintext).utf8), using: key, nonce: AES.GCM.Nonce(data: Data(count: 16)))
        #expect((box.ciphertext + box.tag).lowercaseHex != vector.encryptedPassData?.lowercased())
    }
}

@Suite("ECC_V2 seal and open")
struct ECCV2RoundTripTests {
    @Test(arguments: [0, 1, 15, 16, 17, 200, 4096])
    func sealThenOpenReturnsThePlaintext(size: Int) throws {
        let recipient = P256.KeyAgreement.PrivateKey()
        let plaintext = Data((0..<size).map { _ in UInt8.random(in: 0...255) })
        let sealed = try ECCV2.seal(plaintext, for: recipient.publicKey)
        #expect(sealed.encryptedData.count == size + ECCV2.tagSize)
        #expect(sealed.ephemeralPublicKey.count == 65 && sealed.ephemeralPublicKey.first == 0x04)
        #expect(try ECCV2.open(sealed, with: recipient) == plaintext)
    }

    @Test func everySealUsesAFreshEphemeralKey() throws {
        let recipient = P256.KeyAgreement.PrivateKey().publicKey
        let first = try ECCV2.seal(Data("same".utf8), for: recipient)
        let second = try ECCV2.seal(Data("same".utf8), for: recipient)
        #expect(first.ephemeralPublicKey != second.ephemeralPublicKey)
        #expect(first.encryptedData != second.encryptedData)
    }

    @Test func openingWithTheWrongKeyFails() throws {
        let sealed = try ECCV2.seal(Data("card".utf8), for: P256.KeyAgreement.PrivateKey().publicKey)
        #expect(throws: ECCV2Error.authenticationFailed) { try ECCV2.open(sealed, with: P256.KeyAgreement.PrivateKey()) }
    }

    @Test(arguments: [0, 5, 20])
    func aFlippedCiphertextByteFails(index: Int) throws {
        let recipient = P256.KeyAgreement.PrivateKey()
        var sealed = try ECCV2.seal(Data("a card that must not be altered".utf8), for: recipient.publicKey)
        sealed.encryptedData[index] ^= 0x01
        #expect(throws: ECCV2Error.authenticationFailed) { try ECCV2.open(sealed, with: recipient) }
    }

    @Test func aFlippedTagByteFails() throws {
        let recipient = P256.KeyAgreement.PrivateKey()
        var sealed = try ECCV2.seal(Data("card".utf8), for: recipient.publicKey)
        sealed.encryptedData[sealed.encryptedData.count - 1] ^= 0x80
        #expect(throws: ECCV2Error.authenticationFailed) { try ECCV2.open(sealed, with: recipient) }
    }

    @Test func anInvalidEphemeralKeyIsRefused() throws {
        let recipient = P256.KeyAgreement.PrivateKey()
        var sealed = try ECCV2.seal(Data("card".utf8), for: recipient.publicKey)
        sealed.ephemeralPublicKey = Data([0x04] + [UInt8](repeating: 1, count: 64))
        #expect(throws: ECCV2Error.invalidEphemeralPublicKey) { try ECCV2.open(sealed, with: recipient) }
        sealed.ephemeralPublicKey = recipient.publicKey.compressedRepresentation
        #expect(throws: ECCV2Error.invalidEphemeralPublicKey) { try ECCV2.open(sealed, with: recipient) }
    }

    @Test func dataShorterThanATagIsRefused() throws {
        let recipient = P256.KeyAgreement.PrivateKey()
        var sealed = try ECCV2.seal(Data(), for: recipient.publicKey)
        sealed.encryptedData = sealed.encryptedData.prefix(15)
        #expect(throws: ECCV2Error.ciphertextTooShort) { try ECCV2.open(sealed, with: recipient) }
    }
}
