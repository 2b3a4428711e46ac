/// The OpenAPI 3.1 document of every route, embedded in the binary and served at `/openapi.yaml`.
public enum OpenAPIDocument {
    /// The document's text.
    public static let yaml = String(decoding: PackageResources.openapi_yaml, as: UTF8.self)
}
