import Foundation

/// The two file formats Apple accepts for issuer card art.
///
/// Apple prefers a vector PDF; a PNG is accepted at exactly 1536 × 969 pixels.
/// The raw value (`png`, `pdf`) is stable and safe to store or send on the wire.
public enum CardArtFormat: String, Sendable, Codable, Hashable, CaseIterable {
    /// A PNG image, which must be exactly 1536 × 969 pixels.
    case png
    /// A single-page vector PDF (Apple's preferred format), whose page must have the 1536:969 aspect ratio.
    case pdf

    /// The IANA media type to send as `Content-Type`: `image/png` or `application/pdf`.
    public var mediaType: String {
        switch self {
        case .png: "image/png"
        case .pdf: "application/pdf"
        }
    }

    /// Reads a `Content-Type` value such as `application/pdf` or `image/png; charset=binary`.
    ///
    /// Parameters after `;` and surrounding whitespace are ignored and the comparison is
    /// case-insensitive. Returns `nil` for any other media type (for example `image/jpeg`).
    public init?(mediaType: String) {
        let essence = Self.essence(of: mediaType)
        guard let format = Self.allCases.first(where: { $0.mediaType == essence }) else { return nil }
        self = format
    }

    /// The media type without parameters, trimmed and lowercased: `Image/PNG; x=y` → `image/png`.
    static func essence(of contentType: String) -> String {
        let type = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return type.trimmingCharacters(in: .whitespaces).lowercased()
    }
}

/// The measured size of accepted card art, in the unit that matters for its format.
public enum CardArtDimensions: Sendable, Hashable, Codable {
    /// A PNG's pixel size, read from its `IHDR` header.
    case pixels(width: Int, height: Int)
    /// A PDF page's visible box (the crop box, else the media box) in PDF points; a vector page may be any
    /// size from 3 to 14,400 points a side.
    case points(width: Double, height: Double)
}

/// What ``CardArtValidator`` learned about card art it accepted.
///
/// Only produced for art that meets every rule, so a PNG's dimensions are always
/// 1536 × 969 pixels and a PDF's page is always landscape with the 1536:969 aspect ratio.
public struct CardArtInfo: Sendable, Hashable, Codable {
    /// The format detected from the file's contents (never from a declared content type).
    public let format: CardArtFormat
    /// Pixel size for a PNG, page box size in points for a PDF.
    public let dimensions: CardArtDimensions
    /// The size of the file in bytes (always less than ``CardArtValidator/maximumSize``).
    public let byteCount: Int

    /// Creates a description of card art, e.g. for a test double; ``CardArtValidator`` is the usual source.
    public init(format: CardArtFormat, dimensions: CardArtDimensions, byteCount: Int) {
        self.format = format
        self.dimensions = dimensions
        self.byteCount = byteCount
    }

    /// The media type to serve the art with (`image/png` or `application/pdf`).
    public var mediaType: String { format.mediaType }
}

