import Foundation
import ProvisioningModels
import Testing

@Suite("Strict JSON")
struct StrictJSONTests {
    static func problem(_ text: String) -> String? {
        problem(Data(text.utf8))
    }

    static func problem(_ data: Data) -> String? {
        do {
            try StrictJSON.check(data)
            return nil
        } catch {
            return error.message
        }
    }

    @Test(arguments: [
        #"{}"#, #"[]"#, #" {"a" : 1 , "b":[true,false,null,"x"]} "#, "\u{FEFF}{\"a\":1}", #"{"n":[0,-0,1.5,-2e10,3E+2,4e-3,123456789012345678901234567890]}"#,
        #"{"s":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00 é 😀"}"#, #""top-level string""#, "1", "null",
        // Two objects may each name a member once; nested objects have their own names.
        #"{"a":{"a":1},"b":{"a":2},"c":[{"a":1},{"a":1}]}"#,
    ])
    func jsonAsTheRFCWritesItIsAccepted(text: String) {
        #expect(Self.problem(text) == nil, "\(text)")
    }

    @Test func aMemberNamedTwiceIsRefusedNamingIt() {
        #expect(Self.problem(#"{"status":"BLOCKED","status":"ACTIVE"}"#) == "field status appears more than once")
        // Names are compared after their escapes are read.
        #expect(Self.problem(#"{"status":"BLOCKED","st\u0061tus":"ACTIVE"}"#) == "field status appears more than once")
        #expect(Self.problem(#"{"a":{"b":1,"b":2}}"#) == "field a.b appears more than once")
        #expect(Self.problem(#"{"list":[{"x":1},{"x":1,"x":2}]}"#) == "field list[1].x appears more than once")
        // A name that is not plain is not echoed (it may hold anything).
        #expect(Self.problem(#"{"4111 1111":1,"4111 1111":2}"#) == "a member name appears more than once in one object")
        #expect(Self.problem(#"{"a":{"é":1,"é":2}}"#) == "a member name appears more than once in one object (in a)")
        // Names Foundation's decoder takes for one (canonical equivalence) are one name here too.
        #expect(Self.problem("{\"\u{212A}\":1,\"K\":2}") == "field K appears more than once")
        #expect(Self.problem("{\"e\u{301}\":1,\"é\":2}") == "a member name appears more than once in one object")
        // Names with digits are not shown (they could spell a card number), nor are card
        // numbers that array indices spell.
        #expect(Self.problem(#"{"a4111____1111____1111____1111":1,"a4111____1111____1111____1111":2}"#) == "a member name appears more than once in one object")
        let nested = String(repeating: "[", count: 3) + #"{"x":1,"x":2}"# + String(repeating: "]", count: 3)
        #expect(Self.problem(nested) == "field [0][0][0].x appears more than once")
    }

    @Test(arguments: [(String, String)]([
        (#"{"a":1,}"#, "a comma before '}' at byte 7"),
        (#"[1,2,]"#, "a comma before ']' at byte 5"),
        (#"{"a":01}"#, "a number with a leading zero at byte 6"),
        (#"{"a":1.}"#, "a digit was expected after '.' in a number at byte 7"),
        (#"{"a":1e}"#, "a digit was expected in a number's exponent at byte 7"),
        (#"{"a":-}"#, "a digit was expected in a number at byte 6"),
        (#"{"a":+1}"#, "a value was expected at byte 5"),
        (#"444e4242"#, "a number beyond the range of a 64-bit floating-point number at byte 8"),
        (#"{"a":-1e309}"#, "a number beyond the range of a 64-bit floating-point number at byte 11"),
        (#"{"a":NaN}"#, "a value was expected at byte 5"),
        (#"{"a":tru}"#, "a value was expected at byte 5"),
        (#"{"a":1}x"#, "more text after the JSON value at byte 7"),
        (#"{"a":1}{}"#, "more text after the JSON value at byte 7"),
        (#"{"a":"\x"}"#, "an escape JSON does not have at byte 8"),
        (#"{"a":"\ud800"}"#, #"a \u escape of a lone surrogate at byte 12"#),
        (#"{"a":"\udc00"}"#, #"a \u escape of a lone surrogate at byte 12"#),
        (#"{"a":"\ud800\u0041"}"#, #"a \u escape of a lone surrogate at byte 18"#),
        (#"{"a":"\u12"}"#, #"four hexadecimal digits were expected after \u at byte 10"#),
        ("{\"a\":\"x\ty\"}", "a control character inside a string (it must be escaped) at byte 7"),
        (#"{"a" 1}"#, "':' after a member name expected at byte 5"),
        (#"{a:1}"#, "a member name (a string) was expected at byte 1"),
        (#"{"a":1"#, "the text ends where ',' or '}' was expected at byte 6"),
        (#"{"a":"#, "the text ends where a value was expected at byte 5"),
        (#""abc"#, "the text ends inside a string at byte 4"),
        ("", "the text ends where a value was expected at byte 0"),
        ("{\"a\":1}\u{0C}", "more text after the JSON value at byte 7"),
        ("\u{A0}{}", "a value was expected at byte 0"),
    ]))
    func whatTheRFCDoesNotAllowIsRefusedSayingWhereAndWhy(text: String, why: String) {
        #expect(Self.problem(text) == "body is not valid JSON: \(why)", "\(text)")
    }

    @Test func onlyWellFormedUTF8IsJSON() {
        let refusals: [[UInt8]] = [
            [0x22, 0xC0, 0xAF, 0x22],  // overlong '/'
            [0x22, 0xE9, 0x22],  // Latin-1 é
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // an encoded surrogate (CESU-8)
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // past U+10FFFF
            [0x22, 0xE2, 0x82, 0x22],  // cut short
            Array("{\"a\":1}".utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }),  // UTF-16LE
        ]
        for bytes in refusals {
            #expect(Self.problem(Data(bytes))?.hasPrefix("body is not valid JSON: ") == true, "\(bytes)")
        }
        #expect(Self.problem(Data([0x22, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xF4, 0x8F, 0xBF, 0xBF, 0x22])) == nil)
    }

    @Test func nestingIsBounded() {
        let deepest = String(repeating: "[", count: StrictJSON.maximumDepth) + String(repeating: "]", count: StrictJSON.maximumDepth)
        #expect(Self.problem(deepest) == nil)
        let deeper = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(Self.problem(deeper) == "body is not valid JSON: arrays and objects nested more than 64 deep at byte 64")
        let objects = String(repeating: #"{"a":"#, count: 65) + "1" + String(repeating: "}", count: 65)
        #expect(Self.problem(objects)?.contains("nested more than 64 deep") == true)
    }

    @Test func wireEnumsTakeOnlyTheirExactSpelling() throws {
        #expect(try JSONDecoder().decode([CardStatus].self, from: Data(#"["BLOCKED","ACTIVE"]"#.utf8)) == [.blocked, .active])
        // KELVIN SIGN for K: canonically equivalent in Swift, another value to a byte reader.
        #expect(CardStatus(rawValue: "BLOC\u{212A}ED") == .blocked, "Swift's own initializer does take it")
        #expect(CardStatus(exactly: "BLOC\u{212A}ED") == nil)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([CardStatus].self, from: Data(#"["BLOC\u212AED"]"#.utf8)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([TokenEventType].self, from: Data(#"["created"]"#.utf8)) }
        #expect(try JSONDecoder().decode([DeviceType].self, from: Data(#"["PHONE"]"#.utf8)) == [.phone])
    }
}
