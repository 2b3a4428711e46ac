import Foundation
import ProvisioningCrypto
import Testing

@Suite("base64url")
struct Base64URLTests {
    /// RFC 4648 §10 test vectors, in the URL alphabet without padding.
    @Test(arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
    ])
    func rfc4648Vectors(plain: String, encoded: String) throws {
        #expect(Data(plain.utf8).base64URLEncodedString == encoded)
        #expect(try #require(Data(base64URLEncoded: encoded)) == Data(plain.utf8))
    }

    @Test func usesTheURLAlphabet() throws {
        let bytes = Data([0xFB, 0xFF, 0xBF, 0xFE])
        #expect(bytes.base64URLEncodedString == "-_-__g")
        #expect(Data(base64URLEncoded: "-_-__g") == bytes)
    }

    @Test func agreesWithFoundationForEveryLengthUpTo100() throws {
        var generator = SystemRandomNumberGenerator()
        for length in 0...100 {
            let bytes = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let reference = bytes.base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(bytes.base64URLEncodedString == reference, "length \(length)")
            #expect(Data(base64URLEncoded: reference) == bytes, "length \(length)")
        }
    }

    @Test(arguments: ["Zm9v=", "Zm9vY", "Zm+v", "Zm/v", "Zm 9v", "Zm9v\n", "é"])
    func refusesPaddingForeignCharactersAndImpossibleLengths(text: String) {
        #expect(Data(base64URLEncoded: text) == nil)
    }

    @Test func refusesNonCanonicalTrailingBits() {
        // "Zg" is the only encoding of "f"; "Zh" carries a stray bit in its last character.
        #expect(Data(base64URLEncoded: "Zg") == Data("f".utf8))
        #expect(Data(base64URLEncoded: "Zh") == nil)
        #expect(Data(base64URLEncoded: "Zm9") == nil)
    }
}
