import Foundation

// libFuzzer target `text`: the parsers of small texts callers send (event times, card
// expirations, card numbers, identifiers) and the redaction of card numbers in messages.
//
// Compiled into the ProvisioningModels module with its sources (scripts/fuzz.sh). None may
// trap; what a parser accepts must read back the same from what it writes; redaction must
// leave no Luhn-valid run of 12 to 19 digits and change nothing else.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzText(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)

    if let time = try? EventTime(text) {
        guard let again = try? EventTime(time.description), again == time else {
            fatalError("event time \(text.debugDescription) written as \(time.description) does not read back")
        }
    }
    if let expiration = try? CardExpiration(text) {
        guard let again = try? CardExpiration(expiration.text), again == expiration else {
            fatalError("expiration \(text.debugDescription) does not read back")
        }
    }
    if let pan = try? PrimaryAccountNumber(text) {
        guard PrimaryAccountNumber.passesLuhnCheck(text), (12...19).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
            fatalError("accepted card number \(text.debugDescription)")
        }
        _ = pan
    }
    if CardIdentifier.isValid(text) {
        guard (1...CardIdentifier.maximumLength).contains(text.utf8.count) else { fatalError("accepted identifier \(text.debugDescription)") }
    }

    let redacted = Redaction.cardNumbers(in: text)
    if redacted == text {
        // Nothing replaced: no digit run may be a card number.
        for run in text.utf8.split(whereSeparator: { $0 < 48 || $0 > 57 }) where (12...19).contains(run.count) {
            if PrimaryAccountNumber.passesLuhnCheck(String(decoding: run, as: UTF8.self)) {
                fatalError("card number left in \(text.debugDescription)")
            }
        }
    } else if Redaction.cardNumbers(in: redacted) != redacted {
        fatalError("redaction of \(text.debugDescription) is not final")
    }
    return 0
}
