import Crypto
import Foundation
@testable import ProvisioningCrypto
import Testing

/// The ephemeral keys `ECCV2.seal` uses: uniform scalars in [1, n − 1], drawn again when out of range.
struct EphemeralKeyTests {
    /// n, the order of P-256, big-endian.
    static let order = Data(hex: "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")!

    /// The coordinates of P-256's generator G (SEC 2), and of −G.
    static let generatorX = Data(hex: "6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296")!
    static let generatorY = Data(hex: "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5")!
    static let negatedGeneratorY = Data(hex: "b01cbd1c01e58065711814b583f061e9d431cca994cea1313449bf97c840ae0a")!

    /// Hands out `candidates` in turn and counts the draws.
    final class Candidates {
        var remaining: [Data]
        var draws = 0
        init(_ candidates: [Data]) { remaining = candidates }
        func next() -> SymmetricKey {
            draws += 1
            return SymmetricKey(data: remaining.removeFirst())
        }
    }

    @Test func outOfRangeCandidatesAreDrawnAgainAndTheFirstValidOneIsTheKey() throws {
        var justBelow = Self.order
        justBelow[31] -= 1
        let candidates = Candidates([
            Data(repeating: 0, count: 32),  // zero
            Self.order,  // n
            Data(repeating: 0xFF, count: 32),  // above n
            justBelow,  // n − 1: the largest valid scalar
            Data(repeating: 0x11, count: 32),
        ])
        let key = ECCV2.ephemeralKey(candidates: candidates.next)
        #expect(candidates.draws == 4)
        #expect(key.rawRepresentation == justBelow)
        // (n − 1)·G = −G: the generator's x, and p − y.
        #expect(key.publicKey.x963Representation == Data([0x04]) + Self.generatorX + Self.negatedGeneratorY)
    }

    @Test func theSmallestValidScalarIsAccepted() {
        var one = Data(repeating: 0, count: 32)
        one[31] = 1
        let candidates = Candidates([one])
        let key = ECCV2.ephemeralKey(candidates: candidates.next)
        #expect(key.rawRepresentation == one)
        // 1·G is the generator itself.
        #expect(key.publicKey.x963Representation == Data([0x04]) + Self.generatorX + Self.generatorY)
    }

    @Test func keysFromTheSystemGeneratorAreValidAndDistinct() throws {
        let keys = (0..<64).map { _ in ECCV2.ephemeralKey() }
        #expect(Set(keys.map(\.rawRepresentation)).count == 64)
        for key in keys {
            // Each public key is a point on the curve that decodes as one.
            let point = try P256.KeyAgreement.PublicKey(x963Representation: key.publicKey.x963Representation)
            #expect(point.rawRepresentation == key.publicKey.rawRepresentation)
        }
        // And each is a working pair: its scalar gives its public key, and a key agreement with
        // it gives both sides the same secret.
        let peer = P256.KeyAgreement.PrivateKey()
        for key in keys.prefix(8) {
            #expect(try P256.KeyAgreement.PrivateKey(rawRepresentation: key.rawRepresentation).publicKey.rawRepresentation == key.publicKey.rawRepresentation)
            let ours = try key.sharedSecretFromKeyAgreement(with: peer.publicKey)
            let theirs = try peer.sharedSecretFromKeyAgreement(with: key.publicKey)
            #expect(ours == theirs)
        }
    }

    @Test func aSealWithTheDefaultKeyOpensWithTheRecipientsKey() throws {
        let recipient = P256.KeyAgreement.PrivateKey()
        let sealed = try ECCV2.seal(Data("pass data".utf8), for: recipient.publicKey)
        #expect(try ECCV2.open(sealed, with: recipient) == Data("pass data".utf8))
    }
}
