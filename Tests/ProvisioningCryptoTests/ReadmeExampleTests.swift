import Crypto
import Foundation
import ProvisioningCrypto
import ProvisioningModels
import Testing

/// The README's back-end example, step for step, against Apple's real chain.
@Suite("README example")
struct ReadmeExampleTests {
    @Test func sealingExampleProducesAResponseForApplesChain() async throws {
        let certificates = [try TestResources.der("apple-encipherment-leaf-prod-2020.pem"), try TestResources.der("apple-wwdr-ca-g2.pem")]
        let nonce = Data([1, 2, 3, 4])
        let nonceSignature = Data([5, 6, 7, 8])
        let signingKey = SigningKey.generate()

        let validator = AppleChainValidator()
        guard case .accepted(let chain) = await validator.validate(certificates) else {
            Issue.record("Apple's production chain was refused")
            return
        }
        let payload = try PassDataPayload(
            primaryAccountNumber: PrimaryAccountNumber("4111111111111111"),
            expiration: CardExpiration("11/28"),
            name: "Jane Appleseed",
            nonce: nonce,
            nonceSignature: nonceSignature
        )
        let sealed = try ECCV2.seal(payload.jsonData(), for: chain.leafPublicKey)
        let activation = try ActivationDataIssuer(signingKey: signingKey)
            .issue(panUniqueReference: "pur-123", nonce: nonce, deviceType: .phone, now: Date())

        #expect(sealed.ephemeralPublicKey.count == 65)
        #expect(sealed.encryptedData.count == payload.jsonData().count + 16)
        let verifier = ActivationDataVerifier(keys: [signingKey.id: signingKey.privateKey.publicKey])
        #expect(verifier.verify(activation.token, panUniqueReference: "pur-123", nonce: nonce, now: Date()).claims != nil)
    }
}
