import Foundation
@testable import ProvisioningModels
import Testing

@Suite("Primary account number")
struct PrimaryAccountNumberTests {
    @Test(arguments: ["4111111111111111", "5555555555554444", "378282246310005", "6011111111111117", "4000056655665556", "371449635398431", "4222222222222", "6304000000000000000"])
    func acceptsValidTestPANs(_ digits: String) throws {
        let pan = try PrimaryAccountNumber(digits)
        #expect(pan.digits == digits)
        #expect(pan.last4 == String(digits.suffix(4)))
    }

    @Test func luhnCheck() {
        #expect(PrimaryAccountNumber.passesLuhnCheck("79927398713"))
        #expect(!PrimaryAccountNumber.passesLuhnCheck("79927398710"))
        #expect(!PrimaryAccountNumber.passesLuhnCheck("7992739871x"))
    }

    @Test func neverPrintsItsDigits() throws {
        let pan = try PrimaryAccountNumber("4111111111111111")
        var dumped = ""
        dump(pan, to: &dumped)
        for text in [String(describing: pan), String(reflecting: pan), dumped, "\([pan])"] {
            #expect(!text.contains("41111111"), "\(text)")
            #expect(text.contains("1111"))
        }
    }

    @Test func decodesAndValidatesFromJSON() throws {
        let decoded = try JSONDecoder().decode([PrimaryAccountNumber].self, from: Data(#"["4111111111111111"]"#.utf8))
        #expect(decoded.first?.last4 == "1111")
        #expect(throws: ValidationError.self) { try JSONDecoder().decode([PrimaryAccountNumber].self, from: Data(#"["4111111111111112"]"#.utf8)) }
        #expect(String(decoding: try JSONEncoder().encode(decoded), as: UTF8.self) == #"["4111111111111111"]"#)
    }

    @Test func lengthsAreTwelveToNineteenDigits() throws {
        // Each valid by the Luhn check, so only the length decides.
        for (digits, accepted) in [("41111111112", false), ("411111111117", true), ("4111111111111111110", true), ("41111111111111111115", false)] {
            #expect(PrimaryAccountNumber.passesLuhnCheck(digits), "\(digits)")
            if accepted {
                #expect(try PrimaryAccountNumber(digits).digits == digits)
            } else {
                let error = #expect(throws: ValidationError.self, "\(digits.count) digits") { try PrimaryAccountNumber(digits) }
                #expect(error?.description.contains("must have 12 to 19 digits (got \(digits.count))") == true, "\(String(describing: error))")
            }
        }
    }

    @Test(arguments: ["４１１１１１１１１１１１１１１１", "٤١١١١١١١١١١١١١١١", "4111 1111 1111 1111", "+4111111111111111", "4111111111111111\n", "4111111111111111\u{0}"])
    func onlyASCIIDigitsAreDigits(_ text: String) throws {
        // Fullwidth and Arabic-Indic digits are digits to Unicode, not to a card number.
        let error = try #require(throws: ValidationError.self) { try PrimaryAccountNumber(text) }
        #expect(error.code.rawValue == "invalid_pan")
        #expect(error.description.contains("must contain digits only"))
    }

    @Test func errorsNameTheFieldButNotTheValue() throws {
        let error = try #require(throws: ValidationError.self) { try PrimaryAccountNumber("4111111111111112") }
        #expect(error.field == "primaryAccountNumber")
        #expect(error.code.rawValue == "invalid_pan")
        #expect(!error.description.contains("4111111111111112"))
    }
}

@Suite("Card expiration")
struct CardExpirationTests {
    @Test func parsesAndPrintsMMYY() throws {
        let expiration = try CardExpiration("03/29")
        #expect(expiration.month == 3 && expiration.year == 2029)
        #expect(expiration.text == "03/29")
    }

    @Test(arguments: ["00/28", "13/28", "3/29", "03/2029", "03-29", "", "ab/cd", "03/29 "])
    func refusesAnythingButARealMonthInMMYY(_ text: String) throws {
        let error = try #require(throws: ValidationError.self) { try CardExpiration(text) }
        #expect(error.code == .invalidExpiration)
    }

    @Test func aCardIsValidThroughTheEndOfItsMonth() throws {
        let expiration = try CardExpiration("02/28")
        let utc = { (s: String) in ISO8601DateFormatter().date(from: s)! }
        #expect(!expiration.isExpired(at: utc("2028-02-29T23:59:59Z")))
        #expect(expiration.isExpired(at: utc("2028-03-01T00:00:00Z")))
        #expect(try CardExpiration("12/28").validUntil == utc("2029-01-01T00:00:00Z"))
    }

    @Test func theLastTwoDigitYearsAndMonthsHaveTheirDates() throws {
        let utc = { (s: String) in ISO8601DateFormatter().date(from: s)! }
        // Years are read as 20YY: 99 is 2099, valid through December 2099.
        #expect(try CardExpiration("12/99").validUntil == utc("2100-01-01T00:00:00Z"))
        #expect(try CardExpiration("01/00").validUntil == utc("2000-02-01T00:00:00Z"))
        #expect(try CardExpiration("01/00").year == 2000)
        for text in ["00/00", "13/99", "99/99", "-1/28", "1/028", "０３/２９"] {
            #expect(throws: ValidationError.self, "\(text)") { try CardExpiration(text) }
        }
    }

    @Test func ordersChronologically() throws {
        #expect(try CardExpiration("12/27") < CardExpiration("01/28"))
    }

    @Test func codesAsMMYYString() throws {
        let data = try JSONEncoder().encode([try CardExpiration("07/31")])
        #expect(String(decoding: data, as: UTF8.self) == #"["07\/31"]"# || String(decoding: data, as: UTF8.self) == #"["07/31"]"#)
        #expect(try JSONDecoder().decode([CardExpiration].self, from: data).first?.text == "07/31")
    }
}

@Suite("Redaction")
struct RedactionTests {
    @Test func prefixesLongIdentifiersOnly() {
        #expect(Redaction.prefix("DAPLMC00000123456789") == "DAPLMC00…")
        #expect(Redaction.prefix("short") == "short")
        // A reference that holds a card number shows its last four, not its first digits.
        #expect(Redaction.prefix("4012888888881881") == "•••• 1881")
        #expect(Redaction.prefix("tok-4012-8888-8888-1881-x") == "tok-••••…")
        #expect(!Redaction.prefix("DNITHE4012888888881881DNITHE").contains("4012"))
    }

    /// The constant-time Luhn sums give the check digit's verdict on every stretch of random
    /// digit strings (lengths 1 to 60, a fixed seed), as the card-number check itself does.
    @Test func luhnSumsOfEveryStretchAgreeWithTheLuhnCheck() {
        var generator = SplitMix(seed: 0x5EED)
        var agreed = 0
        var passed = 0
        for length in 1...60 {
            let digits = (0..<length).map { _ in UInt8(ascii: "0") + UInt8(generator.next() % 10) }
            let sums = Redaction.LuhnSums(digits)
            for first in 0..<length {
                for end in (first + 1)...length {
                    let expected = PrimaryAccountNumber.passesLuhnCheck(String(decoding: digits[first..<end], as: UTF8.self))
                    #expect(sums.passes(first..<end) == expected, "\(String(decoding: digits[first..<end], as: UTF8.self))")
                    if sums.passes(first..<end) == expected { agreed += 1 }
                    if expected { passed += 1 }
                }
            }
        }
        #expect(agreed == (1...60).map { $0 * ($0 + 1) / 2 }.reduce(0, +))
        // About one stretch in ten passes: both verdicts were exercised.
        #expect(passed > 3_000 && passed < 4_500, "\(passed)")
    }

    @Test func cardNumbersWrittenInGroupsAreRedactedToo() {
        #expect(Redaction.cardNumbers(in: "no card 4111-1111-1111-1111") == "no card •••• 1111")
        #expect(Redaction.cardNumbers(in: "/cards/4111 1111 1111 1111/art") == "/cards/•••• 1111/art")
        #expect(Redaction.cardNumbers(in: "amex 3782 822463 10005.") == "amex •••• 0005.")
        #expect(Redaction.cardNumbers(in: "/x/4111.1111.1111.1111") == "/x/•••• 1111")
        #expect(Redaction.cardNumbers(in: "card_4111_1111_1111_1111") == "card_•••• 1111")
        // A group after the card is hidden with it when some stretch across both passes the
        // check, as one does here.
        #expect(Redaction.cardNumbers(in: "4111111111111111 2026") == "•••• 2026")
        // No stretch of 12 to 19 of these digits passes the Luhn check.
        #expect(Redaction.cardNumbers(in: "4111-1111-1111-1114") == "4111-1111-1111-1114")
        // Groups of any length: ids split a number where they like.
        #expect(Redaction.cardNumbers(in: "req-4111111-111111111") == "req-•••• 1111")
        #expect(Redaction.cardNumbers(in: "41-11111111111111") == "•••• 1111")
        #expect(Redaction.cardNumbers(in: "4111_11111111_1111") == "•••• 1111")
        // Dates, times and short groups are no card numbers…
        #expect(Redaction.cardNumbers(in: "at 2026-11-22 23:24:38, order 1234-5678") == "at 2026-11-22 23:24:38, order 1234-5678")
        #expect(Redaction.cardNumbers(in: "card-2026-11-01-0003") == "card-2026-11-01-0003")
        #expect(Redaction.cardNumbers(in: "550e8400-e29b-41d4-a716-446655440000") == "550e8400-e29b-41d4-a716-446655440000")
        // More than three separators between two groups break the chain.
        #expect(Redaction.cardNumbers(in: "4111    1111    1111    1111") == "4111    1111    1111    1111")
        // …but 12 or more digits in a chain that pass the Luhn check are hidden, one in ten:
        // hiding too much is the safe side.
        #expect(Redaction.cardNumbers(in: "card-2026-11-01-0002") == "card-•••• 0002")
        #expect(Redaction.cardNumbers(in: "ends with a separator 4111- and 7 -") == "ends with a separator 4111- and 7 -")
    }

    @Test func aGroupBeforeACardNumberCannotLeaveItsDigitsInClear() {
        // "2025 4090 1610" is a valid 12-digit number by chance, and so is the card after the year.
        #expect(Redaction.cardNumbers(in: "2025 4090 1610 3396 2179") == "•••• 2179")
        #expect(Redaction.cardNumbers(in: "order 2024 4254 1224 8244 7577") == "order •••• 7577")
        #expect(!Redaction.cardNumbers(in: "2026-11-22 4291 4177 7631 7063").contains("4291"))
        // "12 4111 …" and "… 1111 99" hold stretches that pass the check too: every group of
        // the chain that any of them touches is hidden.
        #expect(Redaction.cardNumbers(in: "ref 12 4111 1111 1111 1111 99") == "ref •••• 1199")
        #expect(Redaction.cardNumbers(in: "4111111111111111 4111 1111 1111 1111") == "•••• 1111")
        #expect(Redaction.cardNumbers(in: "4111111111111111, 4111 1111 1111 1111") == "•••• 1111, •••• 1111")
    }

    @Test func aCardNumberInsideALongerRunOfDigitsIsHidden() {
        // Twenty digits: no card number as a whole, but one from its first digit.
        #expect(Redaction.cardNumbers(in: "41111111111111111111") == "•••• 1111")
        #expect(Redaction.cardNumbers(in: "id 4111111111111111000123") == "id •••• 0123")
        #expect(Redaction.cardNumbers(in: "id 00041111111111111111") == "id •••• 1111")
        #expect(Redaction.cardNumbers(in: "ref-0005555555555554444-x") == "ref-•••• 4444-x")
    }

    @Test func cardNumbersSplitByOtherSeparatorsAreHidden() {
        for (text, redacted) in [
            ("4111\t1111\t1111\t1111", "•••• 1111"),
            ("4111\n1111\r\n1111\n1111", "•••• 1111"),
            // Narrow no-break space (French grouping), thin space, figure space, ideographic space.
            ("4111\u{202F}1111\u{202F}1111\u{202F}1111", "•••• 1111"),
            ("4111\u{2009}1111\u{2009}1111\u{2009}1111", "•••• 1111"),
            ("4111\u{2007}1111\u{2007}1111\u{2007}1111", "•••• 1111"),
            ("4111\u{3000}1111\u{3000}1111\u{3000}1111", "•••• 1111"),
            ("4111  1111  1111  1111", "•••• 1111"),
            ("4111 - 1111 - 1111 - 1111", "•••• 1111"),
            ("/cards/4111/1111/1111/1111/art", "/cards/•••• 1111/art"),
            ("q=4111+1111+1111+1111&x", "q=•••• 1111&x"),
            ("q=4111%201111%201111%201111", "q=•••• 1111"),
            // The `20` of a `%20` after digits can start a card number (found by fuzzing).
            ("1 c55%2:25%20000000202222-", "1 c55%2:25%•••• 2222-"),
            ("4111\u{A0}1111\u{A0}1111\u{A0}1111", "•••• 1111"),
            // Invisible characters copying from a web page or a PDF leaves between digits.
            ("4111\u{200B}1111\u{200B}1111\u{200B}1111", "•••• 1111"),
            ("4111\u{200C}1111\u{200D}1111\u{2060}1111", "•••• 1111"),
            ("\u{FEFF}4111\u{FEFF}1111\u{FEFF}1111\u{FEFF}1111", "\u{FEFF}•••• 1111"),
            // Dashes a word processor or a locale writes instead of `-`.
            ("3782\u{2013}822463\u{2013}10005", "•••• 0005"),
            ("4111\u{2011}1111\u{2010}1111\u{2014}1111", "•••• 1111"),
            ("4111\u{2212}1111\u{2212}1111\u{2212}1111", "•••• 1111"),
            ("4111\u{FF0D}1111\u{FF0D}1111\u{FF0D}1111", "•••• 1111"),
            ("4111 \u{2013} 1111 \u{2013} 1111 \u{2013} 1111", "•••• 1111"),
        ] {
            #expect(Redaction.cardNumbers(in: text) == redacted, "\(text)")
        }
    }

    @Test func aRedactionMarkInFrontOfACardNumberDoesNotShieldIt() {
        #expect(Redaction.cardNumbers(in: "•••• 4111 1111 1111 1111") == "•••• •••• 1111")
        #expect(Redaction.cardNumbers(in: "•••• 1111 4111 1111 1111 1111") == "•••• •••• 1111")
    }

    @Test func theLastFourShownAndTheGroupsAfterThemAreCheckedInTheSameRound() {
        // "3600 049748 48968" is a card number; so are the "8968" it ends with and the groups
        // after them (found by search), a stretch of the input that one round checks already.
        let text = "3600 049748 48968 8667 5095 7018"
        #expect(Redaction.cardNumbers(in: text) == "•••• 7018")
        // The second round only confirms that nothing changes.
        #expect(Redaction.cardNumbers(in: text, rounds: 2) == "•••• 7018")
        // An input still changing when the rounds run out has every digit hidden.
        #expect(Redaction.cardNumbers(in: "4111 1111 1111 1111 x", rounds: 0) == "•••• •••• •••• •••• x")
    }

    @Test func redactingTwiceChangesNothingMore() {
        for text in ["4111111111111111 4111 1111 1111 1111", "4111111111111111 2222 3333 44", "•••• 1111 2222 3333 4444 5", "2025 4090 1610 3396 2179 0000", "x 4111-1111-1111-1111-4111-1111-1111-1111", "3600 049748 48968 8667 5095 7018"] {
            let once = Redaction.cardNumbers(in: text)
            #expect(Redaction.cardNumbers(in: once) == once, "\(text) -> \(once)")
        }
    }

    @Test func cardNumbersInTextKeepOnlyTheirLastFour() {
        #expect(Redaction.cardNumbers(in: "no card 4111111111111111") == "no card •••• 1111")
        #expect(Redaction.cardNumbers(in: "/cards/378282246310005/x and 5555555555554444.") == "/cards/•••• 0005/x and •••• 4444.")
        // Not card numbers: too short or too long, or failing the Luhn check (most numeric
        // ids, millisecond times), so the message still names them.
        #expect(Redaction.cardNumbers(in: "at most 65536 bytes, card-12345678901") == "at most 65536 bytes, card-12345678901")
        #expect(Redaction.cardNumbers(in: "card 100200300400 and event 1795000000123") == "card 100200300400 and event 1795000000123")
        #expect(Redaction.cardNumbers(in: "é 4111111111111111 ü") == "é •••• 1111 ü")
        #expect(Redaction.cardNumbers(in: "") == "")
    }

    /// An id is one word: groups joined by any run of punctuation or spaces are read together,
    /// so spellings no card prints still do not echo the number.
    @Test func idsHideCardNumbersJoinedByAnyPunctuation() {
        #expect(Redaction.identifier("4111----1111----1111----1111") == "•••• 1111")
        #expect(Redaction.identifier("card:4111:1111:1111:1111") == "card:•••• 1111")
        #expect(Redaction.identifier("(4111) (1111) (1111) (1111)") == "(•••• 1111)")
        #expect(Redaction.identifier("4111 ~~ 1111 ## 1111 ** 1111 @@ ok") == "•••• 1111 @@ ok")
        #expect(Redaction.identifier("x4111\u{A0}\u{A0}\u{A0}\u{A0}1111,,,,1111;;;;1111") == "x•••• 1111")
        #expect(Redaction.identifier("4111\u{202F}\u{202F}\u{202F}\u{202F}1111\u{2009}-\u{2009}1111 \u{3000} 1111") == "•••• 1111")
        #expect(Redaction.identifier("4111\u{200B}\u{200B}:\u{200B}\u{200B}1111\u{2013}\u{2013}1111##1111") == "•••• 1111")
        // Other characters outside ASCII still end a chain (they may be letters).
        #expect(Redaction.identifier("4111é1111é1111é1111") == "4111é1111é1111é1111")
        // So do characters sharing a first byte with the separators outside ASCII.
        #expect(Redaction.identifier("4111\u{2016}1111\u{2016}1111\u{2016}1111") == "4111\u{2016}1111\u{2016}1111\u{2016}1111")
        #expect(Redaction.cardNumbers(in: "4111\u{FF0E}1111\u{FF0E}1111\u{FF0E}1111") == "4111\u{FF0E}1111\u{FF0E}1111\u{FF0E}1111")
        // What text redaction leaves, because text joins numbers that way (a list, a range).
        #expect(Redaction.cardNumbers(in: "4111    1111    1111    1111") == "4111    1111    1111    1111")
        #expect(Redaction.identifier("4111    1111    1111    1111") == "•••• 1111")
        // What cardNumbers(in:) finds is found too.
        #expect(Redaction.identifier("req-4111111-111111111") == "req-•••• 1111")
        #expect(Redaction.identifier("25%204111111111111111") == "•••• 1111")
        // Letters end a chain: UUIDs and hex ids keep their digits, as do ids without one.
        for id in ["550e8400-e29b-41d4-a716-446655440000", "card-2026-11-01-0003", "4111a1111b1111c1111", "T1", ""] {
            #expect(Redaction.identifier(id) == id)
        }
        // A run of digits that is no card number stays, even after punctuation.
        #expect(Redaction.identifier("order::1234::5678") == "order::1234::5678")
        // A non-ASCII character other than a no-break space ends a chain (it may be a letter).
        #expect(Redaction.identifier("4111é1111é1111é1111") == "4111é1111é1111é1111")
        // The prefix used in log lines reads ids the same way.
        #expect(Redaction.prefix("4111::::1111::::1111::::1111") == "•••• 1111")
        for id in ["4111----1111----1111----1111", "x::4012::8888::8888::1881::y"] {
            let once = Redaction.identifier(id)
            #expect(Redaction.identifier(once) == once)
        }
    }
}
