import Crypto
import Foundation
import ProvisioningCrypto
import SwiftASN1
import Testing
import X509

@Suite("Apple chain policy: real Apple certificates")
struct RealAppleChainTests {
    let leaf: Data
    let intermediate: Data
    let root: Data

    init() throws {
        leaf = try TestResources.der("apple-encipherment-leaf-prod-2020.pem")
        intermediate = try TestResources.der("apple-wwdr-ca-g2.pem")
        root = try TestResources.der("apple-root-ca-g3.pem")
    }

    @Test func acceptsProductionChainWithoutTheRoot() async throws {
        let chain = try #require(await AppleChainValidator().validate([leaf, intermediate]).acceptedChain)
        #expect(chain.leafSubject.contains("ecc-crypto-services-encipherment_UC6-PROD"))
        #expect(chain.anchorSubject.contains("Apple Root CA - G3"))
        #expect(chain.anchorFingerprint == TrustAnchors.appleRootCAG3Fingerprint && chain.isAnchoredAtApplesRoot)
        // SHA-256 of the leaf's tbsCertificate, computed apart (Python's `cryptography`).
        #expect(chain.leafFingerprint == "9d9d37a09b476bba20508ee86628e705b23ad42cf4e4fc5a3ceed2eb30c5d8e9")
    }

    /// The leaf with its signature's other valid form, (r, n − s), is another DER of the same
    /// certificate: accepted, with the same fingerprint for the audit.
    @Test func theLeafsOtherSignatureFormHasTheSameFingerprint() async throws {
        let other = try Self.withOtherSignatureForm(leaf)
        #expect(other != leaf)
        #expect(Data(SHA256.hash(data: other)) != Data(SHA256.hash(data: leaf)))
        let validator = AppleChainValidator()
        let original = try #require(await validator.validate([leaf, intermediate]).acceptedChain)
        let malleated = try #require(await validator.validate([other, intermediate]).acceptedChain)
        #expect(malleated.leafFingerprint == original.leafFingerprint)
    }

    /// `der` re-signed in the other form: the P-256 signature (r, s) becomes (r, n − s).
    static func withOtherSignatureForm(_ der: Data) throws -> Data {
        let certificate = try DER.parse(Array(der))
        guard case .constructed(let nodes) = certificate.content else { throw ASN1Error.invalidASN1Object(reason: "not a SEQUENCE") }
        let parts = Array(nodes)
        let signature = try P256.Signing.ECDSASignature(derRepresentation: try ASN1BitString(derEncoded: parts[2]).bytes)
        let raw = Array(signature.rawRepresentation)
        let order = Array(Data(hex: "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")!)
        var negated = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for i in (0..<32).reversed() {
            let difference = Int(order[i]) - Int(raw[32 + i]) - borrow
            negated[i] = UInt8((difference + 256) % 256)
            borrow = difference < 0 ? 1 : 0
        }
        let other = try P256.Signing.ECDSASignature(rawRepresentation: raw[0..<32] + negated)
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { body in
            body.serializeRawBytes(parts[0].encodedBytes)
            body.serializeRawBytes(parts[1].encodedBytes)
            try body.serialize(ASN1BitString(bytes: ArraySlice(other.derRepresentation)))
        }
        return Data(serializer.serializedBytes)
    }

    @Test func acceptsProductionChainWithTheRoot() async throws {
        let chain = try #require(await AppleChainValidator().validate([leaf, intermediate, root]).acceptedChain)
        #expect(chain.anchorSubject.contains("Apple Root CA - G3"))
    }

