import Foundation

/// A card's art as TMP served it: the bytes and the declared `Content-Type`.
public struct CardArtDownload: Sendable, Hashable {
    /// The file's bytes.
    public var data: Data
    /// The `Content-Type` TMP sent, if any.
    public var contentType: String?

    /// Creates a download.
    public init(data: Data, contentType: String?) {
        self.data = data
        self.contentType = contentType
    }
}
