import Benchmark
import Crypto
import Foundation
import ProvisioningCrypto
import ProvisioningModels
import SwiftASN1
import X509

/// ProvisioningCrypto's hot paths next to the raw P-256 operations they are built on.
///
/// The `raw.*` benchmarks are the floor: `seal` is one ephemeral key (`ECCV2.ephemeralKey()`)
/// + ECDH plus a KDF and AES-GCM. `raw.keygen+ecdh` is the same with swift-crypto's own key
/// generation (BoringSSL's FIPS self-test on the key, and a compact-representable public point
/// by default), `raw.keygen-noncompact+ecdh` without the compactness requirement, so the three
/// show what the self-test and the compactness each cost; `activation.*` is one ECDSA signature or verification plus JSON and base64url;
/// uncached chain validation is two ECDSA verifications plus parsing and policy checks, and
/// a cached one should cost a dictionary lookup. `run.sh` prints the ratios.
let benchmarks: @Sendable () -> Void = {
    // Each benchmark stops at whichever limit it reaches first, so the slow ones (chain
    // validation, about a millisecond) run ~4 s and the whole suite stays well under 2 min.
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput],
        timeUnits: .microseconds,
        warmupIterations: 20,
        maxDuration: .seconds(4),
        maxIterations: 20_000
    )

    // MARK: Baselines: raw swift-crypto P-256

    Benchmark("raw.keygen+ecdh") { benchmark, leafKey in
        for _ in benchmark.scaledIterations {
            let ephemeral = P256.KeyAgreement.PrivateKey()
            blackHole(try? ephemeral.sharedSecretFromKeyAgreement(with: leafKey))
        }
    } setup: {
        try Fixtures.load().leafKey
    }

    Benchmark("raw.keygen-noncompact+ecdh") { benchmark, leafKey in
        for _ in benchmark.scaledIterations {
            let ephemeral = P256.KeyAgreement.PrivateKey(compactRepresentable: false)
            blackHole(try? ephemeral.sharedSecretFromKeyAgreement(with: leafKey))
        }
    } setup: {
        try Fixtures.load().leafKey
    }

    Benchmark("raw.ephemeral+ecdh") { benchmark, leafKey in
        for _ in benchmark.scaledIterations {
            let ephemeral = ECCV2.ephemeralKey()
            blackHole(try? ephemeral.sharedSecretFromKeyAgreement(with: leafKey))
        }
    } setup: {
        try Fixtures.load().leafKey
    }

    Benchmark("raw.ecdsa.sign") { benchmark, key in
        for _ in benchmark.scaledIterations {
            blackHole(try? key.signature(for: Fixtures.message))
        }
    } setup: {
        P256.Signing.PrivateKey()
    }

    Benchmark("raw.ecdsa.verify") { (benchmark, signed: SignedMessage) in
        for _ in benchmark.scaledIterations {
            blackHole(signed.key.isValidSignature(signed.signature, for: Fixtures.message))
        }
    } setup: {
        let key = P256.Signing.PrivateKey()
        let signature = try key.signature(for: Fixtures.message)
        guard key.publicKey.isValidSignature(signature, for: Fixtures.message) else {
            throw BenchmarkSetupError("raw.ecdsa.verify: the reference signature does not verify")
        }
        return SignedMessage(key: key.publicKey, signature: signature)
    }

    // MARK: ECC_V2 sealing

    Benchmark("seal") { benchmark, leafKey in
        for _ in benchmark.scaledIterations {
            blackHole(try ECCV2.seal(Fixtures.passData, for: leafKey))
        }
    } setup: {
        try Fixtures.load().leafKey
    }

    // MARK: Apple chain validation

    Benchmark("chain.validate.uncached") { (benchmark, state: ChainState) in
        for _ in benchmark.scaledIterations {
            blackHole(await state.validator.validate(state.chain))
        }
    } setup: {
        let chain = try Fixtures.load().chain
        let validator = AppleChainValidator(configuration: .init(cacheCapacity: 0))
        try await Fixtures.expectAccepted(chain, by: validator)
        return ChainState(validator: validator, chain: chain)
    }

    Benchmark("chain.validate.cached") { (benchmark, state: ChainState) in
        for _ in benchmark.scaledIterations {
            blackHole(await state.validator.validate(state.chain))
        }
    } setup: {
        let chain = try Fixtures.load().chain
        let validator = AppleChainValidator()
        // Also warms the cache, so every measured call is a hit.
        try await Fixtures.expectAccepted(chain, by: validator)
        return ChainState(validator: validator, chain: chain)
    }

    // MARK: Activation data

    Benchmark("activation.sign") { benchmark, issuer in
        for _ in benchmark.scaledIterations {
            blackHole(
                try issuer.issue(panUniqueReference: Fixtures.panUniqueReference, nonce: Fixtures.nonce, deviceType: .phone, now: Date())
            )
        }
    } setup: {
        ActivationDataIssuer(signingKey: SigningKey.generate())
    }

    Benchmark("activation.verify") { (benchmark, state: IssuedToken) in
        for _ in benchmark.scaledIterations {
            blackHole(
                state.verifier.verify(state.token, panUniqueReference: Fixtures.panUniqueReference, nonce: Fixtures.nonce, now: Date())
            )
        }
    } setup: {
        let key = SigningKey.generate()
        let token = try ActivationDataIssuer(signingKey: key)
            .issue(panUniqueReference: Fixtures.panUniqueReference, nonce: Fixtures.nonce, deviceType: .phone, now: Date())
            .token
        let verifier = ActivationDataVerifier(keys: [key.id: key.privateKey.publicKey])
        let verdict = verifier.verify(token, panUniqueReference: Fixtures.panUniqueReference, nonce: Fixtures.nonce, now: Date())
        guard verdict.claims != nil else {
            throw BenchmarkSetupError("activation.verify: a freshly issued token was refused: \(verdict)")
        }
        return IssuedToken(verifier: verifier, token: token)
    }
}