    @Test func nothingButTheRootMayFollowTheIntermediate() async throws {
        // A look-alike of Apple's root: its exact name, another key.
        let appleRoot = try TestResources.certificate("apple-root-ca-g3.pem")
        let lookAlike = try TestPKI.makeRoot(key: P384.Signing.PrivateKey(), name: appleRoot.subject).derData
        let validator = AppleChainValidator()
        for extra in [[root, root], [root, lookAlike]] {
            let verdict = await validator.validate([leaf, intermediate] + extra)
            #expect(verdict.refusal?.code == .wrongChainLength, "\(verdict)")
        }
        let impostor = await validator.validate([leaf, intermediate, lookAlike])
        #expect(impostor.refusal?.code == .untrustedRoot)
        #expect(impostor.refusal?.message.contains("different certificate") == true)
        // The accepted lists: with and without the root itself.
        #expect(await validator.validate([leaf, intermediate, root]).acceptedChain != nil)
        #expect(await validator.validate([leaf, intermediate]).acceptedChain != nil)
    }

    @Test func yieldsTheLeafKeyToSealFor() async throws {
        let chain = try #require(await AppleChainValidator().validate([leaf, intermediate]).acceptedChain)
        let certificate = try TestResources.certificate("apple-encipherment-leaf-prod-2020.pem")
        let expected = try #require(P256.Signing.PublicKey(certificate.publicKey))
        #expect(chain.leafPublicKey.rawRepresentation == expected.rawRepresentation)
    }

    @Test func embeddedAppleRootMatchesTheReferenceCertificate() throws {
        #expect(TrustAnchors.appleRootCAG3 == (try TestResources.certificate("apple-root-ca-g3.pem")))
        #expect(TrustAnchors.appleRootCAG3.sha256Fingerprint == TrustAnchors.appleRootCAG3Fingerprint)
    }

    @Test func expiredProductionLeafIsAcceptedWithoutValidityCheck() async {
        // Apple's policy does not check validity periods; this leaf expired in 2022.
        #expect(await AppleChainValidator().validate([leaf, intermediate]).acceptedChain != nil)
    }

    @Test func validityCheckWithAnInjectedClockRefusesTheExpiredLeaf() async throws {
        let validator = AppleChainValidator(configuration: .init(validationTime: { Date(timeIntervalSince1970: 1_763_683_200) }))
        let refusal = try #require(await validator.validate([leaf, intermediate]).refusal)
        #expect(refusal.code == .certificateExpired)
        #expect(refusal.message.contains("certificate 1"))
    }

    @Test func validityCheckAcceptsTheLeafWhileItWasValid() async {
        let validator = AppleChainValidator(configuration: .init(validationTime: { Date(timeIntervalSince1970: 1_620_000_000) }))
        #expect(await validator.validate([leaf, intermediate]).acceptedChain != nil)
    }

    @Test func theTestVectorLeafIsNotAnchoredAtApple() async throws {
        // Its issuer is Apple's *test* CA, which production must never trust.
        let testLeaf = try TestResources.der("apple-encipherment-leaf-test-vector.pem")
        let refusal = try #require(await AppleChainValidator().validate([testLeaf, intermediate]).refusal)
        #expect(refusal.code == .wrongOrder)
    }
}

@Suite("Apple chain policy: refusals")
struct ChainRefusalTests {
    let pki: TestPKI

    init() throws {
        pki = try TestPKI()
    }

    func refusal(_ chain: [Data], validator: AppleChainValidator? = nil) async throws -> ChainRefusal {
        try #require(await (validator ?? pki.validator()).validate(chain).refusal)
    }

    @Test func acceptsAWellFormedChainOfTheTestPKI() async throws {
        let chain = try #require(await pki.validator().validate(try pki.chain()).acceptedChain)
        #expect(chain.anchorSubject.contains("Test Root CA - G3"))
        #expect(chain.anchorFingerprint == pki.root.sha256Fingerprint && !chain.isAnchoredAtApplesRoot)
    }

    /// An extra anchor named exactly like Apple's root is still not Apple's root.
    @Test func anExtraAnchorNamedLikeApplesRootIsToldApartByItsFingerprint() async throws {
        let apple = TrustAnchors.appleRootCAG3
        let impostor = try TestPKI(rootName: apple.subject)
        #expect(impostor.root.subject == apple.subject)
        let validator = AppleChainValidator(configuration: .init(trustAnchors: TrustAnchors.apple.adding([impostor.root])))
        let chain = try #require(await validator.validate(try impostor.chain()).acceptedChain)
        #expect(chain.anchorSubject == apple.subject.description)
        #expect(!chain.isAnchoredAtApplesRoot && chain.anchorFingerprint == impostor.root.sha256Fingerprint)
    }

