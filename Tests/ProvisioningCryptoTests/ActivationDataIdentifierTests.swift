import Foundation
@testable import ProvisioningCrypto
import ProvisioningModels
import Testing

/// Activation-data ids are version 7 UUIDs: time first, so they sort by issue time.
@Suite("Activation data ids")
struct ActivationDataIdentifierTests {
    @Test func knownAnswer() {
        // 2022-02-22T19:22:22Z = 1645557742000 ms = 0x017F22E279B0 (the timestamp of RFC 9562's
        // example); every random bit set, then none, shows which bits are fixed.
        let ones = ActivationDataIssuer.identifier(milliseconds: 1_645_557_742_000, random: (.max, .max))
        let zeros = ActivationDataIssuer.identifier(milliseconds: 1_645_557_742_000, random: (0, 0))
        #expect(ones == "017F22E2-79B0-7FFF-BFFF-FFFFFFFFFFFF")
        #expect(zeros == "017F22E2-79B0-7000-8000-000000000000")
    }

    @Test func writtenExactlyAsFoundationWritesTheSameBits() {
        // The id is formatted by hand; Foundation's `UUID.uuidString` of the same 128 bits is
        // the reference, over random times and random bits.
        var random = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let milliseconds = random.next() & 0xFFFF_FFFF_FFFF
            let bits = (random.next(), random.next())
            let id = ActivationDataIssuer.identifier(milliseconds: milliseconds, random: bits)
            let high = ((milliseconds << 16) | 0x7000 | (bits.0 & 0x0FFF)).bigEndian
            let low = (0x8000_0000_0000_0000 | (bits.1 & 0x3FFF_FFFF_FFFF_FFFF)).bigEndian
            let expected = withUnsafeBytes(of: (high, low)) { bytes in
                UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15])).uuidString
            }
            #expect(id == expected)
            if id != expected { return }
        }
    }

    @Test func versionVariantAndTimeOfARealId() throws {
        let date = Date(timeIntervalSince1970: 1_800_000_000.123)
        let id = ActivationDataIssuer.identifier(at: date)
        let uuid = try #require(UUID(uuidString: id))
        #expect(uuid.uuidString == id)
        let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
        #expect(bytes[6] >> 4 == 7, "version 7")
        #expect(bytes[8] >> 6 == 0b10, "RFC 9562 variant")
        let milliseconds = bytes[0..<6].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        #expect(milliseconds == 1_800_000_000_123)
    }

    @Test func idsSortByTimeAndDoNotRepeat() {
        // Four ids per millisecond: ids of different milliseconds sort in time order (within
        // one millisecond their order is random).
        var random = SystemRandomNumberGenerator()
        let ids = (0..<2_000).map { ActivationDataIssuer.identifier(milliseconds: 1_800_000_000_000 + UInt64($0 / 4), random: (random.next(), random.next())) }
        #expect(Set(ids).count == ids.count)
        let firstOfEach = stride(from: 0, to: ids.count, by: 4).map { ids[$0] }
        #expect(firstOfEach == firstOfEach.sorted())
        // The same instant twice still gives different ids: the random part is drawn per id.
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let sameInstant = (0..<1_000).map { _ in ActivationDataIssuer.identifier(at: now) }
        #expect(Set(sameInstant).count == sameInstant.count)
        #expect(sameInstant.allSatisfy { $0.hasPrefix("01A3185C-5000-7") })
    }

    @Test func issueUsesATimeOrderedIdUnlessOneIsGiven() throws {
        let issuer = ActivationDataIssuer(signingKey: .generate())
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let issued = try issuer.issue(panUniqueReference: "pur-1", nonce: Data([1, 2, 3]), deviceType: .phone, now: now)
        #expect(issued.claims.id.hasPrefix("01A3185C-5000-7"))
        let given = try issuer.issue(panUniqueReference: "pur-1", nonce: Data([1, 2, 3]), deviceType: .phone, now: now, id: "jti-given")
        #expect(given.claims.id == "jti-given")
    }
}
