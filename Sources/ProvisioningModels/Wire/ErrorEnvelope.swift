/// The one error shape every API answers with: `{"error":{"code":"…","message":"…"}}`.
public struct ErrorEnvelope: Codable, Sendable, Hashable {
    /// The error itself.
    public struct Body: Codable, Sendable, Hashable {
        /// A stable machine-readable code, e.g. `card_not_found`.
        public var code: String
        /// What went wrong and what to do; never contains a PAN, key or token.
        public var message: String

        /// Creates a body.
        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    /// The error.
    public var error: Body

    /// Creates an envelope.
    public init(code: String, message: String) {
        self.error = Body(code: code, message: message)
    }
}