    @Test func acceptsTheTestChainWithItsRootIncluded() async throws {
        let chain = try pki.chain() + [pki.root.derData]
        #expect(await pki.validator().validate(chain).acceptedChain != nil)
    }

    @Test func appleOnlyAnchorsRefuseAnotherRoot() async throws {
        #expect(try await refusal(try pki.chain(), validator: AppleChainValidator()).code == .untrustedRoot)
    }

    @Test func refusesLeafWithoutMarkerExtension() async throws {
        var options = TestPKI.Options()
        options.leafMarker = .absent
        let refusal = try await refusal(try pki.chain(options: options))
        #expect(refusal.code == .leafMarkerMissing)
        #expect(refusal.message.contains("1.2.840.113635.100.6.39"))
    }

    @Test func refusesMarkerThatIsNotCritical() async throws {
        var options = TestPKI.Options()
        options.leafMarker = .nonCritical
        #expect(try await refusal(try pki.chain(options: options)).code == .leafMarkerNotCritical)
    }

    @Test(arguments: [[UInt8](), [0x04, 0x00], [0x05, 0x01, 0x00], [0x05, 0x00, 0x00]])
    func refusesAMarkerThatIsNotANull(_ value: [UInt8]) async throws {
        var options = TestPKI.Options()
        options.leafMarker = .criticalWithValue(value)
        #expect(try await refusal(try pki.chain(options: options)).code == .leafMarkerValue)
    }

    @Test(arguments: [
        KeyUsage(digitalSignature: true),
        KeyUsage(keyEncipherment: true),
        KeyUsage(keyAgreement: true),
    ])
    func refusesWrongKeyUsage(_ usage: KeyUsage) async throws {
        var options = TestPKI.Options()
        options.leafKeyUsage = usage
        #expect(try await refusal(try pki.chain(options: options)).code == .leafKeyUsage)
    }

    @Test func refusesALeafKeyUsageNotMarkedCritical() async throws {
        var options = TestPKI.Options()
        options.leafKeyUsageCritical = false
        let refusal = try await refusal(try pki.chain(options: options))
        #expect(refusal.code == .leafKeyUsageNotCritical)
        #expect(refusal.message.contains("critical"))
    }

    @Test func refusesAnIntermediateWithoutAP256Key() async throws {
        var options = TestPKI.Options()
        options.intermediateKeyP384 = true
        let refusal = try await refusal(try pki.chain(options: options))
        #expect(refusal.code == .intermediateKeyNotP256)
        #expect(refusal.message.contains("P-384"))
    }

    @Test func refusesP384Leaf() async throws {
        var options = TestPKI.Options()
        options.leafKey = .p384
        let refusal = try await refusal(try pki.chain(options: options))
        #expect(refusal.code == .leafKeyNotP256)
        #expect(refusal.message.contains("P-384"))
    }

    @Test func refusesRSALeaf() async throws {
        var options = TestPKI.Options()
        options.leafKey = .rsa
        let refusal = try await refusal(try pki.chain(options: options))
        #expect(refusal.code == .leafKeyNotP256)
        #expect(refusal.message.contains("RSA"))
    }

    @Test func refusesIntermediateWithoutMarker() async throws {
        var options = TestPKI.Options()
        options.intermediateMarker = false
        let refusal = try await refusal(try pki.chain(options: options))
        #expect(refusal.code == .intermediateMarkerMissing)
        #expect(refusal.message.contains("1.2.840.113635.100.6.2.15"))
    }

