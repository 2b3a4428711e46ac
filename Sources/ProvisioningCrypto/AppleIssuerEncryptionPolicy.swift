import Foundation
import SwiftASN1
import X509

/// The issuer-encryption rules as a swift-certificates `VerifierPolicy`.
///
/// Handles the leaf's critical marker extension (so the verifier does not reject it as an
/// unknown critical extension), requires exactly leaf → intermediate → anchor, and applies
/// ``AppleIssuerEncryptionRules`` to the leaf and the intermediate. It checks validity
/// periods only when given a clock: Apple's own policy does not, because Wallet supplies the
/// current leaf and leaves rotate.
struct AppleIssuerEncryptionPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [AppleIssuerEncryptionRules.leafMarkerOID]
    let validationTime: (@Sendable () -> Date)?

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "chain must be leaf, intermediate, anchor; got \(chain.count) certificates")
        }
        if let refusal = AppleIssuerEncryptionRules.checkLeaf(chain[0]) ?? AppleIssuerEncryptionRules.checkIntermediate(chain[1]) {
            return .failsToMeetPolicy(reason: refusal.description)
        }
        if let now = validationTime?() {
            for certificate in chain where now < certificate.notValidBefore || now > certificate.notValidAfter {
                return .failsToMeetPolicy(reason: "\(certificate.subject) is outside its validity period")
            }
        }
        return .meetsPolicy
    }
}
