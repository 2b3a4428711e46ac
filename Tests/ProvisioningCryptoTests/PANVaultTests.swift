import Crypto
import Foundation
import ProvisioningCrypto
import ProvisioningModels
import Testing

@Suite("PAN vault")
struct PANVaultTests {
    let pan = try! PrimaryAccountNumber("5555555555554444")
    let vault = PANVault(keys: .generate())

    /// Known answers, computed apart (Python's `cryptography`: AES-256-GCM with AAD
    /// `pushprov-pan-v1 NUL k1 NUL card-1`, nonce bytes 0–11; HMAC-SHA256): the stored form of
    /// every PAN already in a database, and its lookup hash, may never change unnoticed.
    @Test func readsAndFindsKnownAnswers() throws {
        let keys = try PANVaultKeys(
            encryptionKeys: ["k1": SymmetricKey(data: Data(0..<32))],
            currentEncryptionKeyID: "k1",
            lookupKey: SymmetricKey(data: Data(32..<64))
        )
        let known = PANVault(keys: keys)
        let visa = try PrimaryAccountNumber("4111111111111111")
        let stored = try #require(EncryptedPAN(serialized: "v1.k1.AAECAwQFBgcICQoLczPnKvTU8yq8cKa6gNhJXG16ecdSBIvLD/T9OFCMdbI="))
        #expect(stored.keyID == "k1")
        #expect(try known.decrypt(stored, cardID: "card-1") == visa)
        #expect(known.lookupHash(visa) == "fba1c1bd2fb45c25a27551394013981853946afbe0225b3df27fcc2ad15d5047")
        // What it writes has the same form: nonce, ciphertext and tag, base64, after `v1.k1.`.
        let written = try known.encrypt(visa, cardID: "card-1")
        #expect(written.serialized.hasPrefix("v1.k1.") && written.sealedBox.count == 12 + 16 + 16)
        #expect(EncryptedPAN(serialized: written.serialized) == written)
    }

    @Test func encryptsAndDecryptsForTheSameCard() throws {
        let encrypted = try vault.encrypt(pan, cardID: "card-1")
        #expect(encrypted.keyID == vault.keys.currentEncryptionKeyID)
        #expect(try vault.decrypt(encrypted, cardID: "card-1") == pan)
    }

    @Test func ciphertextDoesNotContainThePANAndIsFreshEachTime() throws {
        let first = try vault.encrypt(pan, cardID: "card-1")
        let second = try vault.encrypt(pan, cardID: "card-1")
        #expect(first.sealedBox != second.sealedBox)
        #expect(!first.serialized.contains(pan.digits))
        #expect(!String(decoding: first.sealedBox, as: UTF8.self).contains(pan.digits))
    }

    @Test func refusesAValueMovedToAnotherCard() throws {
        let encrypted = try vault.encrypt(pan, cardID: "card-1")
        #expect(throws: PANVaultError.authenticationFailed) { try vault.decrypt(encrypted, cardID: "card-2") }
    }

    @Test func refusesAnAlteredValue() throws {
        var encrypted = try vault.encrypt(pan, cardID: "card-1")
        encrypted.sealedBox[20] ^= 0x01
        #expect(throws: PANVaultError.authenticationFailed) { try vault.decrypt(encrypted, cardID: "card-1") }
    }

    @Test func refusesAnUnknownKeyID() throws {
        let encrypted = try PANVault(keys: .generate()).encrypt(pan, cardID: "card-1")
        #expect(throws: PANVaultError.unknownKeyID(encrypted.keyID)) { try vault.decrypt(encrypted, cardID: "card-1") }
    }

    @Test func rotationKeepsOldValuesReadableAndEncryptsNewOnesWithTheNewKey() throws {
        let oldKeys = vault.keys
        let old = try vault.encrypt(pan, cardID: "card-1")
        var encryptionKeys = oldKeys.encryptionKeys
        encryptionKeys["pan-2"] = SymmetricKey(size: .bits256)
        let rotated = PANVault(keys: try PANVaultKeys(encryptionKeys: encryptionKeys, currentEncryptionKeyID: "pan-2", lookupKey: oldKeys.lookupKey))
        #expect(try rotated.decrypt(old, cardID: "card-1") == pan)
        #expect(rotated.needsRotation(old))
        let new = try rotated.encrypt(pan, cardID: "card-1")
        #expect(new.keyID == "pan-2" && !rotated.needsRotation(new))
        #expect(rotated.lookupHash(pan) == vault.lookupHash(pan))
    }