    /// Apple's policy names the intermediate: another name (also beside the right one, or
    /// Apple's with a suffix) is refused where the name is checked — under Apple's root, or
    /// under every anchor when so configured — and taken under another configured anchor by
    /// default (Apple's test environment names its intermediate otherwise).
    @Test(arguments: [
        [AppleIssuerEncryptionRules.intermediateCommonName + " "],
        ["Apple Worldwide Developer Relations CA - G3"],
        [AppleIssuerEncryptionRules.intermediateCommonName, "Other CA"],
        [],
    ])
    func refusesIntermediateWithAnotherName(_ commonNames: [String]) async throws {
        var options = TestPKI.Options()
        options.intermediateName = try DistinguishedName {
            CountryName("US")
            OrganizationName("Test Apple Inc.")
            for name in commonNames { CommonName(name) }
        }
        let chain = try pki.chain(options: options)
        let refusal = try await refusal(chain, validator: pki.validator(intermediateNameCheck: .everyAnchor))
        #expect(refusal.code == .intermediateNameMismatch)
        #expect(refusal.message.contains("Apple Worldwide Developer Relations CA - G2"))
        #expect(await pki.validator().validate(chain).acceptedChain != nil)
    }

    /// RFC 5280: an intermediate that states a key usage must allow keyCertSign to sign the
    /// leaf; one that states none is not refused for it.
    @Test func refusesIntermediateWhoseKeyUsageForbidsSigningCertificates() async throws {
        var options = TestPKI.Options()
        options.intermediateKeyUsage = KeyUsage(digitalSignature: true, cRLSign: true)
        #expect(try await refusal(try pki.chain(options: options)).code == .intermediateKeyUsage)

        options.intermediateKeyUsage = nil
        let validator = pki.validator()
        guard case .accepted = await validator.validate(try pki.chain(options: options)) else {
            Issue.record("an intermediate stating no key usage was refused")
            return
        }
    }

    @Test func refusesUntrustedRootWithIdenticalNames() async throws {
        // An impostor root with the anchor's exact name but its own key signs the intermediate.
        let impostorKey = P384.Signing.PrivateKey()
        let impostorRoot = try TestPKI.makeRoot(key: impostorKey)
        #expect(impostorRoot.subject == pki.root.subject)
        let leaf = try pki.leaf().certificate.derData
        let intermediate = try pki.intermediate(signedBy: impostorKey).derData

        let withoutRoot = try await refusal([leaf, intermediate])
        #expect(withoutRoot.code == .untrustedRoot)
        #expect(withoutRoot.message.contains("not signed by its key"))

        let withRoot = try await refusal([leaf, intermediate, impostorRoot.derData])
        #expect(withRoot.code == .untrustedRoot)
        #expect(withRoot.message.contains("different certificate"))
    }

    @Test func refusesTamperedSignature() async throws {
        var chain = try pki.chain()
        // The last byte of a certificate is the last byte of its ECDSA signature.
        chain[0][chain[0].count - 1] ^= 0x01
        let refusal = try await refusal(chain)
        #expect(refusal.code == .badSignature)
        #expect(refusal.message.contains("certificate 1"))
    }

    @Test func refusesLeafOnly() async throws {
        #expect(try await refusal([try pki.leaf().certificate.derData]).code == .incompleteChain)
    }

    @Test func refusesWrongOrder() async throws {
        let chain = try pki.chain()
        #expect(try await refusal([chain[1], chain[0]]).code == .wrongOrder)
        #expect(try await refusal([chain[0], pki.root.derData, chain[1]]).code == .wrongOrder)
    }

    @Test func refusesBytesThatAreNotDER() async throws {
        let chain = try pki.chain()
        let pem = Data(try pki.root.serializeAsPEM().pemString.utf8)
        for bad in [Data("not a certificate".utf8), chain[1].prefix(100), pem] {
            let refusal = try await refusal([chain[0], bad])
            #expect(refusal.code == .malformedCertificate)
            #expect(refusal.message.contains("certificate 2"))
        }
    }

