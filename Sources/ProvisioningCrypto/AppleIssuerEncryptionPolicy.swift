import Foundation
import SwiftASN1
import X509

/// The issuer-encryption rules as a swift-certificates `VerifierPolicy`.
///
/// Handles the leaf's critical marker extension (so the verifier does not reject it as an
/// unknown critical extension), requires exactly leaf → intermediate → anchor, and applies
/// ``AppleIssuerEncryptionRules`` to the leaf and the intermediate. Validity periods are not
/// its concern: Apple's own policy does not check them, because Wallet supplies the current
/// leaf and leaves rotate; ``AppleChainValidator`` checks them itself when configured with a
/// clock, for a fresh chain and a remembered one alike.
struct AppleIssuerEncryptionPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [AppleIssuerEncryptionRules.leafMarkerOID]

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "chain must be leaf, intermediate, anchor; got \(chain.count) certificates")
        }
        if let refusal = AppleIssuerEncryptionRules.checkLeaf(chain[0]) ?? AppleIssuerEncryptionRules.checkIntermediate(chain[1]) {
            return .failsToMeetPolicy(reason: refusal.description)
        }
        return .meetsPolicy
    }
}