    @Test func serializedFormRoundTrips() throws {
        let encrypted = try vault.encrypt(pan, cardID: "card-1")
        #expect(encrypted.serialized.hasPrefix("v1.\(encrypted.keyID)."))
        #expect(EncryptedPAN(serialized: encrypted.serialized) == encrypted)
        for bad in ["", "v2.k.AAAA", "v1..AAAA", "v1.k.!!!", "v1.k.AAAA"] {
            #expect(EncryptedPAN(serialized: bad) == nil, "\(bad)")
        }
    }

    /// The storage form as first read: split on "." into exactly three parts.
    static func referenceParse(_ text: String) -> EncryptedPAN? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1", !parts[1].isEmpty, let box = Data(base64Encoded: String(parts[2])), box.count > 28 else { return nil }
        return EncryptedPAN(keyID: String(parts[1]), sealedBox: box)
    }

    @Test func readingTheStorageFormByBytesAgreesWithSplittingIt() throws {
        let good = try vault.encrypt(pan, cardID: "card-1").serialized
        let box = String(good.split(separator: ".")[2])
        var cases = [good, "v1.k.\(box)", "v1.k.\(box).", "v1.k..\(box)", "v1.\(box)", ".v1.k.\(box)", "v1.k.\(box)x", "v1.k.\(box.dropLast(4))",
                     "v1.ké.\(box)", "v1.k\u{301}.\(box)", "V1.k.\(box)", "v1 .k.\(box)", "v1.k. \(box)", "v1...", "v1.", "v1", "v"]
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("v1.k/+=AZaz09é ")
        for _ in 0..<2_000 {
            var characters = Array(good)
            for _ in 0..<Int.random(in: 1...2, using: &generator) {
                let at = Int.random(in: 0..<characters.count, using: &generator)
                if Bool.random(using: &generator) { characters[at] = alphabet.randomElement(using: &generator)! } else { characters.remove(at: at) }
            }
            cases.append(String(characters))
        }
        for text in cases {
            #expect(EncryptedPAN(serialized: text) == Self.referenceParse(text), "\(text)")
        }
        #expect(cases.contains { EncryptedPAN(serialized: $0) != nil && $0 != good })
    }

    @Test func lookupHashIsKeyedAndDeterministic() throws {
        let hash = vault.lookupHash(pan)
        #expect(hash == vault.lookupHash(pan))
        #expect(hash.count == 64)
        #expect(hash != PANVault(keys: .generate()).lookupHash(pan))
        #expect(hash != Data(SHA256.hash(data: Data(pan.digits.utf8))).lowercaseHex)
        #expect(hash != vault.lookupHash(try PrimaryAccountNumber("4111111111111111")))
    }

    @Test func redactionShowsOnlyTheLastFourDigits() {
        #expect(pan.redacted == "•••• 4444")
        #expect(Redaction.pan("5555555555554444") == "•••• 4444")
        #expect(Redaction.pan("123") == "••••")
        #expect("\(pan)" == "•••• 4444")
    }

    @Test func keyConfigurationIsValidated() {
        let key = SymmetricKey(size: .bits256)
        #expect(throws: KeyConfigurationError.self) {
            try PANVaultKeys(encryptionKeys: ["a": key], currentEncryptionKeyID: "b", lookupKey: SymmetricKey(size: .bits256))
        }
        #expect(throws: KeyConfigurationError.self) {
            try PANVaultKeys(encryptionKeys: ["a": SymmetricKey(size: .bits128)], currentEncryptionKeyID: "a", lookupKey: SymmetricKey(size: .bits256))
        }
        #expect(throws: KeyConfigurationError.self) {
            try PANVaultKeys(encryptionKeys: ["a": key], currentEncryptionKeyID: "a", lookupKey: key)
        }
        #expect(throws: KeyConfigurationError.self) {
            try PANVaultKeys(encryptionKeys: ["a.b": key], currentEncryptionKeyID: "a.b", lookupKey: SymmetricKey(size: .bits256))
        }
    }
}

