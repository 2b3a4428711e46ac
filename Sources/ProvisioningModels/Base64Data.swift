import Foundation

/// Bytes that travel as a standard base64 string in JSON.
///
/// Decoding is strict: anything that is not valid base64 is refused with a message naming
/// the field, never silently dropped.
public struct Base64Data: Sendable, Hashable, Codable {
    /// The decoded bytes.
    public var data: Data

    /// Wraps bytes.
    public init(_ data: Data) {
        self.data = data
    }

    /// Decodes a base64 string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let data = Data(base64Encoded: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "must be base64")
        }
        self.data = data
    }

    /// Encodes as a base64 string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data.base64EncodedString())
    }
}
