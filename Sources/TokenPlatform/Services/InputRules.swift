import Foundation
import ProvisioningModels

/// Shape checks for identifiers and display strings that arrive from callers.
package enum InputRules {
    static let maximumIdentifierLength = CardIdentifier.maximumLength
    package static let maximumUserIdLength = 128
    static let maximumTitleLength = 128

    /// Card ids, art ids and token references: 1–64 of `A–Z a–z 0–9 . _ -`.
    static func identifier(_ value: String, field: String) throws(TMPError) {
        guard CardIdentifier.isValid(value) else {
            throw .badRequest("invalid_field", "\(field) must be 1 to \(maximumIdentifierLength) characters of A-Z, a-z, 0-9, '.', '_' or '-'")
        }
    }

    /// The id of something a caller creates here (a card, its art): ``identifier(_:field:)``,
    /// and not one that starts with `.`: `..` in the card list's art URL
    /// (`/issuer/push-provisioning/cards/../art`) resolves to another path in every URL library
    /// and proxy, and the SDK keeps no file for a card whose id would make it a hidden one.
    /// (``LifecycleService`` also refuses one that holds the number of a card TMP holds.)
    static func newIdentifier(_ value: String, field: String) throws(TMPError) {
        try identifier(value, field: field)
        guard !value.hasPrefix(".") else {
            throw .badRequest("invalid_field", "\(field) must not start with '.': `..` in a URL path names the parent, and a name starting with '.' is a hidden file")
        }
    }

    /// Characters a value shown to people or written to logs may not hold: control characters,
    /// line and paragraph separators (U+2028, U+2029), and the bidirectional embeddings,
    /// overrides and isolates (U+202A–U+202E, U+2066–U+2069), which make text display in
    /// another order than it is stored: a name or an id could then read as another one in the
    /// back office, a log or Wallet. The directional marks (U+200E, U+200F, U+061C) are
    /// allowed: mixed-direction names and titles use them to place brackets and numbers, and
    /// they reorder nothing beyond that.
    package static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        default: break
        }
        switch scalar.value {
        case 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    static func userId(_ value: String, field: String = "userId") throws(TMPError) {
        guard !value.isEmpty, value.utf8.count <= maximumUserIdLength, !value.unicodeScalars.contains(where: isRefused) else {
            throw .badRequest("invalid_field", "\(field) must be 1 to \(maximumUserIdLength) bytes of UTF-8 without control characters, line separators or bidirectional-text controls")
        }
    }

    /// Whether `value` is a user id this platform takes (``userId(_:field:)``), for the CLI.
    package static func isUserId(_ value: String) -> Bool {
        (try? userId(value)) != nil
    }

    static func text(_ value: String, field: String, maximum: Int) throws(TMPError) {
        // Counted in Unicode code points, as JSON Schema's maxLength (the OpenAPI document) does.
        guard !value.trimmingCharacters(in: .whitespaces).isEmpty, value.unicodeScalars.count <= maximum,
            !value.unicodeScalars.contains(where: isRefused)
        else {
            throw .badRequest("invalid_field", "\(field) must be 1 to \(maximum) characters (Unicode code points), not only spaces, without control characters, line separators or bidirectional-text controls")
        }
    }
}
