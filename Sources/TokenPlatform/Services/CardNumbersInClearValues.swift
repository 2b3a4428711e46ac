import ProvisioningModels

/// What a value TMP keeps in clear is, for the message that refuses a card number in it.
enum ClearValueKind: Sendable {
    /// An id: stored, logged and returned in clear.
    case identifier
    /// Text shown to cardholders and the back office (a name, a title).
    case text

    /// Why the value must not hold a card number, and what to do instead.
    var advice: String {
        switch self {
        case .identifier: "ids are stored, logged and returned in clear; use an id of your own"
        case .text: "it is stored and returned in clear"
        }
    }
}

extension PlatformEnvironment {
    /// Refuses `value`, which TMP would keep in clear, when its digits, read in order and
    /// ignoring everything else (`card-4111-1111-1111-1111`, `41111111_11111111`,
    /// `x4111…1111y`, any script's decimal digits: ``digits(of:)``), hold `own` (the card's own number, not stored yet) or the number of a
    /// card TMP holds. Only numbers TMP knows count, so a numeric id that merely passes the
    /// Luhn check (one in ten does) is not refused. Every 12-to-19-digit stretch that passes
    /// the check is looked up by its keyed hash, like a tokenization decision's PAN, all in
    /// one query. A value with fewer than 12 digits costs nothing.
    func refuseCardNumber(in value: String, field: String, own: PrimaryAccountNumber?, kind: ClearValueKind = .identifier) async throws {
        let digits = Self.digits(of: value)
        guard digits.utf8.count >= PrimaryAccountNumber.minimumLength else { return }
        if let own { try Self.refuseOwnCardNumber(in: value, field: field, own: own, kind: kind) }
        let bytes = Array(digits.utf8)
        var looked: Set<String> = []
        var hashes: [String] = []
        for start in bytes.indices {
            for length in PrimaryAccountNumber.minimumLength...PrimaryAccountNumber.maximumLength where start + length <= bytes.count {
                let stretch = String(decoding: bytes[start..<(start + length)], as: UTF8.self)
                guard let number = try? PrimaryAccountNumber(stretch), looked.insert(stretch).inserted else { continue }
                hashes.append(vault.lookupHash(number))
            }
        }
        if try await store.holdsCard(panLookupHashes: hashes) {
            throw TMPError.badRequest("invalid_field", "\(field) must not hold the number of a card this platform holds: \(kind.advice)")
        }
    }

    /// Refuses a value whose digits, read together, hold `own`, the card's PAN.
    static func refuseOwnCardNumber(in value: String, field: String, own: PrimaryAccountNumber, kind: ClearValueKind = .identifier) throws {
        if digits(of: value).contains(own.digits) {
            throw TMPError.badRequest("invalid_field", "\(field) must not hold the card's primaryAccountNumber: \(kind.advice)")
        }
    }

    /// The digits of `value`, in order, whatever separates them, as ASCII digits: every
    /// decimal digit Unicode knows counts, so a card number written in full-width (`４１１１`),
    /// Arabic-Indic (`٤١١١`) or mathematical (`𝟒𝟏𝟏𝟏`) digits is found as well.
    static func digits(of value: String) -> String {
        var digits = String.UnicodeScalarView()
        for scalar in value.unicodeScalars {
            if scalar.isASCII {
                if ("0"..."9").contains(scalar) { digits.append(scalar) }
            } else if scalar.properties.numericType == .decimal, let number = scalar.properties.numericValue, number >= 0, number <= 9 {
                digits.append(Unicode.Scalar(UInt8(ascii: "0") + UInt8(number)))
            }
        }
        return String(digits)
    }
}