/// Inputs shared by the benchmarks: the real Apple production chain and realistic payloads.
enum Fixtures {
    /// A realistic `encryptedPassData` plaintext (~200 bytes; test card number).
    static let passData = Data(
        (#"{"primaryAccountNumber":"4111111111111111","expiration":"12/29","name":"Jane Appleseed","#
            + #""nonce":"9f86d081","nonceSignature":"3045022100c1f2a3b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f80"}"#).utf8
    )
    /// The message signed by the raw ECDSA baselines: as long as the pass data.
    static let message = Data(repeating: 0x5a, count: 200)
    /// The card the activation benchmarks issue for.
    static let panUniqueReference = "pur-123"
    /// The Wallet nonce the activation benchmarks issue for.
    static let nonce = Data(repeating: 7, count: 32)

    /// The production chain [leaf, intermediate] as DER and the leaf's key-agreement key.
    struct Chain {
        var chain: [Data]
        var leafKey: P256.KeyAgreement.PublicKey
    }

    /// Where the PEM files are looked for: the crypto tests' resources.
    static var certificateDirectories: [URL] {
        // #filePath is <Benchmarks package>/Benchmarks/CryptoBenchmarks/CryptoBenchmarks.swift.
        let package = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return [
            package.appendingPathComponent("../Tests/ProvisioningCryptoTests/Resources/certs").standardizedFileURL
        ]
    }

    static func load() throws -> Chain {
        let names = ["apple-encipherment-leaf-prod-2020.pem", "apple-wwdr-ca-g2.pem"]
        guard
            let directory = certificateDirectories.first(where: { directory in
                names.allSatisfy { FileManager.default.fileExists(atPath: directory.appendingPathComponent($0).path) }
            })
        else {
            throw BenchmarkSetupError("certificates \(names) not found in \(certificateDirectories.map(\.path))")
        }
        let certificates = try names.map { name in
            try Certificate(pemEncoded: String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8))
        }
        let chain = try certificates.map { certificate in
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Data(serializer.serializedBytes)
        }
        guard let signingKey = P256.Signing.PublicKey(certificates[0].publicKey) else {
            throw BenchmarkSetupError("the leaf certificate does not hold a P-256 key")
        }
        let leafKey = try P256.KeyAgreement.PublicKey(rawRepresentation: signingKey.rawRepresentation)
        return Chain(chain: chain, leafKey: leafKey)
    }

    /// Fails the benchmark's setup unless `validator` accepts `chain`.
    static func expectAccepted(_ chain: [Data], by validator: AppleChainValidator) async throws {
        let verdict = await validator.validate(chain)
        guard verdict.acceptedChain != nil else {
            throw BenchmarkSetupError("the Apple production chain was refused: \(String(describing: verdict.refusal))")
        }
    }
}

/// A P-256 public key and its signature over ``Fixtures/message``.
struct SignedMessage {
    var key: P256.Signing.PublicKey
    var signature: P256.Signing.ECDSASignature
}

/// A validator and the DER chain it is asked to validate.
struct ChainState {
    var validator: AppleChainValidator
    var chain: [Data]
}

/// A verifier and a token it should accept.
struct IssuedToken {
    var verifier: ActivationDataVerifier
    var token: String
}

/// A setup failure; the benchmark runner reports it and the run fails.
struct BenchmarkSetupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
