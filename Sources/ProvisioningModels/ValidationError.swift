/// A refusal of an input value: which field, why, and a stable machine-readable code.
///
/// Messages say what to fix and never repeat a secret value (a PAN, a key, a token).
public struct ValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine-readable codes for validation failures.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The code as it appears on the wire, e.g. `invalid_pan`.
        public let rawValue: String
        /// Wraps a raw code.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The raw code.
        public var description: String { rawValue }

        /// The PAN is not 12–19 digits with a valid Luhn check digit.
        public static let invalidPAN = Code(rawValue: "invalid_pan")
        /// The expiration is not a real month in `MM/YY` form.
        public static let invalidExpiration = Code(rawValue: "invalid_expiration")
        /// The cardholder name is empty, too long or holds control characters.
        public static let invalidName = Code(rawValue: "invalid_name")
        /// A field is missing, empty, too long or of the wrong form.
        public static let invalidField = Code(rawValue: "invalid_field")
    }

    /// What kind of failure this is.
    public var code: Code
    /// The JSON field (or argument) that was refused.
    public var field: String
    /// What is wrong, phrased so a person can fix it; never contains the refused value if secret.
    public var message: String

    /// Creates a validation error.
    public init(code: Code, field: String, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    /// `field: message`.
    public var description: String { "\(field): \(message)" }
}
