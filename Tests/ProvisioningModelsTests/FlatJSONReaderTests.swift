import Foundation
import Testing
@testable import ProvisioningModels

/// The fast path must either decline or agree with `JSONDecoder`, byte for byte of input.
@Suite("Flat JSON fast path")
struct FlatJSONReaderTests {
    static let certificates = [Data((0..<700).map { UInt8(truncatingIfNeeded: $0 &* 7) }), Data((0..<1100).map { UInt8(truncatingIfNeeded: $0 &* 13) })]
    static let signedCards = SignedCardRequest(
        externalCardId: "card-1", deviceType: .watch, certificates: certificates,
        nonce: Data("nonce-0123456789".utf8), nonceSignature: Data((0..<64).map { UInt8($0) })
    )
    static let search = TokenSearchRequest(tokenUniqueReferences: (0..<10).map { "DNITHE\($0)" })

    static func json(_ value: some Encodable, _ formatting: JSONEncoder.OutputFormatting = []) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = formatting
        return try encoder.encode(value)
    }

    /// Checks the contract on one body and says whether the fast path took it.
    @discardableResult
    static func agree<T: FlatJSONDecodable & Equatable>(_ type: T.Type, _ data: Data, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let slow = try? JSONDecoder().decode(T.self, from: data)
        guard let fast = T.decodeFlat(data) else { return false }
        #expect(slow == fast, "fast path disagrees on \(String(decoding: data, as: UTF8.self))", sourceLocation: sourceLocation)
        return true
    }

    @Test func takesWhatTheAppSendsInAnyLayoutAndOrder() throws {
        for formatting: JSONEncoder.OutputFormatting in [[], [.sortedKeys], [.prettyPrinted], [.prettyPrinted, .sortedKeys]] {
            #expect(Self.agree(SignedCardRequest.self, try Self.json(Self.signedCards, formatting)))
            #expect(Self.agree(TokenSearchRequest.self, try Self.json(Self.search, formatting)))
        }
        let empty = TokenSearchRequest(tokenUniqueReferences: [])
        #expect(Self.agree(TokenSearchRequest.self, try Self.json(empty)))
        let spaced = Data(#" { "walletType" : "APPLE_PAY" , "tokenUniqueReferences" : [ "A" , "B" ] } "#.utf8)
        #expect(TokenSearchRequest.decodeFlat(spaced) == TokenSearchRequest(tokenUniqueReferences: ["A", "B"]))
        // JSONEncoder escapes "/" by default, so base64 from the app arrives with "\/".
        let slashes = Data(#"{"walletType":"APPLE_PAY","tokenUniqueReferences":["a\/b\/\/c","\/"]}"#.utf8)
        #expect(TokenSearchRequest.decodeFlat(slashes) == TokenSearchRequest(tokenUniqueReferences: ["a/b//c", "/"]))
        #expect(Self.agree(TokenSearchRequest.self, slashes))
        #expect(String(decoding: try Self.json(Self.signedCards), as: UTF8.self).contains(#"\/"#))
    }

    @Test(arguments: [
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["\u0041"]}"#,  // an escape: JSONDecoder reads it
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A\nB"]}"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A\\/B"]}"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A"],}"#,  // JSONDecoder takes a trailing comma
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A",]}"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["Ä"]}"#,  // non-ASCII
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A"],"extra":"x"}"#,  // unknown key: JSONDecoder ignores it
        #"{"walletType":"APPLE_PAY","walletType":"APPLE_PAY","tokenUniqueReferences":["A"]}"#,  // duplicate
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A"],"extra":1}"#,
    ])
    func declinesWhatItDoesNotReadPlainlyAndLeavesItToJSONDecoder(text: String) {
        #expect(TokenSearchRequest.decodeFlat(Data(text.utf8)) == nil)
        // Each of these is a body JSONDecoder takes: the fallback is what serves them.
        #expect((try? JSONDecoder().decode(TokenSearchRequest.self, from: Data(text.utf8))) != nil)
    }

    @Test(arguments: [
        "", "null", "[]", "{", "{}", #"{"walletType":"APPLE_PAY"}"#,
        #"{"walletType":"GOOGLE_PAY","tokenUniqueReferences":["A"]}"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":"A"}"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":[1]}"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":[null]}"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A"]}x"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A"]}{}"#,
        #"{"walletType":"APPLE_PAY" "tokenUniqueReferences":["A"]}"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A\"]}"#,
        #"{"walletType":"APPLE_PAY","tokenUniqueReferences":["A\/"#,
        "{\"walletType\":\"APPLE_PAY\",\"tokenUniqueReferences\":[\"A\tB\"]}",
    ])
    func neverAcceptsWhatJSONDecoderRefuses(text: String) {
        let data = Data(text.utf8)
        #expect((try? JSONDecoder().decode(TokenSearchRequest.self, from: data)) == nil)
        #expect(TokenSearchRequest.decodeFlat(data) == nil)
    }

    @Test func badBase64OrAnUnknownDeviceIsLeftToJSONDecoderToNameTheField() throws {
        var object = try JSONSerialization.jsonObject(with: try Self.json(Self.signedCards)) as! [String: Any]
        for (key, value) in [("nonce", "not base64!" as Any), ("deviceType", "TABLET"), ("certificates", ["AAA"]), ("nonceSignature", 5)] {
            var changed = object
            changed[key] = value
            let data = try JSONSerialization.data(withJSONObject: changed)
            #expect(SignedCardRequest.decodeFlat(data) == nil, "\(key)")
            #expect((try? JSONDecoder().decode(SignedCardRequest.self, from: data)) == nil, "\(key)")
        }
        object.removeValue(forKey: "nonce")
        #expect(SignedCardRequest.decodeFlat(try JSONSerialization.data(withJSONObject: object)) == nil)
    }

    /// Random edits of real bodies: wherever the fast path answers, JSONDecoder agrees.
    @Test func randomEditsOfRealBodiesNeverMakeTheTwoDisagree() throws {
        var generator = SplitMix(seed: 0xF1A7)
        let alphabet = Array(#"{}[]",: "\/AZaz09+=_-."#.utf8) + [0x09, 0x0A, 0xC3, 0x00]
        var taken = 0
        let bodies = [try Self.json(Self.signedCards), try Self.json(Self.search), try Self.json(Self.search, .prettyPrinted)]
        for round in 0..<6_000 {
            var bytes = [UInt8](bodies[round % bodies.count])
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[at] = alphabet.randomElement(using: &generator)!
                case 1: bytes.insert(alphabet.randomElement(using: &generator)!, at: at)
                default: bytes.remove(at: at)
                }
            }
            let data = Data(bytes)
            let tookIt = round % bodies.count == 0 ? Self.agree(SignedCardRequest.self, data) : Self.agree(TokenSearchRequest.self, data)
            if tookIt { taken += 1 }
        }
        // Edits inside base64 text or references keep the body plain: the comparison is real.
        #expect(taken > 500)
    }

    /// The base64 read straight from the body takes exactly what `Base64Data` takes (canonical
    /// base64, with or without `\/` escapes), to the same bytes Foundation decodes.
    @Test func base64FromTheBodyAgreesWithFoundation() {
        var generator = SplitMix(seed: 0xBA5E64)
        let alphabet = Array("ABZaz09+/=\\-_ .!".utf8) + [0x00, 0x80, 0xFF]
        func decode(_ text: [UInt8]) -> Data? { text.withUnsafeBufferPointer { FlatJSONReader.decodeBase64($0) } }
        var edited = 0
        for round in 0..<20_000 {
            let original = (0..<Int.random(in: 0...70, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let canonical = Array(Data(original).base64EncodedString().utf8)
            let escaped = canonical.flatMap { $0 == UInt8(ascii: "/") ? [UInt8(ascii: "\\"), $0] : [$0] }
            #expect(decode(canonical) == Data(original))
            #expect(decode(escaped) == Data(original))
            guard round % 2 == 0, !canonical.isEmpty else { continue }
            var text = canonical
            let at = Int.random(in: 0..<text.count, using: &generator)
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: text[at] = alphabet.randomElement(using: &generator)!
            case 1: text.insert(alphabet.randomElement(using: &generator)!, at: at)
            default: text.remove(at: at)
            }
            // Escapes are checked by the cursor before this decoder runs; give it only what
            // the cursor passes (every backslash followed by a slash).
            if text.enumerated().contains(where: { $0.element == UInt8(ascii: "\\") && ($0.offset + 1 == text.count || text[$0.offset + 1] != UInt8(ascii: "/")) }) { continue }
            let unescaped = Data(text).filter { $0 != UInt8(ascii: "\\") }
            let fast = decode(text)
            guard let string = String(validating: unescaped, as: UTF8.self) else {
                #expect(fast == nil)
                continue
            }
            // The slow path's reading: the same text as a JSON string decoded as Base64Data.
            struct Member: Codable { var x: Base64Data }
            let slow = try? JSONDecoder().decode(Member.self, from: JSONEncoder().encode(["x": string])).x.data
            #expect(fast == slow, "\(string)")
            if fast != slow { return }
            if fast != nil { #expect(fast == Data(base64Encoded: string)) }
            edited += 1
        }
        #expect(edited > 5_000)
    }
}

/// The memo of recently decoded certificate texts answers exactly what decoding answers.
struct RecentBase64Tests {
    static func decode(_ memo: RecentBase64, _ text: String) -> Data? {
        Array(text.utf8).withUnsafeBufferPointer { memo.decoded($0) }
    }

    @Test func aRepeatedTextIsAnsweredFromTheMemoWithTheSameBytes() {
        let memo = RecentBase64(capacity: 2, maximumTextSize: 1024)
        let bytes = Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let text = bytes.base64EncodedString()
        #expect(Self.decode(memo, text) == bytes)
        #expect(memo.count == 1)
        #expect(memo.hitCount == 0)
        #expect(Self.decode(memo, text) == bytes)
        #expect(memo.count == 1)
        #expect(memo.hitCount == 1)
        // With `\/` escapes the text differs but its bytes are the same.
        let escaped = text.replacingOccurrences(of: "/", with: "\\/")
        #expect(Self.decode(memo, escaped) == bytes)
    }

    @Test func aTextOfTheSameLengthThatDiffersInOneCharacterIsDecodedAfresh() {
        let memo = RecentBase64(capacity: 4, maximumTextSize: 1024)
        let first = Data(repeating: 0x41, count: 90)
        var second = first
        second[45] = 0x42
        #expect(Self.decode(memo, first.base64EncodedString()) == first)
        #expect(Self.decode(memo, second.base64EncodedString()) == second)
        #expect(Self.decode(memo, first.base64EncodedString()) == first)
        #expect(memo.count == 2)
    }

    @Test func anEmptyTextDecodesToNoBytesAndIsNotKept() {
        let memo = RecentBase64(capacity: 2, maximumTextSize: 64)
        #expect(Self.decode(memo, "") == Data())
        #expect(Self.decode(memo, "") == Data())
        #expect(memo.count == 0)
        #expect(memo.hitCount == 0)
    }

    @Test func invalidTextsAreNotKeptAndStayInvalid() {
        let memo = RecentBase64(capacity: 4, maximumTextSize: 1024)
        for text in ["QUJD=", "QUJ", "QU*D", "QUJ="] {
            #expect(Self.decode(memo, text) == nil)
            #expect(Self.decode(memo, text) == nil)
        }
        #expect(memo.count == 0)
    }

    @Test func itHoldsAtMostItsCapacityAndSkipsLongTexts() {
        let memo = RecentBase64(capacity: 3, maximumTextSize: 64)
        let values = (0..<10).map { Data("value \($0)".utf8) }
        for value in values { #expect(Self.decode(memo, value.base64EncodedString()) == value) }
        #expect(memo.count == 3)
        #expect(memo.hitCount == 0)
        // The three newest are kept, the oldest went out first; evicted ones still decode right.
        for value in values[7...] { #expect(Self.decode(memo, value.base64EncodedString()) == value) }
        #expect(memo.hitCount == 3)
        for value in values[..<7] { #expect(Self.decode(memo, value.base64EncodedString()) == value) }
        #expect(memo.hitCount == 3)
        // values 0...6 went through in order, so 4, 5 and 6 are held now.
        for value in values[4..<7] { #expect(Self.decode(memo, value.base64EncodedString()) == value) }
        #expect(memo.hitCount == 6)
        let long = Data(repeating: 7, count: 100)
        #expect(Self.decode(memo, long.base64EncodedString()) == long)
        #expect(memo.count == 3)
        let none = RecentBase64(capacity: 0, maximumTextSize: 64)
        #expect(Self.decode(none, values[0].base64EncodedString()) == values[0])
        #expect(none.count == 0)
    }
}
