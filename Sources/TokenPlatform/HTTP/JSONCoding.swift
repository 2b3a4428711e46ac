import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ProvisioningModels

/// Request bodies in, JSON responses out, with refusals that name the field and the reason.
enum JSONCoding {
    /// The largest JSON body any endpoint accepts.
    static let maximumBodySize = 64 * 1024

    /// Collects at most `limit` bytes of the body; larger bodies are refused with 413.
    static func body(of request: Request, limit: Int) async throws -> Data {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw TMPError(.payloadTooLarge, "payload_too_large", "the request body is \(length) bytes; at most \(limit) are accepted")
        }
        var request = request
        do {
            let buffer = try await request.collectBody(upTo: limit)
            return Data(buffer: buffer)
        } catch is NIOTooManyBytesError {
            throw TMPError(.payloadTooLarge, "payload_too_large", "the request body is larger than \(limit) bytes")
        }
    }

    /// Decodes a JSON body into `T`.
    static func decode<T: Decodable>(_ type: T.Type, from request: Request) async throws -> T {
        try decode(T.self, json: try await jsonBody(of: request))
    }

    /// Decodes a JSON body into `T`, through its fast path when the body is in the plain form.
    static func decode<T: FlatJSONDecodable>(_ type: T.Type, from request: Request) async throws -> T {
        let data = try await jsonBody(of: request)
        return try T.decodeFlat(data) ?? decode(T.self, json: data)
    }

    /// The body of a request that must be JSON: UTF-8 JSON as RFC 8259 writes it, no object
    /// naming a member twice (``StrictJSON``), so no other reader of the same bytes can take
    /// them for another request than the one acted on here.
    private static func jsonBody(of request: Request) async throws -> Data {
        if let contentType = request.headers[.contentType] {
            guard isJSON(contentType) else {
                throw TMPError(.unsupportedMediaType, "unsupported_media_type", "send the body as application/json")
            }
            // JSON is UTF-8 (RFC 8259); a body said to be in another charset is not read as
            // UTF-8 behind its sender's back.
            guard hasUTF8Charset(contentType) else {
                throw TMPError(.unsupportedMediaType, "unsupported_media_type", "send the body as application/json in UTF-8 (charset=utf-8, or no charset)")
            }
        }
        let data = try await body(of: request, limit: maximumBodySize)
        try checkStrict(data)
        return data
    }

    /// Refuses `data` unless ``StrictJSON`` accepts it, with 400 `invalid_request`.
    static func checkStrict(_ data: Data) throws {
        do {
            try StrictJSON.check(data)
        } catch {
            throw TMPError.badRequest("invalid_request", error.message)
        }
    }

    /// The `charset` parameters of a `Content-Type` value, each lowercased and unquoted.
    static func charsets(of contentType: String) -> [String] {
        contentType.split(separator: ";").dropFirst().compactMap { parameter in
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset" else { return nil }
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            return value.lowercased()
        }
    }

    /// Whether a `Content-Type` value's `charset` lets the body be read as UTF-8: none, or one
    /// `utf-8` (`us-ascii` too: ASCII is UTF-8). Two `charset` parameters are refused: readers
    /// differ on which one counts.
    static func hasUTF8Charset(_ contentType: String) -> Bool {
        let found = charsets(of: contentType)
        return found.isEmpty || (found.count == 1 && ["utf-8", "utf8", "us-ascii"].contains(found[0]))
    }

    /// Whether a `Content-Type` value names JSON: its media type (before any parameter such as
    /// `charset`), trimmed and compared without regard to case, is `application/json`.
    /// `application/jsonp` or `application/json-seq` are not JSON bodies.
    static func isJSON(_ contentType: String) -> Bool {
        let essence = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return essence.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    /// Decodes JSON bytes into `T`; a refusal names the field and the reason.
    static func decode<T: Decodable>(_ type: T.Type, json data: Data) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw TMPError.badRequest("invalid_request", describe(error))
        } catch let error as ValidationError {
            throw TMPError.badRequest(error.code.rawValue, error.description)
        }
    }

    /// One encoder for every response, error envelopes included, so members always come in
    /// one order (JSONEncoder is thread-safe once configured).
    static let responseEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return encoder
    }()

    /// A JSON response.
    static func response(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        response(json: try responseEncoder.encode(value), status: status)
    }

    /// A response of JSON bytes already encoded.
    static func response(json data: Data, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: jsonHeaders, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The headers of every JSON answer, errors included: its type, and that no cache (a
    /// browser's, a proxy's, the client's own) may keep it. Answers carry card data (names,
    /// last digits, sealed payloads, activation data) that must not outlive the exchange.
    static let jsonHeaders: HTTPFields = [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store", .xContentTypeOptions: "nosniff"]

    /// Names the field and says why, without echoing values (they may be secret).
    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            var text = ""
            for key in keys {
                if let index = key.intValue { text += "[\(index)]" } else { text += text.isEmpty ? key.stringValue : ".\(key.stringValue)" }
            }
            return text.isEmpty ? "body" : text
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "field \(path(context.codingPath + [key])) is missing"
        case .valueNotFound(_, let context):
            return "field \(path(context.codingPath)) must not be null"
        case .typeMismatch(let type, let context):
            let field = path(context.codingPath)
            if context.codingPath.isEmpty { return "body must be a JSON object" }
            return "field \(field) must be \(jsonTypeName(type))"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "body is not valid JSON" }
            let field = path(context.codingPath)
            if context.debugDescription == Base64Data.notBase64 || context.debugDescription == Base64Data.notCanonical {
                return "field \(field) \(context.debugDescription)"
            }
            if let name = context.codingPath.last?.stringValue, let allowed = allowedValues[name] {
                return "field \(field) has an unknown value; expected one of \(allowed.joined(separator: ", "))"
            }
            return "field \(field) is invalid"
        @unknown default:
            return "body could not be read"
        }
    }

    private static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is Int.Type, is Int64.Type, is Double.Type: "a number"
        case is [Any].Type: "an array"
        default: type is any Collection.Type ? "an array" : "a JSON object or string"
        }
    }

    private static let allowedValues: [String: [String]] = [
        "walletType": WalletType.allCases.map(\.rawValue),
        "deviceType": DeviceType.allCases.map(\.rawValue),
        "status": CardStatus.allCases.map(\.rawValue),
        "network": CardNetwork.allCases.map(\.rawValue),
        "event": TokenEventType.allCases.map(\.rawValue),
    ]
}