/// A refusal of a card-art file: a stable machine-readable code and a message naming exactly what is wrong.
///
/// Messages quote measured values (sizes, dimensions, page counts) so a designer can fix the file,
/// e.g. "PNG is 1024×768 pixels; Apple requires 1536×969".
public struct CardArtError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine-readable codes for card-art refusals; the raw values never change once published.
    public struct Code: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        /// The code as it appears on the wire, e.g. `png_wrong_size`.
        public let rawValue: String
        /// Wraps a raw code.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The raw code.
        public var description: String { rawValue }

        /// The file has no bytes.
        public static let empty = Code(rawValue: "empty")
        /// The file is not under 4 MB (it is ``CardArtValidator/maximumSize``, 4,000,000, bytes or more).
        public static let tooLarge = Code(rawValue: "too_large")
        /// The file is neither a PNG nor a PDF (judged by its first bytes, not by its name or declared type).
        public static let unknownFormat = Code(rawValue: "unknown_format")
        /// The declared `Content-Type` does not name the format the bytes actually have.
        public static let contentTypeMismatch = Code(rawValue: "content_type_mismatch")
        /// The PNG ends before its header or before its `IEND` chunk.
        public static let pngTruncated = Code(rawValue: "png_truncated")
        /// The PNG's first chunk is not a well-formed `IHDR`: wrong type, length or CRC, a zero dimension,
        /// a bit depth its colour type does not allow, or a compression, filter or interlace method that does not exist.
        public static let pngInvalidHeader = Code(rawValue: "png_invalid_header")
        /// A PNG chunk after the header is damaged (bad length, type or CRC of a critical chunk, or no image data);
        /// a critical chunk other than `IHDR`, `PLTE`, `IDAT` and `IEND`; `IDAT` chunks that are not consecutive or
        /// whose data does not start with a valid zlib header; a `PLTE` that is missing (indexed-colour), forbidden
        /// (greyscale), repeated, after the image data, of a bad length or, for indexed-colour, with more entries
        /// than its bit depth can index; or an `IEND` that holds data.
        public static let pngCorrupt = Code(rawValue: "png_corrupt")
        /// Bytes follow the PNG's `IEND` chunk; decoders ignore them, so they could hold anything (another file).
        public static let pngTrailingData = Code(rawValue: "png_trailing_data")
        /// The PNG is not exactly 1536 × 969 pixels.
        public static let pngWrongSize = Code(rawValue: "png_wrong_size")
        /// The PNG has an `acTL` chunk: it is an animated PNG (APNG), and card art is a still image.
        public static let pngAnimated = Code(rawValue: "png_animated")
        /// The PDF has no `%%EOF` marker near its end, or none after its last `startxref`, so it was most likely cut off.
        public static let pdfTruncated = Code(rawValue: "pdf_truncated")
        /// The PDF is encrypted: its trailer (or a cross-reference stream) has `/Encrypt`, even with an empty password.
        public static let pdfEncrypted = Code(rawValue: "pdf_encrypted")
        /// Something other than white space and comments follows the byte offset after the PDF's last
        /// `startxref` (or the offset is missing), or data after a `startxref` and `%%EOF` is not a complete
        /// incremental update (objects, an `xref` section and trailer or a cross-reference stream, `startxref`,
        /// `%%EOF`): a reader going by the cross-reference table would not read it.
        public static let pdfDataAfterStartXRef = Code(rawValue: "pdf_data_after_startxref")
        /// The PDF's top level holds something other than objects (`N G obj … endobj`), cross-reference
        /// sections, trailers, `startxref` and comments (for example an unbalanced `(` or a stray
        /// `stream`), one revision defines an object number twice, or the cross-reference table gives
        /// an object at an offset where the scan found none: content a reader following the
        /// cross-reference table could show but a scan in file order would not read.
        public static let pdfInvalidStructure = Code(rawValue: "pdf_invalid_structure")
        /// No page could be read from the PDF: for example its pages are inside compressed object streams,
        /// a `/Kids` entry of its page tree is not an indirect reference, two tree nodes share one `/Kids`
        /// array, or the tree lists more entries than the file has objects (plus 1,024).
        public static let pdfNoPage = Code(rawValue: "pdf_no_page")
        /// The PDF carries active content card art has no use for: in its catalog an `/OpenAction` that is an
        /// action (a destination is accepted), `/AA`, `/AcroForm`, or `/JavaScript` or `/EmbeddedFiles` in
        /// `/Names`; `/AA` on its page; or, in any object read (every definition of it, including those a
        /// later revision replaced), a `/Launch`, `/JavaScript`, `/SubmitForm`, `/ImportData`, `/GoToR`,
        /// `/GoToE` or `/RichMediaExecute` action, or any `/JS` entry (such as a `/Rendition` action's script).
        public static let pdfActiveContent = Code(rawValue: "pdf_active_content")
        /// The first page was found but its `/MediaBox` could not be read.
        public static let pdfNoPageBox = Code(rawValue: "pdf_no_page_box")
        /// The page's `/MediaBox` or `/CropBox` is not four finite numbers enclosing a non-empty area.
        public static let pdfInvalidPageBox = Code(rawValue: "pdf_invalid_page_box")
        /// The PDF has more than one page; card art is a single page.
        public static let pdfMultiplePages = Code(rawValue: "pdf_multiple_pages")
        /// A side of the page box or of the `/MediaBox` is under 3 or over 14,400 points, the page sizes ISO 32000-1 allows.
        public static let pdfPageSizeOutOfRange = Code(rawValue: "pdf_page_size_out_of_range")
        /// The page carries a `/Rotate` other than 0, so how it is displayed depends on the viewer.
        public static let pdfRotated = Code(rawValue: "pdf_rotated")
        /// The page is portrait or square; card art must be landscape.
        public static let pdfNotLandscape = Code(rawValue: "pdf_not_landscape")
        /// The page is landscape but its aspect ratio is not 1536:969 within 0.5%.
        public static let pdfWrongAspect = Code(rawValue: "pdf_wrong_aspect")
    }

    /// What kind of refusal this is.
    public var code: Code
    /// What is wrong, phrased so a person can fix the file.
    public var message: String

    /// Creates a card-art refusal.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}