@Suite("Local key file")
final class LocalKeyFileTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Each test has an instance of its own; its folder goes with it.
    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    var path: String { directory.appendingPathComponent("keys.json").path }

    @Test func createsTheFileOnceWithOwnerOnlyPermissionsAndReusesIt() throws {
        let (created, wasCreated) = try LocalKeyFile.loadOrCreate(at: path)
        #expect(wasCreated)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        let (loaded, createdAgain) = try LocalKeyFile.loadOrCreate(at: path)
        #expect(!createdAgain)
        let pan = try PrimaryAccountNumber("4111111111111111")
        let encrypted = try PANVault(keys: created.panVault).encrypt(pan, cardID: "c")
        #expect(try PANVault(keys: loaded.panVault).decrypt(encrypted, cardID: "c") == pan)
        #expect(loaded.activationSigningKeys.map(\.id) == created.activationSigningKeys.map(\.id))
        #expect(loaded.activationSigningKeys[0].privateKey.rawRepresentation == created.activationSigningKeys[0].privateKey.rawRepresentation)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["keys.json"])
    }

    @Test func refusesAFileOthersCanRead() throws {
        _ = try LocalKeyFile.loadOrCreate(at: path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        let error = try #require(throws: KeyConfigurationError.self) { try LocalKeyFile.load(at: path) }
        #expect(error.message.contains("chmod 600"))
    }

    @Test(.enabled(if: geteuid() == 0, "giving a file to another user needs root"))
    func refusesAFileAnotherUserOwns() throws {
        _ = try LocalKeyFile.loadOrCreate(at: path)
        // Root's own file is read (a secret mounted by the platform belongs to root).
        #expect(try LocalKeyFile.load(at: path).activationSigningKeys.count == 1)
        try FileManager.default.setAttributes([.ownerAccountID: 54_321], ofItemAtPath: path)
        let error = try #require(throws: KeyConfigurationError.self) { try LocalKeyFile.load(at: path) }
        #expect(error.message == "key file \(path) belongs to user id 54321, neither this process's user (0) nor root; whoever owns it can replace the keys: chown it")
    }

    @Test func refusesAFIFOWithoutWaitingForAWriter() throws {
        #expect(mkfifo(path, 0o600) == 0)
        let error = try #require(throws: KeyConfigurationError.self) { try LocalKeyFile.load(at: path) }
        #expect(error.message == "key file \(path) is not a regular file")
    }

    @Test func readsThroughASymbolicLinkButRefusesADirectoryOrAnOversizedFile() throws {
        let (created, _) = try LocalKeyFile.loadOrCreate(at: path)
        // Kubernetes mounts a secret as a link into a timestamped directory.
        let link = directory.appendingPathComponent("linked.json").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: path)
        #expect(try LocalKeyFile.load(at: link).activationSigningKeys.map(\.id) == created.activationSigningKeys.map(\.id))
        let folder = directory.appendingPathComponent("folder.json")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let notAFile = try #require(throws: KeyConfigurationError.self) { try LocalKeyFile.load(at: folder.path) }
        #expect(notAFile.message == "key file \(folder.path) is not a regular file")
        let large = directory.appendingPathComponent("large.json").path
        #expect(FileManager.default.createFile(atPath: large, contents: Data(count: (1 << 20) + 1), attributes: [.posixPermissions: 0o600]))
        let oversized = try #require(throws: KeyConfigurationError.self) { try LocalKeyFile.load(at: large) }
        #expect(oversized.message == "key file \(large) is larger than 1048576 bytes")
    }

    @Test func refusesTwoActivationSigningKeysUnderOneId() throws {
        _ = try LocalKeyFile.loadOrCreate(at: path)
        // A rotation done by hand: a new key added under the id of the old one.
        var file = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        var keys = try #require(file["activationSigningKeys"] as? [[String: Any]])
        let id = try #require(keys[0]["id"] as? String)
        keys.insert(["id": id, "privateKey": P256.Signing.PrivateKey().rawRepresentation.base64EncodedString()], at: 0)
        file["activationSigningKeys"] = keys
        try FileManager.default.removeItem(atPath: path)
        #expect(FileManager.default.createFile(atPath: path, contents: try JSONSerialization.data(withJSONObject: file), attributes: [.posixPermissions: 0o600]))
        let error = try #require(throws: KeyConfigurationError.self) { try LocalKeyFile.load(at: path) }
        #expect(error.message.contains("activation signing key id \(id) appears twice"), "\(error.message)")
        // An empty id is refused too.
        keys[0]["id"] = ""
        file["activationSigningKeys"] = keys
        try JSONSerialization.data(withJSONObject: file).write(to: URL(fileURLWithPath: path))
        #expect(throws: KeyConfigurationError.self) { try LocalKeyFile.load(at: path) }
    }

    @Test func refusesACorruptFile() throws {
        #expect(FileManager.default.createFile(atPath: path, contents: Data("{}".utf8), attributes: [.posixPermissions: 0o600]))
        #expect(throws: KeyConfigurationError.self) { try LocalKeyFile.loadOrCreate(at: path) }
    }
}
