import Foundation
import ProvisioningModels
import Testing

/// The hand-written JSON of the hot wire documents must be byte-for-byte what `JSONEncoder`
/// (sorted keys, unescaped slashes) writes.
@Suite struct CompactJSONWriterTests {
    struct Sample: Encodable {
        var a: String
        var b: Int64
        var c: String?
        var d: String
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    static func written(_ sample: Sample) -> Data {
        var writer = CompactJSONWriter()
        writer.add("a", sample.a)
        writer.add("b", sample.b)
        writer.add("c", sample.c)
        writer.add("d", sample.d)
        return writer.finish()
    }

    static let awkwardStrings: [String] = [
        "", "plain", "Jane Appleseed", "quote\"inside", "back\\slash", "a/b/c", "\u{8}\u{9}\u{A}\u{C}\u{D}",
        "\u{0}\u{1}\u{1F}\u{7F}", "Zoë Ñúñez", "李小龙", "emoji 💳👩🏽‍💻", "\u{2028}\u{2029}", "</script>", "tab\tand\nnewline",
    ]

    @Test(arguments: awkwardStrings)
    func stringsAreEscapedExactlyAsJSONEncoderDoes(_ text: String) throws {
        let sample = Sample(a: text, b: -42, c: text, d: "x" + text)
        #expect(Self.written(sample) == (try Self.encoder().encode(sample)))
    }

    @Test func everyControlAndASCIICharacterMatches() throws {
        for scalar in (0...0x7F).compactMap(Unicode.Scalar.init) {
            let sample = Sample(a: String(Character(scalar)), b: 0, c: nil, d: "\(scalar)\(scalar)")
            #expect(Self.written(sample) == (try Self.encoder().encode(sample)), "character \(scalar.value)")
        }
    }

    @Test func randomStringsAndIntegersMatch() throws {
        var generator = SplitMix(seed: 0x5EED)
        for _ in 0..<500 {
            let length = Int.random(in: 0...24, using: &generator)
            let scalars = (0..<length).compactMap { _ -> Unicode.Scalar? in
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: Unicode.Scalar(UInt8.random(in: 0...0x7F, using: &generator))
                case 1: Unicode.Scalar(UInt32.random(in: 0x80...0x7FF, using: &generator))
                case 2: Unicode.Scalar(UInt32.random(in: 0x800...0xD7FF, using: &generator))
                default: Unicode.Scalar(UInt32.random(in: 0x1_0000...0x10_FFFF, using: &generator))
                }
            }
            var text = ""
            text.unicodeScalars.append(contentsOf: scalars)
            let sample = Sample(a: text, b: Int64.random(in: .min ... .max, using: &generator), c: Bool.random(using: &generator) ? nil : text, d: String(text.reversed()))
            #expect(Self.written(sample) == (try Self.encoder().encode(sample)))
        }
    }

    @Test func base64MembersMatchBase64Data() throws {
        struct Bytes: Encodable { var x: Base64Data }
        for count in [0, 1, 2, 3, 4, 65, 1000] {
            let data = Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
            var writer = CompactJSONWriter()
            writer.addBase64("x", data)
            #expect(writer.finish() == (try Self.encoder().encode(Bytes(x: Base64Data(data)))))
        }
    }

    /// One value has one base64 text: bits set after the last byte, missing padding and
    /// whitespace are refused with their own message; canonical text decodes.
    @Test func base64DataTakesOnlyTheCanonicalText() throws {
        struct Bytes: Codable { var x: Base64Data }
        func decode(_ text: String) -> Result<Data, DecodingError> {
            do {
                return .success(try JSONDecoder().decode(Bytes.self, from: Data(#"{"x":"\#(text)"}"#.utf8)).x.data)
            } catch let error as DecodingError {
                return .failure(error)
            } catch {
                Issue.record("unexpected \(error)")
                return .failure(DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "")))
            }
        }
        func refusal(_ text: String) -> String? {
            guard case .failure(.dataCorrupted(let context)) = decode(text) else { return nil }
            return context.debugDescription
        }
        #expect(try decode("AQ==").get() == Data([1]))
        #expect(try decode("AQI=").get() == Data([1, 2]))
        #expect(try decode("").get() == Data())
        #expect(Data(base64Encoded: "AR==") == Data([1]), "Foundation ignores the stray bits; the check below is what refuses them")
        #expect(refusal("AR==") == Base64Data.notCanonical)
        #expect(refusal("AQJ=") == Base64Data.notCanonical)
        #expect(refusal("AQ") == Base64Data.notBase64)
        #expect(refusal("AQ== ") == Base64Data.notBase64)
        #expect(refusal("A-==") == Base64Data.notBase64)
    }

    @Test func signedCardResponseMatchesItsCodableForm() throws {
        let response = SignedCardResponse(activationData: Data("a.b.c".utf8), ephemeralPublicKey: Data(repeating: 4, count: 65), encryptedData: Data((0..<300).map { UInt8($0 % 256) }))
        let json = response.jsonData()
        #expect(json == (try Self.encoder().encode(response)))
        #expect(try JSONDecoder().decode(SignedCardResponse.self, from: json) == response)
    }

    @Test func cardExpirationTextIsTwoDigitsEach() throws {
        #expect(try CardExpiration(month: 1, twoDigitYear: 5).text == "01/05")
        #expect(try CardExpiration(month: 12, twoDigitYear: 30).text == "12/30")
        #expect(try CardExpiration(month: 9, twoDigitYear: 0).text == "09/00")
        #expect(try CardExpiration(month: 10, twoDigitYear: 99).text == "10/99")
    }
}

/// A small seeded generator, so the random comparison is reproducible.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
