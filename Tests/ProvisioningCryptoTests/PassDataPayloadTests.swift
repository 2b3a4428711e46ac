import Foundation
import ProvisioningCrypto
import ProvisioningModels
import Testing

@Suite("Pass-data payload")
struct PassDataPayloadTests {
    func payload(
        pan: String = "4111111111111111",
        expiration: String = "11/28",
        name: String = "Jane Appleseed",
        nonce: Data = Data([0xDE, 0xAD, 0xBE, 0xEF]),
        signature: Data = Data([0x01, 0xAB])
    ) throws -> PassDataPayload {
        try PassDataPayload(
            primaryAccountNumber: PrimaryAccountNumber(pan),
            expiration: CardExpiration(expiration),
            name: name,
            nonce: nonce,
            nonceSignature: signature
        )
    }

    @Test func encodesExactlyTheFiveKeysWithLowercaseHex() throws {
        let json = try payload().jsonData()
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: String])
        #expect(object == [
            "primaryAccountNumber": "4111111111111111",
            "expiration": "11/28",
            "name": "Jane Appleseed",
            "nonce": "deadbeef",
            "nonceSignature": "01ab",
        ])
        #expect(String(decoding: json, as: UTF8.self) == #"{"expiration":"11/28","name":"Jane Appleseed","nonce":"deadbeef","nonceSignature":"01ab","primaryAccountNumber":"4111111111111111"}"#)
    }

    @Test(arguments: ["Jane Appleseed", "Zoë \"Z\" O'Brien/Łukasz", "back\\slash 李", "💳 Card"])
    func encodesExactlyAsJSONEncoderWouldWithSortedKeys(_ name: String) throws {
        let value = try payload(name: name, nonce: Data((0..<40).map { UInt8($0) }))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let reference = try encoder.encode([
            "primaryAccountNumber": value.primaryAccountNumber.digits, "expiration": value.expiration.text, "name": name,
            "nonce": value.nonce.lowercaseHex, "nonceSignature": value.nonceSignature.lowercaseHex,
        ])
        #expect(value.jsonData() == reference)
    }

    @Test func roundTripsThroughJSON() throws {
        let original = try payload(name: "Zoë O'Brien-Łukasz")
        #expect(try PassDataPayload(jsonData: original.jsonData()) == original)
    }

    @Test func descriptionDoesNotRevealThePAN() throws {
        let value = try payload()
        var dumped = ""
        dump(value, to: &dumped)
        for text in [String(describing: value), String(reflecting: value), dumped, "\(value)"] {
            #expect(!text.contains("4111111111111111"))
            #expect(!text.contains("41111111"))
        }
    }

    @Test(arguments: ["4111 1111 1111 1111", "4111-1111-1111-1111", "41111111111111a1", "", "٤١١١١١١١١١١١١١١١"])
    func refusesNonDigitPANs(_ pan: String) {
        #expect(throws: ValidationError.self) { try payload(pan: pan) }
    }

    @Test(arguments: ["41111111111", "41111111111111111111"])
    func refusesPANsOfTheWrongLength(_ pan: String) throws {
        let error = try #require(throws: ValidationError.self) { try payload(pan: pan) }
        #expect(error.code == .invalidPAN)
        #expect(error.message.contains("12 to 19"))
    }

    @Test func refusesABadLuhnCheckDigit() throws {
        let error = try #require(throws: ValidationError.self) { try payload(pan: "4111111111111112") }
        #expect(error.message.contains("Luhn"))
        #expect(!error.message.contains("4111111111111112"))
    }

    @Test(arguments: ["00/28", "13/28", "1/28", "11/2028", "11-28", "ab/cd", "", " 11/28"])
    func refusesBadExpirations(_ expiration: String) throws {
        let error = try #require(throws: ValidationError.self) { try payload(expiration: expiration) }
        #expect(error.code == .invalidExpiration)
    }

    @Test(arguments: ["", "   ", String(repeating: "x", count: 65), "Jane\nAppleseed", "Jane\u{0}"])
    func refusesBadNames(_ name: String) throws {
        let error = try #require(throws: ValidationError.self) { try payload(name: name) }
        #expect(error.code == .invalidName)
    }

    /// The name rules as first written, with Foundation's trimming, as the reference.
    static func referenceNameError(_ name: String) -> String? {
        if name.trimmingCharacters(in: .whitespaces).isEmpty { return "must not be empty" }
        if name.count > PassDataPayload.maximumNameLength { return "length" }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) { return "must not contain control characters" }
        return nil
    }

    @Test func nameRulesAgreeWithTrimmingWhitespaceForEveryScalarOfTheBasicPlane() throws {
        var checked = 0
        for value in UInt32(0)...0xFFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let names = value < 0x3100 ? [String(scalar), "\(scalar)\(scalar)", "J\(scalar)", "\t\(scalar) ", "\(scalar)\u{3000}"] : [String(scalar), "\t\(scalar) "]
            for name in names {
                let expected = Self.referenceNameError(name)
                var actual: String?
                do { _ = try payload(name: name) } catch let error as ValidationError {
                    actual = error.message.hasPrefix("must be at most") ? "length" : error.message
                }
                #expect(actual == expected, "U+\(String(value, radix: 16)) in \(name.debugDescription)")
                checked += 1
            }
        }
        #expect(checked > 160_000)
    }

    @Test func acceptsANameOfTheMaximumLength() throws {
        #expect(try payload(name: String(repeating: "é", count: 64)).name.count == 64)
    }

    @Test func refusesEmptyOrOversizedNonces() throws {
        #expect(throws: ValidationError.self) { try payload(nonce: Data()) }
        #expect(throws: ValidationError.self) { try payload(signature: Data()) }
        #expect(throws: ValidationError.self) { try payload(nonce: Data(count: 1025)) }
    }

    @Test func readingRefusesExtraOrMissingKeysAndUppercaseHex() throws {
        let extra = Data(#"{"primaryAccountNumber":"4111111111111111","expiration":"11/28","name":"J","nonce":"00","nonceSignature":"00","cvv":"123"}"#.utf8)
        #expect(throws: PassDataPayloadError.self) { try PassDataPayload(jsonData: extra) }
        let missing = Data(#"{"primaryAccountNumber":"4111111111111111","expiration":"11/28","name":"J","nonce":"00"}"#.utf8)
        #expect(throws: PassDataPayloadError.self) { try PassDataPayload(jsonData: missing) }
        let upper = Data(#"{"primaryAccountNumber":"4111111111111111","expiration":"11/28","name":"J","nonce":"AB","nonceSignature":"00"}"#.utf8)
        #expect(throws: PassDataPayloadError.notLowercaseHex(field: "nonce")) { try PassDataPayload(jsonData: upper) }
        #expect(throws: PassDataPayloadError.notAJSONObject) { try PassDataPayload(jsonData: Data("[1]".utf8)) }
    }
}
