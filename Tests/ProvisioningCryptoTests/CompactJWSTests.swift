import Crypto
import Foundation
import ProvisioningCrypto
import Testing

/// Reading a compact JWS: header and payload must be JSON objects with distinct member names.
@Suite("Compact JWS")
struct CompactJWSTests {
    let key = P256.Signing.PrivateKey()

    /// `header.payload.signature`, validly signed with `key`, from the exact JSON texts given.
    func token(header: String = #"{"alg":"ES256","kid":"k1","typ":"JWT"}"#, payload: String) throws -> String {
        let signingInput = Data(header.utf8).base64URLEncodedString + "." + Data(payload.utf8).base64URLEncodedString
        return signingInput + "." + (try key.signature(for: Data(signingInput.utf8)).rawRepresentation.base64URLEncodedString)
    }

    @Test(arguments: [
        #"{"sub":"alice","sub":"bob","exp":4102444800}"#,
        #"{"sub":"alice","s\u0075b":"bob","exp":4102444800}"#,
        #"{"sub":"alice", "exp":4102444800 , "sub" : "bob"}"#,
        #"{"exp":1,"aud":["a","b"],"exp":4102444800}"#,
    ])
    func aPayloadNamingAMemberTwiceIsRefused(payload: String) throws {
        // Read (the signature is checked first), then refused by the claims check.
        #expect(!CompactJWS.claimsHaveUniqueMemberNames(try CompactJWS.parse(try token(payload: payload))))
    }

    @Test func aHeaderNamingAMemberTwiceIsRefused() throws {
        let twice = try token(header: #"{"alg":"none","alg":"ES256","kid":"k1"}"#, payload: #"{"sub":"alice"}"#)
        #expect(throws: CompactJWS.ParseError.malformed) { try CompactJWS.parse(twice) }
        let escaped = try token(header: #"{"kid":"k1","alg":"ES256","k\u0069d":"k2"}"#, payload: #"{"sub":"alice"}"#)
        #expect(throws: CompactJWS.ParseError.malformed) { try CompactJWS.parse(escaped) }
    }

    @Test(arguments: [
        #"{"sub":"alice","exp":4102444800}"#,
        #" { "sub" : "al\"ice}\\" , "exp" : 4.1e9 , "nbf":-1, "ok":true, "no":null } "#,
        #"{"aud":["a","a"],"nested":{"x":1,"x":2,"y":[{"z":"]}"}]},"sub":"alice"}"#,
        #"{"s\u0075b":"alice","su":"b","subs":"c"}"#,
        #"{}"#,
    ])
    func distinctMembersAreReadWhateverTheirValues(payload: String) throws {
        let parts = try CompactJWS.parse(try token(payload: payload))
        #expect(parts.payload == Data(payload.utf8))
        #expect(CompactJWS.isValidSignature(parts, key: key.publicKey))
        #expect(CompactJWS.claimsHaveUniqueMemberNames(parts))
    }

    @Test(arguments: [#"["sub","alice"]"#, #""alice""#, #"{"sub":"alice"} {}"#, #"{"sub":"alice""#, #"{"sub"}"#, #"{"sub":"alice",}"#, ""])
    func aPayloadThatIsNotOneObjectIsRefused(payload: String) throws {
        #expect(!CompactJWS.claimsHaveUniqueMemberNames(try CompactJWS.parse(try token(payload: payload))))
    }
}
