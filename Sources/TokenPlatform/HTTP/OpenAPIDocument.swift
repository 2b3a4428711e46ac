import NIOCore

/// The OpenAPI 3.1 document of every route, embedded in the binary and served at `/openapi.yaml`.
public enum OpenAPIDocument {
    /// The document's text.
    public static let yaml = String(decoding: PackageResources.openapi_yaml, as: UTF8.self)

    /// The document as one buffer every answer shares (a copy per request would let clients
    /// that read their answers slowly hold 65 KB each, with no credential needed).
    static let buffer = ByteBuffer(string: yaml)
}