    @Test func refusesAnEmptyList() async throws {
        #expect(try await refusal([]).code == .emptyChain)
    }

    @Test func refusesTooManyCertificates() async throws {
        let chain = try pki.chain()
        let refusal = try await refusal(Array(repeating: chain[1], count: 11))
        #expect(refusal.code == .tooManyCertificates)
        #expect(refusal.message.contains("11"))
    }

    @Test func refusesAnOversizedCertificate() async throws {
        let refusal = try await refusal([Data(count: 16 * 1024 + 1)])
        #expect(refusal.code == .certificateTooLarge)
    }

    @Test func refusesALeafThatIsACertificateAuthority() async throws {
        #expect(try await refusal([pki.root.derData]).code == .leafIsCertificateAuthority)
    }

    @Test func refusesALeafWithoutItsIntermediateButWithTheRoot() async throws {
        let refusal = try await refusal([try pki.leaf().certificate.derData, pki.root.derData])
        #expect(refusal.code == .wrongOrder)
    }

    @Test func everyRefusalCodeIsStableSnakeCase() {
        for code in ChainRefusal.Code.allCases {
            #expect(code.rawValue.allSatisfy { $0.isLowercase || $0 == "_" || $0.isNumber }, "\(code.rawValue)")
        }
    }
}

/// A clock tests can move; the lock makes the @Sendable closure safe to call from any task.
final class TestClock: @unchecked Sendable {
    // @unchecked: `now` is only touched while holding `lock`.
    private let lock = NSLock()
    private var current: Date

    init(_ date: Date) { current = date }

    var now: Date {
        get { lock.withLock { current } }
        set { lock.withLock { current = newValue } }
    }
}

@Suite("Apple chain policy: cache")
struct ChainCacheTests {
    let pki: TestPKI

    init() throws {
        pki = try TestPKI()
    }

    @Test func aRepeatedChainIsServedFromTheCache() async throws {
        let validator = pki.validator()
        let chain = try pki.chain()
        let first = try #require(await validator.validate(chain).acceptedChain)
        #expect(validator.cacheStatistics == (chains: 1, hits: 0))
        let second = try #require(await validator.validate(chain).acceptedChain)
        #expect(validator.cacheStatistics == (chains: 1, hits: 1))
        #expect(first.leafFingerprint == second.leafFingerprint)
        // A refused chain is not remembered.
        #expect(await validator.validate(Array(chain.reversed())).acceptedChain == nil)
        #expect(validator.cacheStatistics == (chains: 1, hits: 1))
        // Capacity 0: nothing is remembered, every call checks the chain again.
        let uncached = pki.validator(cacheCapacity: 0)
        _ = try #require(await uncached.validate(chain).acceptedChain)
        _ = try #require(await uncached.validate(chain).acceptedChain)
        #expect(uncached.cacheStatistics == (chains: 0, hits: 0))
    }

    @Test func aCachedChainIsStillCheckedAgainstTheClock() async throws {
        let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))
        let validator = pki.validator(validationTime: { clock.now })
        let chain = try pki.chain()
        #expect(await validator.validate(chain).acceptedChain != nil)
        clock.now = Date(timeIntervalSince1970: 1_950_000_000)
        #expect(await validator.validate(chain).refusal?.code == .certificateExpired)
    }

    @Test func refusalsAreNotCachedAsAcceptance() async throws {
        let validator = pki.validator()
        var chain = try pki.chain()
        chain[0][chain[0].count - 1] ^= 0x01
        #expect(await validator.validate(chain).refusal?.code == .badSignature)
        #expect(await validator.validate(chain).refusal?.code == .badSignature)
    }

    @Test func aDifferentChainIsNotConfusedWithACachedOne() async throws {
        let validator = pki.validator()
        let good = try pki.chain()
        #expect(await validator.validate(good).acceptedChain != nil)
        var tampered = good
        tampered[0][tampered[0].count - 1] ^= 0x01
        #expect(await validator.validate(tampered).refusal?.code == .badSignature)
    }
}
