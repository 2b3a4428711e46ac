import Foundation

/// Checks issuer card art against Apple's Wallet rules before it is stored or sent to Apple.
///
/// Apple accepts a vector PDF (preferred) or a PNG; the art must be landscape at 1536 × 969
/// pixels and under 4 MB. Concretely this validator accepts:
/// - a PNG whose `IHDR` header says exactly 1536 × 969 pixels, with a bit depth its colour type
///   allows, compression and filter method 0 and interlace method 0 or 1; whose chunks are complete
///   up to an empty `IEND` that ends the file; whose only critical chunks are `IHDR`, `PLTE`, `IDAT`
///   and `IEND`, with correct CRCs; whose `IDAT` chunks are consecutive and start with a valid zlib
///   header (the compressed image data itself is not decoded); which has one `PLTE` before its
///   image data when it is indexed-colour (with at most 2^bit depth entries) and none when it is
///   greyscale; and which has no `acTL` chunk (it is not animated);
/// - an unencrypted single-page PDF whose page box (the `/CropBox` clipped to the `/MediaBox`,
///   else the `/MediaBox`, either possibly inherited from the page tree) is landscape with the
///   1536:969 aspect ratio within ``aspectRatioTolerance``, whose sides (and the `/MediaBox`'s) are
///   between ``minimumPageSide`` and ``maximumPageSide`` points (`/UserUnit` is not read), and
///   which has no page rotation.
///
/// A PDF is also refused when it carries active content (see ``CardArtError/Code/pdfActiveContent``),
/// when anything but white space and comments follows the offset after its last `startxref`
/// (objects there would be read here but not by a reader following the cross-reference table; a
/// PDF without `startxref` is read in file order, as a reader rebuilding a damaged table would),
/// when data after a `startxref` and `%%EOF` is not a complete incremental update, when its top
/// level holds anything but objects, cross-reference sections, trailers, `startxref` and comments,
/// or defines an object number twice in one revision, or whose cross-reference table gives an
/// object at an offset where the scan found none (see ``CardArtError/Code/pdfInvalidStructure``),
/// and when its page tree is not a tree of indirect references (see ``CardArtError/Code/pdfNoPage``).
///
/// The format is always detected from the bytes; a declared content type is only cross-checked.
/// Validation is bounded: it never reads outside the data, works in time linear in its size,
/// refuses anything of ``maximumSize`` bytes or more before parsing it, and never traps on hostile input.
/// PDFs whose pages live inside compressed object streams are refused with a message asking for
/// a save without object-stream compression, rather than guessed at.
///
/// Foundation only, so the same rules run in the server's card-art upload and in the iOS SDK.
public struct CardArtValidator: Sendable {
    /// The size limit in bytes: 4 MB (4,000,000 bytes). Art must be strictly smaller ("under 4 MB"),
    /// so the largest file accepted has 3,999,999 bytes.
    public static let maximumSize = 4_000_000
    /// The exact pixel width Apple requires of a PNG, and the width term of the PDF aspect ratio.
    public static let requiredWidth = 1536
    /// The exact pixel height Apple requires of a PNG, and the height term of the PDF aspect ratio.
    public static let requiredHeight = 969
    /// The shortest side a PDF page box may have, in points (ISO 32000-1, Annex C: 3 units).
    public static let minimumPageSide = 3.0
    /// The longest side a PDF page box may have, in points (ISO 32000-1, Annex C: 14,400 units, 200 inches).
    public static let maximumPageSide = 14_400.0
    /// How far a PDF page's width ÷ height may differ from 1536 ÷ 969, relative: 0.005 is 0.5%.
    public static let aspectRatioTolerance = 0.005

    /// The aspect ratio a PDF page must have: 1536 ÷ 969 ≈ 1.585.
    public static var requiredAspectRatio: Double { Double(requiredWidth) / Double(requiredHeight) }

    /// Tells which card-art format the bytes are, from their first bytes only; does not validate them.
    ///
    /// Returns ``CardArtFormat/png`` for data starting with the PNG signature (or with at least
    /// its first four bytes, so that a cut-off PNG is reported as truncated), ``CardArtFormat/pdf``
    /// for data starting with `%PDF-`, and `nil` for anything else.
    public static func detectFormat(of data: Data) -> CardArtFormat? {
        let head = [UInt8](data.prefix(CardArtPNGReader.signature.count))
        if head.count >= 4, head.elementsEqual(CardArtPNGReader.signature.prefix(head.count)) { return .png }
        if head.starts(with: CardArtPDFReader.header) { return .pdf }
        return nil
    }

    /// Validates card art and describes it, or says exactly why Apple would refuse it.
    ///
    /// Checks run in this order and the first failure is returned: empty, too large
    /// (`data.count >= maximumSize`), unknown format, content-type mismatch, then the PNG or PDF rules.
    ///
    /// - Parameters:
    ///   - data: The whole file as uploaded.
    ///   - declaredContentType: The `Content-Type` it was sent with, if any. Parameters such as
    ///     `; charset=binary` and letter case are ignored; any other type than the detected
    ///     format's (`image/png` or `application/pdf`) is refused with `content_type_mismatch`.
    /// - Returns: ``CardArtInfo`` for acceptable art, or a ``CardArtError`` with a stable code.
    public static func validate(_ data: Data, declaredContentType: String? = nil) -> Result<CardArtInfo, CardArtError> {
        guard !data.isEmpty else {
            return .failure(CardArtError(code: .empty, message: "file is empty; card art must be a 1536×969 PNG or a landscape vector PDF"))
        }
        guard data.count < maximumSize else {
            return .failure(CardArtError(
                code: .tooLarge,
                message: "file is \(CardArtFormatting.megabytes(data.count)) MB (\(CardArtFormatting.grouped(data.count)) bytes); Apple requires under 4 MB (less than \(CardArtFormatting.grouped(maximumSize)) bytes)"
            ))
        }
        guard let format = detectFormat(of: data) else {
            return .failure(CardArtError(code: .unknownFormat, message: unknownFormatMessage(data)))
        }
        if let declaredContentType {
            let essence = CardArtFormat.essence(of: declaredContentType)
            if essence != format.mediaType {
                return .failure(CardArtError(code: .contentTypeMismatch, message: mismatchMessage(declared: essence, actual: format)))
            }
        }
        let bytes = [UInt8](data)
        switch format {
        case .png:
            return CardArtPNGReader.validate(bytes).map {
                CardArtInfo(format: .png, dimensions: .pixels(width: $0.width, height: $0.height), byteCount: bytes.count)
            }
        case .pdf:
            return CardArtPDFReader.validate(bytes).map {
                CardArtInfo(format: .pdf, dimensions: .points(width: $0.width, height: $0.height), byteCount: bytes.count)
            }
        }
    }

    private static func unknownFormatMessage(_ data: Data) -> String {
        let head = [UInt8](data.prefix(8))
        let hex = head.map { CardArtFormatting.hexByte($0) }.joined(separator: " ")
        var looksLike = ""
        if head.starts(with: [0xFF, 0xD8, 0xFF]) {
            looksLike = ", which is a JPEG"
        } else if head.starts(with: Array("GIF8".utf8)) {
            looksLike = ", which is a GIF"
        } else if head.starts(with: Array("<?xml".utf8)) || head.starts(with: Array("<svg".utf8)) {
            looksLike = ", which is XML or SVG"
        }
        return "file is neither a PNG nor a PDF (it starts with bytes \(hex)\(looksLike)); card art must be a 1536×969 PNG or a landscape vector PDF"
    }

    private static func mismatchMessage(declared: String, actual: CardArtFormat) -> String {
        // The caller's text, so read as an identifier: digit groups joined by any punctuation
        // (`image/4111,1111,1111,1111`) are a card number to hide.
        let shown = Redaction.identifier(CardArtFormatting.printable(declared, limit: 64))
        let actualName = actual == .png ? "a PNG" : "a PDF"
        if CardArtFormat(mediaType: declared) != nil {
            return "declared Content-Type is \(shown) but the file is \(actualName); send it as \(actual.mediaType)"
        }
        return "declared Content-Type \"\(shown)\" is not accepted for card art; the file is \(actualName), so send it as \(actual.mediaType)"
    }
}

// MARK: - PNG

/// Reads a PNG's header and walks its chunk list; never reads past the end of the bytes.
private enum CardArtPNGReader {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    private static let ihdr: [UInt8] = Array("IHDR".utf8)
    private static let idat: [UInt8] = Array("IDAT".utf8)
    private static let iend: [UInt8] = Array("IEND".utf8)
    private static let plte: [UInt8] = Array("PLTE".utf8)
    private static let actl: [UInt8] = Array("acTL".utf8)
    private static let knownCritical: [[UInt8]] = [ihdr, plte, idat, iend]
    /// Signature (8) + IHDR length and type (8) + IHDR data (13) + CRC (4).
    private static let headerLength = 33

    static func validate(_ bytes: [UInt8]) -> Result<(width: Int, height: Int), CardArtError> {
        switch readSize(bytes) {
        case .failure(let error):
            return .failure(error)
        case .success(let size):
            guard size.width == UInt32(CardArtValidator.requiredWidth), size.height == UInt32(CardArtValidator.requiredHeight) else {
                return .failure(CardArtError(
                    code: .pngWrongSize,
                    message: "PNG is \(size.width)×\(size.height) pixels; Apple requires \(CardArtValidator.requiredWidth)×\(CardArtValidator.requiredHeight)"
                ))
            }
            return .success((CardArtValidator.requiredWidth, CardArtValidator.requiredHeight))
        }
    }

    /// The pixel size from `IHDR`, after checking the whole chunk structure.
    private static func readSize(_ bytes: [UInt8]) -> Result<(width: UInt32, height: UInt32), CardArtError> {
        let count = bytes.count
        guard count >= 16 else {
            return .failure(truncated("PNG ends after \(count) bytes, before its IHDR header (a PNG needs at least \(headerLength) bytes)"))
        }
        let firstType = Array(bytes[12..<16])
        guard firstType == ihdr else {
            return .failure(CardArtError(code: .pngInvalidHeader, message: "PNG's first chunk is \(chunkName(firstType)); it must be IHDR"))
        }
        let headerDataLength = readUInt32(bytes, at: 8)
        guard headerDataLength == 13 else {
            return .failure(CardArtError(code: .pngInvalidHeader, message: "PNG's IHDR chunk declares \(headerDataLength) bytes of data; it must be 13"))
        }
        guard count >= headerLength else {
            return .failure(truncated("PNG ends after \(count) bytes, inside its IHDR header (\(headerLength) bytes needed)"))
        }
        guard CardArtCRC32.checksum(bytes[12..<29]) == readUInt32(bytes, at: 29) else {
            return .failure(CardArtError(code: .pngInvalidHeader, message: "PNG's IHDR chunk fails its CRC check; the file is damaged"))
        }
        let width = readUInt32(bytes, at: 16)
        let height = readUInt32(bytes, at: 20)
        guard width > 0, height > 0, width <= 0x7FFF_FFFF, height <= 0x7FFF_FFFF else {
            return .failure(CardArtError(code: .pngInvalidHeader, message: "PNG's IHDR gives an impossible size of \(width)×\(height) pixels"))
        }

        if let error = checkHeaderFields(bytes) { return .failure(error) }
        let colourType = bytes[25]

        var position = headerLength
        var sawImageData = false
        var sawPalette = false
        var imageDataEnded = false
        /// The first two bytes of the image data (the zlib header), which may be split across IDAT chunks.
        var zlibHeader: [UInt8] = []
        var firstImageData = 0
        while true {
            guard count - position >= 8 else {
                let detail = position == count ? "after \(count) bytes" : "inside a chunk header at byte \(position)"
                return .failure(truncated("PNG ends \(detail) without an IEND chunk; the file was cut off"))
            }
            let length = readUInt32(bytes, at: position)
            let type = Array(bytes[(position + 4)..<(position + 8)])
            guard type.allSatisfy(isASCIILetter) else {
                return .failure(corrupt("PNG has an invalid chunk type at byte \(position); the file is damaged"))
            }
            guard length <= 0x7FFF_FFFF else {
                return .failure(corrupt("PNG's \(chunkName(type)) chunk at byte \(position) declares an impossible length of \(length) bytes"))
            }
            let dataLength = Int(length)
            guard count - position - 12 >= dataLength else {
                return .failure(truncated(
                    "PNG ends inside its \(chunkName(type)) chunk at byte \(position) (the chunk needs \(dataLength + 12) bytes, \(count - position) remain); the file was cut off"
                ))
            }
            let dataEnd = position + 8 + dataLength
            // Critical chunks (upper-case first letter) must be intact; decoders skip damaged ancillary ones.
            if type[0] & 0x20 == 0, CardArtCRC32.checksum(bytes[(position + 4)..<dataEnd]) != readUInt32(bytes, at: dataEnd) {
                return .failure(corrupt("PNG's \(chunkName(type)) chunk at byte \(position) fails its CRC check; the file is damaged"))
            }
            if type == ihdr {
                return .failure(corrupt("PNG has a second IHDR chunk at byte \(position); the file is damaged"))
            }
            if type[0] & 0x20 == 0, !knownCritical.contains(type) {
                return .failure(corrupt(
                    "PNG has an unknown critical chunk \(chunkName(type)) at byte \(position); the only critical chunks are IHDR, PLTE, IDAT and IEND, and decoders refuse an image with any other"
                ))
            }
            if type == actl {
                return .failure(CardArtError(
                    code: .pngAnimated,
                    message: "PNG has an acTL chunk at byte \(position), so it is an animated PNG (APNG); card art must be a still image"
                ))
            }
            if type == plte {
                let header = (colourType: colourType, bitDepth: bytes[24])
                if let error = checkPalette(length: dataLength, at: position, header: header, sawPalette: sawPalette, sawImageData: sawImageData) {
                    return .failure(error)
                }
                sawPalette = true
            }
            if type == idat, !sawImageData {
                if colourType == 3, !sawPalette {
                    return .failure(corrupt("PNG has colour type 3 (indexed-colour) but no PLTE chunk before its image data at byte \(position)"))
                }
                sawImageData = true
                firstImageData = position
            }
            if type == idat {
                if imageDataEnded {
                    return .failure(corrupt("PNG has an IDAT chunk at byte \(position) after other chunks followed its image data; IDAT chunks must be consecutive"))
                }
                zlibHeader += bytes[(position + 8)..<min(dataEnd, position + 8 + 2 - zlibHeader.count)]
            } else if sawImageData {
                imageDataEnded = true
            }
            if type == iend, dataLength != 0 {
                return .failure(corrupt("PNG's IEND chunk at byte \(position) holds \(dataLength) bytes of data; it must be empty"))
            }
            position = dataEnd + 4
            if type == iend { break }
        }
        guard sawImageData else {
            return .failure(corrupt("PNG has no image data (no IDAT chunk)"))
        }
        if let problem = zlibHeaderProblem(zlibHeader) {
            return .failure(corrupt("PNG's image data (IDAT at byte \(firstImageData)) \(problem); the file is damaged"))
        }
        guard position == count else {
            return .failure(CardArtError(
                code: .pngTrailingData,
                message: "PNG has \(CardArtFormatting.grouped(count - position)) bytes after its IEND chunk, which ends at byte \(position); the file must end there"
            ))
        }
        return .success((width, height))
    }

    /// The zlib header (RFC 1950) that starts the image data: deflate, a window of at most 32 KiB,
    /// a correct check value and no preset dictionary. The compressed data itself is not decoded.
    private static func zlibHeaderProblem(_ header: [UInt8]) -> String? {
        guard header.count == 2 else {
            return "holds \(header.count) byte\(header.count == 1 ? "" : "s"), too few for a zlib stream"
        }
        let method = header[0] & 0x0F
        let windowBits = Int(header[0] >> 4) + 8
        let shown = header.map { CardArtFormatting.hexByte($0) }.joined(separator: " ")
        guard (Int(header[0]) << 8 | Int(header[1])) % 31 == 0 else {
            return "starts with \(shown), which fails the zlib header check"
        }
        guard method == 8 else {
            return "starts with a zlib header for compression method \(method); PNG uses 8 (deflate)"
        }
        guard windowBits <= 15 else {
            return "starts with a zlib header for a window of 2^\(windowBits) bytes; deflate allows at most 2^15"
        }
        guard header[1] & 0x20 == 0 else {
            return "starts with a zlib header asking for a preset dictionary, which PNG does not allow"
        }
        return nil
    }

    /// The bit depths each colour type allows (PNG specification, table 11.1).
    private static func allowedBitDepths(colourType: UInt8) -> [UInt8]? {
        switch colourType {
        case 0: [1, 2, 4, 8, 16]
        case 2: [8, 16]
        case 3: [1, 2, 4, 8]
        case 4, 6: [8, 16]
        default: nil
        }
    }

    private static func colourTypeName(_ colourType: UInt8) -> String {
        switch colourType {
        case 0: "greyscale"
        case 2: "truecolour"
        case 3: "indexed-colour"
        case 4: "greyscale with alpha"
        default: "truecolour with alpha"
        }
    }

    /// The `IHDR` fields after the size: bit depth for the colour type, compression, filter and interlace methods.
    private static func checkHeaderFields(_ bytes: [UInt8]) -> CardArtError? {
        let bitDepth = bytes[24]
        let colourType = bytes[25]
        guard let depths = allowedBitDepths(colourType: colourType) else {
            return CardArtError(code: .pngInvalidHeader, message: "PNG's IHDR gives colour type \(colourType), which does not exist (the colour types are 0, 2, 3, 4 and 6)")
        }
        guard depths.contains(bitDepth) else {
            let allowed = depths.map(String.init).joined(separator: ", ")
            return CardArtError(
                code: .pngInvalidHeader,
                message: "PNG's IHDR gives bit depth \(bitDepth) for colour type \(colourType) (\(colourTypeName(colourType))), which allows only \(allowed)"
            )
        }
        guard bytes[26] == 0 else {
            return CardArtError(code: .pngInvalidHeader, message: "PNG's IHDR gives compression method \(bytes[26]); the only one is 0 (deflate)")
        }
        guard bytes[27] == 0 else {
            return CardArtError(code: .pngInvalidHeader, message: "PNG's IHDR gives filter method \(bytes[27]); the only one is 0 (adaptive filtering)")
        }
        guard bytes[28] <= 1 else {
            return CardArtError(code: .pngInvalidHeader, message: "PNG's IHDR gives interlace method \(bytes[28]); it must be 0 (none) or 1 (Adam7)")
        }
        return nil
    }

    /// A `PLTE` chunk: allowed once, before the image data, not for greyscale, 1 to 256 entries of 3 bytes,
    /// and for indexed-colour no more entries than the bit depth can index.
    private static func checkPalette(
        length: Int, at position: Int, header: (colourType: UInt8, bitDepth: UInt8), sawPalette: Bool, sawImageData: Bool
    ) -> CardArtError? {
        let colourType = header.colourType
        if colourType == 0 || colourType == 4 {
            return corrupt("PNG has a PLTE chunk at byte \(position), but its colour type \(colourType) (\(colourTypeName(colourType))) allows no palette")
        }
        if sawPalette {
            return corrupt("PNG has a second PLTE chunk at byte \(position); the file is damaged")
        }
        if sawImageData {
            return corrupt("PNG's PLTE chunk at byte \(position) comes after its image data; it must come before the first IDAT chunk")
        }
        guard length > 0, length <= 768, length % 3 == 0 else {
            return corrupt("PNG's PLTE chunk at byte \(position) holds \(length) bytes; a palette is 1 to 256 entries of 3 bytes")
        }
        let indexable = 1 << Int(header.bitDepth)
        if colourType == 3, length / 3 > indexable {
            return corrupt("PNG's PLTE chunk at byte \(position) holds \(length / 3) entries; bit depth \(header.bitDepth) indexes at most \(indexable)")
        }
        return nil
    }

    private static func truncated(_ message: String) -> CardArtError { CardArtError(code: .pngTruncated, message: message) }
    private static func corrupt(_ message: String) -> CardArtError { CardArtError(code: .pngCorrupt, message: message) }

    private static func isASCIILetter(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    /// A chunk type for a message: its four letters, or hex when it is not printable.
    private static func chunkName(_ type: [UInt8]) -> String {
        if type.allSatisfy(isASCIILetter) { return String(decoding: type, as: UTF8.self) }
        return "a chunk of type " + type.map { CardArtFormatting.hexByte($0) }.joined(separator: " ")
    }

    /// Big-endian UInt32 at `offset`; callers have checked that four bytes are there.
    private static func readUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
}

/// CRC-32 as PNG uses it (ISO 3309 / ITU-T V.42, reflected polynomial 0xEDB88320).
private enum CardArtCRC32 {
    private static let table: [UInt32] = (0..<256).map { index -> UInt32 in
        var value = UInt32(index)
        for _ in 0..<8 {
            value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1
        }
        return value
    }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
        }
        return crc ^ 0xFFFF_FFFF
    }
}

// MARK: - PDF

/// Finds a PDF's first page and its page box by scanning the uncompressed object text.
///
/// One forward pass tokenizes the file, records every top-level `N G obj … endobj` value,
/// skips stream data, reads `xref` sections and notes the trailer's `/Root`; anything else at
/// the top level, and an object number defined twice in one revision, stops it as malformed.
/// The page tree is then walked from the catalog (or, if there is none, `/Type /Page` objects
/// are taken in file order). Objects inside
/// compressed object streams are not visible, and a page that cannot be read is refused, never guessed.
private enum CardArtPDFReader {
    static let header: [UInt8] = Array("%PDF-".utf8)
    private static let endOfFileMarker: [UInt8] = Array("%%EOF".utf8)
    /// Where `%%EOF` may sit: readers accept it within the last 1024 bytes.
    private static let endOfFileWindow = 1024
    private static let saveAdvice = "save the PDF without object-stream compression (for example with PDF 1.4 / Acrobat 5 compatibility)"

    static func validate(_ bytes: [UInt8]) -> Result<(width: Double, height: Double), CardArtError> {
        let tail = bytes.suffix(endOfFileWindow)
        guard CardArtByteSearch.firstIndex(of: endOfFileMarker, in: tail) != nil else {
            return .failure(CardArtError(code: .pdfTruncated, message: "PDF has no %%EOF marker at its end; the file looks cut off"))
        }
        let document = PDFDocumentScan(bytes: bytes)
        if let place = document.encryptedIn {
            return .failure(CardArtError(
                code: .pdfEncrypted,
                message: "PDF is encrypted (\(place) has /Encrypt); save the card art without a password, permissions or other security"
            ))
        }
        if let malformation = document.malformation {
            return .failure(CardArtError(code: .pdfInvalidStructure, message: malformation))
        }
        switch document.endOfFile {
        case .noStartXRef:
            // Without cross-reference data each reader rebuilds it its own way (some read headers
            // this scan does not, such as ones with comments inside).
            return .failure(CardArtError(code: .pdfInvalidStructure, message: "PDF has no startxref and cross-reference table, so each reader rebuilds where its objects are in its own way; export the file again"))
        case .expectingOffset:
            return .failure(CardArtError(code: .pdfDataAfterStartXRef, message: "PDF's last startxref is not followed by the byte offset of its cross-reference section"))
        case .dataAfterOffset(let position):
            return .failure(CardArtError(
                code: .pdfDataAfterStartXRef,
                message: "PDF has data at byte \(position) after its last startxref and offset; only white space and comments (%%EOF) may follow them"
            ))
        case .offset(let end):
            guard CardArtByteSearch.firstIndex(of: endOfFileMarker, in: bytes[end...]) != nil else {
                return .failure(CardArtError(code: .pdfTruncated, message: "PDF has no %%EOF marker after its last startxref; the file looks cut off"))
            }
        }
        if let incompleteUpdate = document.incompleteUpdate {
            return .failure(CardArtError(code: .pdfDataAfterStartXRef, message: incompleteUpdate))
        }
        if let skipped = document.crossReferenceProblem {
            return .failure(CardArtError(code: .pdfInvalidStructure, message: skipped))
        }

        let page: [String: PDFValue]
        switch document.firstPage() {
        case .unreadable(let reason):
            let detail = document.hasCompressedObjects
                ? "its page objects are stored inside compressed object streams"
                : reason
            return .failure(CardArtError(code: .pdfNoPage, message: "could not read the PDF's page box: \(detail); \(saveAdvice)"))
        case .found(let first, let pageCount):
            guard pageCount == 1 else {
                return .failure(CardArtError(code: .pdfMultiplePages, message: "PDF has \(pageCount) pages; card art must be a single page"))
            }
            page = first
        }
        if let found = document.activeContent(page: page) {
            return .failure(CardArtError(
                code: .pdfActiveContent,
                message: "PDF has active content: \(found); card art must not carry actions, scripts, forms or attached files"
            ))
        }

        let box: PDFRectangle
        switch pageBox(of: page, in: document) {
        case .failure(let error): return .failure(error)
        case .success(let rectangle): box = rectangle
        }

        switch document.inheritedAttribute("Rotate", of: page) {
        case .absent:
            break
        case .value(let rotate):
            guard let degrees = rotate.integerDegrees else {
                // Readers round, truncate or parse such a value differently; some rotate the page.
                return .failure(CardArtError(code: .pdfRotated, message: "PDF page has a /Rotate that is not a whole number of degrees; save the card art as an upright landscape page without page rotation"))
            }
            if degrees % 360 != 0 {
                return .failure(CardArtError(
                    code: .pdfRotated,
                    message: "PDF page has /Rotate \(degrees); save the card art as an upright landscape page without page rotation"
                ))
            }
        case .unreadable:
            return .failure(CardArtError(code: .pdfRotated, message: "PDF page's /Rotate is in an object this check cannot read; save the card art as an upright landscape page without page rotation"))
        }

        let width = box.width
        let height = box.height
        let size = box.sizeDescription
        if let error = sizeRangeError(box, name: "PDF page") { return .failure(error) }
        guard width > height else {
            let shape = width == height ? "square" : "portrait"
            return .failure(CardArtError(
                code: .pdfNotLandscape,
                message: "PDF page is \(size), which is \(shape); card art must be landscape (\(CardArtValidator.requiredWidth):\(CardArtValidator.requiredHeight))"
            ))
        }
        // Last, so a file refused for something more specific (its pages in object streams,
        // say) is told that first.
        if document.hasCrossReferenceStream {
            return .failure(CardArtError(
                code: .pdfInvalidStructure,
                message: "PDF indexes its objects with a cross-reference stream (PDF 1.5 compression), which this check does not decode, so it cannot see every object a reader reaches; \(saveAdvice)"
            ))
        }
        let ratio = width / height
        let deviation = abs(ratio / CardArtValidator.requiredAspectRatio - 1)
        guard deviation <= CardArtValidator.aspectRatioTolerance else {
            return .failure(CardArtError(
                code: .pdfWrongAspect,
                message: "PDF page is \(size), an aspect ratio of \(CardArtFormatting.decimal(ratio, fractionDigits: 3)); Apple requires \(CardArtValidator.requiredWidth):\(CardArtValidator.requiredHeight) (\(CardArtFormatting.decimal(CardArtValidator.requiredAspectRatio, fractionDigits: 3))) within 0.5%"
            ))
        }
        return .success((width, height))
    }

    /// A refusal when a side of `box` is outside the page sizes ISO 32000-1 allows (Annex C: 3 to 14,400 units).
    ///
    /// `/UserUnit` is not read, so the limits apply to the box's numbers as written.
    private static func sizeRangeError(_ box: PDFRectangle, name: String) -> CardArtError? {
        let sides = CardArtValidator.minimumPageSide...CardArtValidator.maximumPageSide
        guard !sides.contains(box.width) || !sides.contains(box.height) else {
            // Coordinates far from the origin lose precision in readers that work in 32-bit
            // floats, which then show the page at another size.
            let limit = CardArtValidator.maximumPageSide
            guard [box.minX, box.minY, box.maxX, box.maxY].allSatisfy({ abs($0) <= limit }) else {
                return CardArtError(
                    code: .pdfPageSizeOutOfRange,
                    message: "\(name) has a corner beyond \(CardArtFormatting.grouped(Int(limit))) points from the origin; readers that work in 32-bit numbers would show it at another size"
                )
            }
            return nil
        }
        return CardArtError(
            code: .pdfPageSizeOutOfRange,
            message: "\(name) is \(box.sizeDescription); page sides must be between \(CardArtFormatting.decimal(sides.lowerBound, fractionDigits: 0)) and \(CardArtFormatting.grouped(Int(sides.upperBound))) points (ISO 32000-1, Annex C)"
        )
    }

    /// The visible page box: the crop box clipped to the media box, else the media box.
    private static func pageBox(of page: [String: PDFValue], in document: PDFDocumentScan) -> Result<PDFRectangle, CardArtError> {
        let media: PDFRectangle
        switch document.inheritedAttribute("MediaBox", of: page) {
        case .absent:
            return .failure(CardArtError(code: .pdfNoPageBox, message: "could not read the PDF's page box: the page and its parents have no /MediaBox; \(saveAdvice)"))
        case .unreadable(let hidden):
            let detail = hidden.map { "its /MediaBox is object \($0), which the cross-reference sections a reader follows mark free or do not list, so a reader has no such box; export the file again" }
                ?? "its /MediaBox is in an object that is not readable (probably a compressed object stream); \(saveAdvice)"
            return .failure(CardArtError(code: .pdfNoPageBox, message: "could not read the PDF's page box: \(detail)"))
        case .value(let value):
            guard let rectangle = document.rectangle(value) else {
                return .failure(CardArtError(code: .pdfInvalidPageBox, message: "PDF page's /MediaBox is not four finite numbers enclosing an area"))
            }
            if let error = sizeRangeError(rectangle, name: "PDF page's /MediaBox") { return .failure(error) }
            media = rectangle
        }
        switch document.inheritedAttribute("CropBox", of: page) {
        case .absent:
            return .success(media)
        case .unreadable(let hidden):
            let detail = hidden.map { "its /CropBox is object \($0), which the cross-reference sections a reader follows mark free or do not list, so a reader has no such box; export the file again" }
                ?? "its /CropBox is in an object that is not readable (probably a compressed object stream); \(saveAdvice)"
            return .failure(CardArtError(code: .pdfNoPageBox, message: "could not read the PDF's page box: \(detail)"))
        case .value(let value):
            guard let crop = document.rectangle(value) else {
                return .failure(CardArtError(code: .pdfInvalidPageBox, message: "PDF page's /CropBox is not four finite numbers enclosing an area"))
            }
            guard let visible = crop.intersection(media) else {
                return .failure(CardArtError(code: .pdfInvalidPageBox, message: "PDF page's /CropBox lies outside its /MediaBox, so nothing of the page is visible"))
            }
            return .success(visible)
        }
    }
}

/// An axis-aligned PDF rectangle with its corners normalized (`minX < maxX`, `minY < maxY`).
private struct PDFRectangle {
    var minX: Double
    var minY: Double
    var maxX: Double
    var maxY: Double

    var width: Double { maxX - minX }
    var height: Double { maxY - minY }

    /// `1536×969 points`, with at most two decimals.
    var sizeDescription: String {
        "\(CardArtFormatting.decimal(width, fractionDigits: 2))×\(CardArtFormatting.decimal(height, fractionDigits: 2)) points"
    }

    /// The overlap of two rectangles, or `nil` when they do not overlap in a non-empty area.
    func intersection(_ other: PDFRectangle) -> PDFRectangle? {
        let result = PDFRectangle(minX: max(minX, other.minX), minY: max(minY, other.minY), maxX: min(maxX, other.maxX), maxY: min(maxY, other.maxY))
        return result.width > 0 && result.height > 0 ? result : nil
    }
}

/// A parsed PDF object, reduced to what the page-box search needs (string contents are dropped).
private enum PDFValue {
    case integer(Int)
    case real(Double)
    case name(String)
    /// The string's first bytes (at most ``PDFLexer/stringPrefixKept``), decoded.
    case string([UInt8])
    case keyword(String)
    case array([PDFValue])
    case dictionary([String: PDFValue])
    case reference(Int)

    var number: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .real(let value): value
        default: nil
        }
    }

    /// The object number of an indirect reference.
    var referenceNumber: Int? {
        if case .reference(let number) = self { return number }
        return nil
    }

    var integer: Int? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// A `/Rotate` value as whole degrees (reals with no fraction are accepted), else `nil`.
    var integerDegrees: Int? {
        switch self {
        case .integer(let value):
            return value
        case .real(let value):
            guard value.isFinite, value == value.rounded(), abs(value) < 1e9 else { return nil }
            return Int(value)
        default:
            return nil
        }
    }

    var dictionary: [String: PDFValue]? {
        if case .dictionary(let value) = self { return value }
        return nil
    }

    /// The dictionary's `/Type` name, if this is a dictionary that has one.
    var typeName: String? {
        if case .name(let name)? = dictionary?["Type"] { return name }
        return nil
    }
}

/// A single-pass scan of a PDF's top-level objects.
private struct PDFDocumentScan {
    struct Record {
        var value: PDFValue
        /// The order of this definition in the file; later definitions (incremental updates) win.
        var order: Int
    }

    /// Whether a value that may be inherited was found on the page or one of its ancestors.
    enum Attribute {
        case absent
        /// Not readable; `hiddenObject` when the value is a reference to an object the
        /// cross-reference sections mark free or do not list.
        case unreadable(hiddenObject: Int?)
        case value(PDFValue)
    }

    enum PageLookup {
        case found(page: [String: PDFValue], pageCount: Int)
        case unreadable(String)
    }

    /// What follows the last top-level `startxref`: its byte offset, then only white space and comments.
    enum EndOfFile {
        case noStartXRef
        case expectingOffset
        /// The offset was read and the last token ended at `end`.
        case offset(end: Int)
        /// A token other than the offset begins at `at`.
        case dataAfterOffset(at: Int)
    }

    private(set) var objects: [Int: Record] = [:]
    /// Definitions a later revision replaced; checked for actions as the current ones are.
    private(set) var replacedValues: [(number: Int, value: PDFValue)] = []
    /// Why the top level is not only objects, cross-reference sections, trailers, `startxref` and
    /// comments, or why one revision defines an object number twice; the scan stops there.
    private(set) var malformation: String?
    /// A refusal for data after a `startxref N` and `%%EOF` that is not a complete incremental update.
    private(set) var incompleteUpdate: String?
    /// A refusal for cross-reference data a reader reads otherwise than this scan: `startxref`,
    /// a `/Prev` or an `/XRefStm` giving a byte where the scan found no cross-reference section,
    /// a `startxref` in a comment after the last one, or an object defined in more than one
    /// revision whose latest definition (the one this scan reads) is not the one a reader uses.
    private(set) var crossReferenceProblem: String?
    /// Object numbers defined in the file that the cross-reference sections a reader follows
    /// mark free or do not list: a reader resolves a reference to one of them as null.
    private(set) var hiddenFromReaders: Set<Int> = []
    private(set) var endOfFile = EndOfFile.noStartXRef
    private(set) var rootReference: Int?
    /// Where the file declares its encryption (`its trailer`, `its cross-reference stream`), if it does.
    private(set) var encryptedIn: String?
    /// The file has object streams or cross-reference streams, so some objects may be invisible to the scan.
    private(set) var hasCompressedObjects = false
    /// Whether the file has a cross-reference stream (`/Type /XRef`) or a trailer naming one
    /// (`/XRefStm`): this scan does not decode them, and is refused.
    private(set) var hasCrossReferenceStream = false
    /// Whether the file has object streams (objects compressed inside others), which this scan does not open.
    private(set) var hasObjectStreams = false
    /// The lowest number of an object whose value could not be parsed (nested deeper than the
    /// parser follows, or malformed): what it holds cannot be checked.
    private(set) var unreadableObject: Int?

    /// Nesting deeper than this (arrays in dictionaries in …) abandons the object instead of recursing further.
    private static let maximumDepth = 64

    init(bytes: [UInt8]) {
        var lexer = PDFLexer(bytes: bytes)
        var order = 0
        // The current revision (the original file, then each incremental update after a
        // `startxref N` and `%%EOF`): where it starts, its objects' offsets, its cross-reference data.
        var revisionStart = 0
        var isUpdate = false
        var definedHere: [Int: Int] = [:]
        // Where every definition of each object number starts, in any revision, and the in-use
        // entries of every cross-reference table, checked against them after the scan.
        var starts: [Int: Set<Int>] = [:]
        var entries: [(number: Int, offset: Int)] = []
        // The stream data skipped, in file order (object headers found there are not headers).
        var streamData: [Range<Int>] = []
        // Where the scan stopped on something it refuses (headers after it are not looked at).
        var scanEnd = bytes.count
        var hasTable = false
        var hasTrailer = false
        var hasXRefStream = false
        // Whether any revision has a cross-reference table, or a cross-reference stream.
        var anyTable = false
        var anyXRefStream = false
        // Every cross-reference table by where its `xref` keyword starts: its entries in order
        // (a free one without offset) and its trailer's /Prev; the current revision's table;
        // the offset after the last `startxref`; where the latest definition of each number starts.
        var tables: [Int: CrossReferenceTable] = [:]
        var currentTable: Int?
        var lastStartXRef: (token: Int, offset: Int)?
        var latestStart: [Int: Int] = [:]
        // Every top-level cross-reference stream by where its `N G obj` header starts.
        var streams: [Int: CrossReferenceStream] = [:]
        // Set by `startxref N`: how many `%%EOF` markers the lexer had passed then.
        var closedAtMarker: Int?
        scan: while let token = lexer.next() {
            let start = lexer.tokenStart
            if let marker = closedAtMarker {
                guard lexer.endOfFileMarkers > marker else {
                    endOfFile = .dataAfterOffset(at: start)
                    scanEnd = min(scanEnd, start); break scan
                }
                revisionStart = start
                isUpdate = true
                definedHere = [:]
                hasTable = false
                hasTrailer = false
                hasXRefStream = false
                currentTable = nil
                closedAtMarker = nil
            }
            switch token {
            case .integer(let number):
                guard number >= 0, case .integer(let generation)? = lexer.next(), generation >= 0, lexer.next() == .keyword("obj") else {
                    malformation = Self.outsideObjects(token, at: start, in: bytes)
                    scanEnd = min(scanEnd, start); break scan
                }
                // Objects are read by number alone: a generation other than 0 (a number reused
                // after a deletion) could make a reader pick another definition than this scan.
                guard generation == 0 else {
                    malformation = "PDF defines object \(number) with generation \(generation) at byte \(start); this check reads generation 0 only (a reader matches generations, and could use another definition); export the file again"
                    scanEnd = min(scanEnd, start); break scan
                }
                if let earlier = definedHere[number] {
                    malformation = "PDF defines object \(number) twice in one revision (at bytes \(earlier) and \(start)); a reader following the cross-reference table could show the one not checked here"
                    scanEnd = min(scanEnd, start); break scan
                }
                definedHere[number] = start
                starts[number, default: []].insert(start)
                latestStart[number] = start
                guard let first = lexer.next(), let value = Self.parseValue(first, &lexer, depth: 0) else {
                    if let refusal = lexer.refusal {
                        malformation = "PDF's object \(number) at byte \(start) \(refusal)"
                        scanEnd = min(scanEnd, start); break scan
                    }
                    unreadableObject = min(unreadableObject ?? number, number)
                    Self.skipToEndOfObject(&lexer)
                    continue
                }
                if let refusal = lexer.refusal {
                    malformation = "PDF's object \(number) at byte \(start) \(refusal)"
                    scanEnd = min(scanEnd, start); break scan
                }
                var closing = lexer.next()
                if closing == .keyword("stream"), let dictionary = value.dictionary {
                    let dataStart = lexer.position
                    lexer.skipStreamData(declaredLength: dictionary["Length"]?.integer)
                    streamData.append(dataStart..<lexer.position)
                    closing = lexer.next()
                }
                guard closing == .keyword("endobj") else {
                    let found = Self.describe(closing, at: lexer.tokenStart, in: bytes)
                    malformation = "PDF's object \(number) at byte \(start) is not closed by endobj (found \(found) at byte \(lexer.tokenStart))"
                    scanEnd = min(scanEnd, start); break scan
                }
                if let replaced = objects[number] { replacedValues.append((number, replaced.value)) }
                order += 1
                objects[number] = Record(value: value, order: order)
                if let dictionary = value.dictionary {
                    let type = value.typeName
                    if type == "ObjStm" || type == "XRef" { hasCompressedObjects = true }
                    if type == "ObjStm" { hasObjectStreams = true }
                    if type == "XRef" {
                        hasXRefStream = true
                        anyXRefStream = true
                        hasCrossReferenceStream = true
                        if case .reference(let root)? = dictionary["Root"] { rootReference = root }
                        streams[start] = CrossReferenceStream(previous: dictionary["Prev"]?.integer, root: dictionary["Root"]?.referenceNumber)
                        if dictionary["Encrypt"] != nil { encryptedIn = "its cross-reference stream" }
                    }
                }
            case .keyword("xref"):
                var section: [(number: Int, offset: Int?)] = []
                if let problem = Self.crossReferenceTableProblem(&lexer, at: start, entries: &section) {
                    malformation = problem
                    scanEnd = min(scanEnd, start); break scan
                }
                entries += section.compactMap { entry in entry.offset.map { (entry.number, $0) } }
                tables[start] = CrossReferenceTable(entries: section, hasTrailer: false)
                currentTable = start
                hasTable = true
                anyTable = true
            case .keyword("trailer"):
                guard let first = lexer.next(), case .dictionary(let trailer)? = Self.parseValue(first, &lexer, depth: 0) else {
                    malformation = "PDF's trailer at byte \(start) is not followed by a dictionary"
                    scanEnd = min(scanEnd, start); break scan
                }
                if let refusal = lexer.refusal {
                    malformation = "PDF's trailer at byte \(start) \(refusal)"
                    scanEnd = min(scanEnd, start); break scan
                }
                // A reader reads the trailer after a table; a second one could say otherwise.
                if let table = currentTable, tables[table]?.hasTrailer == true {
                    malformation = "PDF has a second trailer at byte \(start) for the cross-reference section at byte \(table); a reader reads only the first"
                    scanEnd = min(scanEnd, start); break scan
                }
                hasTrailer = true
                if let table = currentTable {
                    tables[table]?.hasTrailer = true
                    tables[table]?.previous = trailer["Prev"]?.integer
                    tables[table]?.streamOffset = trailer["XRefStm"]?.integer
                    if trailer["XRefStm"] != nil { hasCrossReferenceStream = true }
                    tables[table]?.root = trailer["Root"]?.referenceNumber
                }
                if case .reference(let root)? = trailer["Root"] { rootReference = root }
                if trailer["Encrypt"] != nil { encryptedIn = "its trailer" }
            case .keyword("startxref"):
                guard let offset = lexer.next() else {
                    endOfFile = .expectingOffset
                    scanEnd = min(scanEnd, start); break scan
                }
                guard case .integer(let value) = offset, value >= 0 else {
                    endOfFile = .dataAfterOffset(at: lexer.tokenStart)
                    scanEnd = min(scanEnd, start); break scan
                }
                endOfFile = .offset(end: lexer.position)
                lastStartXRef = (start, value)
                if isUpdate, !(hasTable && hasTrailer), !hasXRefStream, incompleteUpdate == nil {
                    incompleteUpdate = "PDF has data at byte \(revisionStart) after an earlier startxref and %%EOF that is not a complete incremental update: it has no cross-reference section (xref and trailer, or a cross-reference stream) before its startxref"
                }
                closedAtMarker = lexer.endOfFileMarkers
            default:
                if isUpdate, start == revisionStart {
                    // After a final %%EOF: data, not the start of an incremental update.
                    incompleteUpdate = "PDF has \(Self.describe(token, at: start, in: bytes)) at byte \(start) after an earlier startxref and %%EOF, where only white space, comments or a complete incremental update may follow"
                } else {
                    malformation = Self.outsideObjects(token, at: start, in: bytes)
                }
                scanEnd = min(scanEnd, start); break scan
            }
        }
        if isUpdate, closedAtMarker == nil, incompleteUpdate == nil {
            incompleteUpdate = "PDF has data at byte \(revisionStart) after its last startxref and %%EOF that is not a complete incremental update (objects, a cross-reference section and trailer, startxref and %%EOF)"
        }
        // A reader goes to an object by the table's offset, and a reader rebuilding a damaged
        // table (or one reading a cross-reference stream this check does not decode) finds
        // objects by their `N G obj` headers. An unterminated string or a misleading stream
        // /Length inside one object can make this scan read the objects after it as part of one
        // value: such an object is where the table says, and its header is in the file, but it
        // is not among the objects found. Where a reader goes by a cross-reference stream (not
        // decoded here) or by headers alone (no table), a header inside stream data is one too:
        // a misleading /Length can make this scan skip it as data.
        if malformation == nil {
            let byHeaders = anyXRefStream || !anyTable
            malformation = Self.objectTheScanMissed(entries: entries, starts: starts, streamData: byHeaders ? [] : streamData, in: bytes, upTo: scanEnd)
        }
        // An object defined in more than one revision: a reader takes the definition the newest
        // cross-reference section listing it gives (following startxref, then each /Prev), which
        // must be the latest one, the one this scan reads.
        if malformation == nil, let lastStartXRef {
            let chain = Self.followCrossReferenceSections(
                from: lastStartXRef, tables: tables, streams: streams, starts: starts, latestStart: latestStart, hasXRefStream: anyXRefStream, in: bytes
            )
            crossReferenceProblem = chain.problem
            if let root = chain.root { rootReference = root }
            hiddenFromReaders = chain.hidden
        }
    }

    /// One `xref` table: its entries in order (`offset` nil for a free one) and what its trailer
    /// says (`/Prev`, `/XRefStm`, `/Root`).
    private struct CrossReferenceTable {
        var entries: [(number: Int, offset: Int?)]
        var hasTrailer: Bool
        var previous: Int?
        var streamOffset: Int?
        var root: Int?
    }

    /// One top-level cross-reference stream (not decoded): its `/Prev` and `/Root`.
    private struct CrossReferenceStream {
        var previous: Int?
        var root: Int?
    }

    /// What following the cross-reference sections as a reader does found.
    private struct CrossReferenceChain {
        /// A refusal, or nil.
        var problem: String?
        /// The `/Root` of the newest section that gives one.
        var root: Int?
        /// Object numbers defined in the file that the sections mark free or do not list.
        var hidden: Set<Int> = []
    }

    /// Follows the cross-reference sections as a reader does, from the last `startxref` (the
    /// keyword at `from.token`, giving `from.offset`) through each trailer's `/Prev` (and a
    /// hybrid file's `/XRefStm`).
    ///
    /// A reader looks for the last `startxref` in the file's bytes, so one in a comment after
    /// the last one read here is refused. Every offset followed must lead (past white space and
    /// comments) to a table or a top-level cross-reference stream this scan read: anywhere
    /// else (inside stream data, outside the file) a reader would read cross-reference data
    /// this check has not seen. When the sections are all tables, the first listing a number
    /// decides where that object is: an object defined in more than one revision must be found
    /// at its latest definition, the one read here (an update that redefines the page without
    /// listing it leaves a reader on the older page); numbers listed free or not at all are
    /// ``CrossReferenceChain/hidden``. Cross-reference streams are not decoded: with one, a
    /// redefinition is refused.
    private static func followCrossReferenceSections(
        from last: (token: Int, offset: Int), tables: [Int: CrossReferenceTable], streams: [Int: CrossReferenceStream],
        starts: [Int: Set<Int>], latestStart: [Int: Int], hasXRefStream: Bool, in bytes: [UInt8]
    ) -> CrossReferenceChain {
        var chain = CrossReferenceChain()
        if let text = lastOccurrence(of: startXRefKeyword, in: bytes), text > last.token {
            chain.problem = "PDF has the text startxref at byte \(text), in a comment after its last startxref at byte \(last.token); a reader looking for the last startxref from the file's end reads that one; export the file again"
            return chain
        }
        /// Where the data at `offset` starts after white space and comments, if inside the file.
        func landing(_ offset: Int) -> Int? {
            guard offset >= 0, offset < bytes.count else { return nil }
            var position = offset
            while position < bytes.count {
                if PDFLexer.isWhitespace(bytes[position]) {
                    position += 1
                } else if bytes[position] == UInt8(ascii: "%") {
                    while position < bytes.count, bytes[position] != 0x0A, bytes[position] != 0x0D { position += 1 }
                } else {
                    break
                }
            }
            return position
        }
        func nowhere(_ what: String, _ offset: Int) -> String {
            "PDF's \(what) gives byte \(offset), where this check found no cross-reference section (an xref table or a cross-reference stream): a reader would read cross-reference data there that this check has not seen; export the file again"
        }
        var sections: [CrossReferenceTable] = []
        var onlyTables = true
        var visited: Set<Int> = []
        var next: (what: String, offset: Int)? = ("startxref", last.offset)
        while let pointer = next {
            guard let at = landing(pointer.offset) else {
                chain.problem = nowhere(pointer.what, pointer.offset)
                return chain
            }
            // A loop of /Prev ends the chain, as it ends a reader's walk.
            guard visited.insert(at).inserted else { break }
            if let table = tables[at] {
                sections.append(table)
                if chain.root == nil { chain.root = table.root }
                if let offset = table.streamOffset {
                    guard let stream = landing(offset), streams[stream] != nil else {
                        chain.problem = nowhere("/XRefStm", offset)
                        return chain
                    }
                    onlyTables = false
                }
                next = table.previous.map { ("/Prev", $0) }
            } else if let stream = streams[at] {
                onlyTables = false
                if chain.root == nil { chain.root = stream.root }
                next = stream.previous.map { ("/Prev", $0) }
            } else {
                chain.problem = nowhere(pointer.what, pointer.offset)
                return chain
            }
        }
        let redefined = starts.filter { $0.value.count > 1 }.keys.sorted()
        func places(_ number: Int) -> String {
            (starts[number] ?? []).sorted().map(String.init).joined(separator: ", ")
        }
        guard onlyTables, !hasXRefStream else {
            if let number = redefined.first {
                chain.problem = "PDF defines object \(number) in more than one revision (at bytes \(places(number))) and indexes its objects with a cross-reference stream, which this check does not decode, so it cannot tell which definition a reader uses; export the file again as a single revision (not an incremental update)"
            }
            return chain
        }
        var resolution: [Int: Int?] = [:]
        for section in sections {
            for entry in section.entries where resolution[entry.number] == nil { resolution[entry.number] = .some(entry.offset) }
        }
        for number in starts.keys {
            if case .some(.some) = resolution[number] { continue }
            chain.hidden.insert(number)
        }
        for number in redefined {
            guard let latest = latestStart[number] else { continue }
            switch resolution[number] {
            case .some(.some(let offset)):
                var position = offset
                while position < bytes.count, PDFLexer.isWhitespace(bytes[position]) { position += 1 }
                guard position != latest else { continue }
                chain.problem = "PDF defines object \(number) more than once (at bytes \(places(number))), and the newest cross-reference section listing it gives byte \(offset), so a reader shows that definition, not the latest one at byte \(latest) that this check reads; export the file again"
            case .some(.none), .none:
                // Listed free, or not at all: hidden from a reader and from this check alike.
                continue
            }
            return chain
        }
        return chain
    }

    private static let startXRefKeyword: [UInt8] = Array("startxref".utf8)

    /// Where the last occurrence of `pattern` in `bytes` starts.
    private static func lastOccurrence(of pattern: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        var start = bytes.count - pattern.count
        while start >= 0 {
            if bytes[start] == pattern[0], bytes[start..<(start + pattern.count)].elementsEqual(pattern) { return start }
            start -= 1
        }
        return nil
    }

    /// The refusal for a cross-reference table entry, or an `N G obj` header outside
    /// `streamData` (the stream data the scan skipped, when a reader goes by the table; none
    /// when it may go by headers), at which the scan found no object; nil when there is none.
    /// Linear in the file's size.
    private static func objectTheScanMissed(entries: [(number: Int, offset: Int)], starts: [Int: Set<Int>], streamData: [Range<Int>], in bytes: [UInt8], upTo scanEnd: Int) -> String? {
        let scanned = bytes[..<scanEnd]
        // Where each entry's offset leads after white space, walking each run of white space
        // once however many entries point into it.
        var firstNonWhitespace: [Int: Int] = [:]
        var runEnd = -1
        for offset in Set(entries.map(\.offset)).sorted() {
            if offset < runEnd {
                firstNonWhitespace[offset] = runEnd
                continue
            }
            var position = offset
            while position < bytes.count, PDFLexer.isWhitespace(bytes[position]) { position += 1 }
            firstNonWhitespace[offset] = position
            runEnd = position
        }
        for entry in entries where entry.number != 0 {
            guard let position = firstNonWhitespace[entry.offset], starts[entry.number]?.contains(position) != true else { continue }
            return "PDF's cross-reference table gives object \(entry.number) at byte \(entry.offset), where this check found no object \(entry.number) (text inside another object, such as an unterminated string, hides it from this check but not from a reader); export the file again"
        }
        let found = Set(starts.values.joined())
        var range = 0
        var index = CardArtByteSearch.firstIndex(of: objKeyword, in: scanned)
        while let keyword = index {
            defer { index = CardArtByteSearch.firstIndex(of: objKeyword, in: scanned[(keyword + objKeyword.count)...]) }
            while range < streamData.count, streamData[range].upperBound <= keyword { range += 1 }
            if range < streamData.count, streamData[range].contains(keyword) { continue }
            guard let header = headerStart(before: keyword, in: bytes), !found.contains(header) else { continue }
            return "PDF has an object header (N G obj) at byte \(header) that this check did not read as an object: it lies inside another object (an unterminated string, or stream data a misleading /Length covers, say), where a reader rebuilding the file's cross-reference data would still find it; export the file again"
        }
        return nil
    }

    private static let objKeyword: [UInt8] = Array("obj".utf8)

    /// Where the header `N G obj` whose keyword starts at `keyword` begins (the first digit of
    /// `N`), if the bytes before it are white space, digits, white space, digits, white space
    /// (or the file's start), and the keyword ends at a delimiter, white space or the end.
    private static func headerStart(before keyword: Int, in bytes: [UInt8]) -> Int? {
        let after = keyword + objKeyword.count
        if after < bytes.count, !PDFLexer.isWhitespace(bytes[after]), !PDFLexer.isDelimiter(bytes[after]) { return nil }
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        var position = keyword
        for _ in 0..<2 {
            let whitespaceEnd = position
            while position > 0, PDFLexer.isWhitespace(bytes[position - 1]), whitespaceEnd - position < 64 { position -= 1 }
            guard position < whitespaceEnd else { return nil }
            let digitsEnd = position
            while position > 0, isDigit(bytes[position - 1]), digitsEnd - position < 20 { position -= 1 }
            guard position < digitsEnd else { return nil }
        }
        guard position == 0 || PDFLexer.isWhitespace(bytes[position - 1]) else { return nil }
        return position
    }

    /// The refusal for a token where only an object, `xref`, `trailer` or `startxref` may begin.
    private static func outsideObjects(_ token: PDFLexer.Token, at position: Int, in bytes: [UInt8]) -> String {
        "PDF has \(describe(token, at: position, in: bytes)) at byte \(position) outside any object; only objects (N G obj … endobj), cross-reference sections, trailers, startxref and comments may stand there"
    }

    /// A token for a message: `the keyword stream`, `a string`, `the number 12`.
    private static func describe(_ token: PDFLexer.Token?, at position: Int, in bytes: [UInt8]) -> String {
        switch token {
        case nil: "the end of the file"
        case .integer(let value)?: "the number \(value)"
        case .real(let value)?: "the number \(CardArtFormatting.decimal(value, fractionDigits: 6))"
        case .name(let name)?: "the name /\(CardArtFormatting.printable(name, limit: 32))"
        case .keyword(let word)?: keywordDescription(word, at: position, in: bytes)
        case .string?: "a string"
        case .dictionaryStart?: "a dictionary"
        case .arrayStart?: "an array"
        case .dictionaryEnd?: "\">>\""
        case .arrayEnd?: "\"]\""
        case .junk?: "the byte \"\(CardArtFormatting.printable(String(decoding: bytes[position...].prefix(1), as: UTF8.self), limit: 1))\""
        }
    }

    /// `the keyword endobj`, or for bytes that print as nothing (a stray control byte such as
    /// 0x1A) `the byte 0x1A`.
    private static func keywordDescription(_ word: String, at position: Int, in bytes: [UInt8]) -> String {
        let shown = CardArtFormatting.printable(word, limit: 32)
        guard shown.trimmingCharacters(in: .whitespaces).isEmpty, position < bytes.count else { return "the keyword \(shown)" }
        let hex = String(bytes[position], radix: 16, uppercase: true)
        return "the byte 0x\(hex.count == 1 ? "0" + hex : hex)"
    }

    /// The subsections after `xref` (`first count`, then `count` entries of `offset generation n|f`),
    /// leaving the lexer before the token that follows them; a refusal if one is malformed. Each
    /// entry is added to `entries` in order, with its offset if it is in use (`n`), without if free.
    /// A number listed twice in one section is refused: readers differ on which entry counts.
    private static func crossReferenceTableProblem(_ lexer: inout PDFLexer, at start: Int, entries: inout [(number: Int, offset: Int?)]) -> String? {
        var listed: Set<Int> = []
        while true {
            let before = lexer.position
            guard case .integer(let first)? = lexer.next(), first >= 0 else {
                lexer.position = before
                return nil
            }
            guard case .integer(let count)? = lexer.next(), count >= 0 else {
                return "PDF's cross-reference section at byte \(start) has a subsection header without an entry count at byte \(lexer.tokenStart)"
            }
            for index in 0..<count {
                guard case .integer(let offset)? = lexer.next(), offset >= 0, case .integer(let generation)? = lexer.next(), generation >= 0,
                    case .keyword(let kind)? = lexer.next(), kind == "n" || kind == "f"
                else {
                    return "PDF's cross-reference section at byte \(start) has a malformed entry at byte \(lexer.tokenStart)"
                }
                let (number, overflow) = first.addingReportingOverflow(index)
                guard !overflow else { continue }
                guard listed.insert(number).inserted else {
                    return "PDF's cross-reference section at byte \(start) lists object \(number) twice; readers differ on which entry they use"
                }
                entries.append((number, kind == "n" ? offset : nil))
            }
        }
    }

    /// After an object whose value could not be parsed: moves past its `endobj` (skipping stream data), or to the end.
    private static func skipToEndOfObject(_ lexer: inout PDFLexer) {
        while let token = lexer.next(), token != .keyword("endobj") {
            if token == .keyword("stream") { lexer.skipStreamData(declaredLength: nil) }
        }
    }

    // MARK: Parsing

    private static func parseValue(_ token: PDFLexer.Token, _ lexer: inout PDFLexer, depth: Int) -> PDFValue? {
        switch token {
        case .integer(let value): return .integer(value)
        case .real(let value): return .real(value)
        case .name(let value): return .name(value)
        case .string(let prefix): return .string(prefix)
        case .keyword(let value): return .keyword(value)
        case .arrayStart:
            guard depth < maximumDepth, let items = parseItems(until: .arrayEnd, &lexer, depth: depth + 1) else { return nil }
            return .array(items)
        case .dictionaryStart:
            guard depth < maximumDepth, let items = parseItems(until: .dictionaryEnd, &lexer, depth: depth + 1) else { return nil }
            var dictionary: [String: PDFValue] = [:]
            var index = 0
            while index + 1 < items.count {
                guard case .name(let key) = items[index] else { return nil }
                // Readers differ on which of two values for one key counts (the first, the last).
                if dictionary.updateValue(items[index + 1], forKey: key) != nil, lexer.refusal == nil {
                    lexer.refusal = "has a dictionary with the key /\(CardArtFormatting.printable(key, limit: 40)) twice; readers differ on which value they use"
                }
                index += 2
            }
            return .dictionary(dictionary)
        case .arrayEnd, .dictionaryEnd, .junk:
            return nil
        }
    }

    /// The values up to `end`, with `N G R` triples folded into references; `nil` if the object is malformed.
    private static func parseItems(until end: PDFLexer.Token, _ lexer: inout PDFLexer, depth: Int) -> [PDFValue]? {
        var items: [PDFValue] = []
        while true {
            let start = lexer.position
            guard let token = lexer.next() else { return nil }
            if token == end { break }
            if case .keyword(let word) = token, PDFLexer.structuralKeywords.contains(word) {
                // A missing close bracket: leave the keyword for the top-level scan to resynchronize on.
                lexer.position = start
                return nil
            }
            guard let value = parseValue(token, &lexer, depth: depth) else { return nil }
            items.append(value)
        }
        var folded: [PDFValue] = []
        folded.reserveCapacity(items.count)
        var index = 0
        while index < items.count {
            if index + 2 < items.count, case .integer(let number) = items[index], number >= 0,
                case .integer(let generation) = items[index + 1], case .keyword("R") = items[index + 2]
            {
                if generation != 0, lexer.refusal == nil {
                    lexer.refusal = "refers to object \(number) with generation \(generation) (\(number) \(generation) R); this check reads generation 0 only (a reader matches generations)"
                }
                folded.append(.reference(number))
                index += 3
            } else {
                folded.append(items[index])
                index += 1
            }
        }
        return folded
    }

    // MARK: Lookups

    /// Follows references (at most a few hops) to a direct value; `nil` if an object is not in the scan.
    func resolve(_ value: PDFValue?) -> PDFValue? {
        var current = value
        var hops = 0
        while case .reference(let number)? = current {
            hops += 1
            guard hops <= 16 else { return nil }
            guard !hiddenFromReaders.contains(number) else { return nil }
            current = objects[number]?.value
        }
        return current
    }

    /// A page attribute, looked up on the page and then up its `/Parent` chain (for inheritable keys).
    ///
    /// Each object is visited at most once, so a `/Parent` cycle ends the walk as unreadable.
    func inheritedAttribute(_ key: String, of page: [String: PDFValue]) -> Attribute {
        var node = page
        var visited: Set<Int> = []
        while true {
            // An entry whose value is null is no entry (ISO 32000-1 §7.3.7): looked up further up.
            if let raw = node[key] {
                let value = resolve(raw)
                if case .keyword("null")? = value {} else {
                    guard let value else {
                        if case .reference(let number) = raw, hiddenFromReaders.contains(number) { return .unreadable(hiddenObject: number) }
                        return .unreadable(hiddenObject: nil)
                    }
                    return .value(value)
                }
            }
            guard let parent = node["Parent"] else { return .absent }
            if case .reference(let number) = parent, !visited.insert(number).inserted { return .unreadable(hiddenObject: nil) }
            guard let parentNode = resolve(parent)?.dictionary else { return .unreadable(hiddenObject: nil) }
            node = parentNode
        }
    }

    /// A rectangle from `[x0 y0 x1 y1]` in any corner order; `nil` unless four finite numbers with a non-empty area.
    func rectangle(_ value: PDFValue) -> PDFRectangle? {
        guard case .array(let items) = value, items.count == 4 else { return nil }
        let numbers = items.compactMap { resolve($0)?.number }
        guard numbers.count == 4, numbers.allSatisfy(\.isFinite) else { return nil }
        let box = PDFRectangle(
            minX: min(numbers[0], numbers[2]), minY: min(numbers[1], numbers[3]),
            maxX: max(numbers[0], numbers[2]), maxY: max(numbers[1], numbers[3])
        )
        guard box.width.isFinite, box.height.isFinite, box.width > 0, box.height > 0 else { return nil }
        return box
    }

    /// The first page and the page count, from the catalog's page tree if there is one.
    func firstPage() -> PageLookup {
        if let rootReference, hiddenFromReaders.contains(rootReference) {
            return .unreadable("its catalog (object \(rootReference)) is marked free, or not listed, by the cross-reference sections a reader follows, so a reader has no catalog")
        }
        if let pages = catalog()?["Pages"] {
            return walkPageTree(from: pages)
        }
        return scanForPages()
    }

    /// The first active content found, described for a message, or `nil`. Checked, in this order:
    /// in the catalog, an `/OpenAction` that is an action (a dictionary; a destination array is
    /// fine), `/AA`, `/AcroForm`, and `/JavaScript` or `/EmbeddedFiles` in its `/Names`; `/AA` on
    /// the page; then, in every definition of every object read (replaced ones too), an action that
    /// runs code or reaches outside the file (see ``refusedActions``) or any `/JS` entry, reporting
    /// the lowest object number.
    func activeContent(page: [String: PDFValue]) -> String? {
        // What this scan cannot read it cannot clear: objects in compressed object streams,
        // and objects it could not parse, could hold any action.
        if hasObjectStreams { return "it stores objects in compressed object streams, which this check cannot read for actions" }
        if let unreadableObject { return "object \(unreadableObject) could not be read (nested too deeply or malformed), so it cannot be checked for actions" }
        if let catalog = catalog() {
            if let raw = catalog["OpenAction"] {
                switch resolve(raw) {
                case nil: return "its catalog's /OpenAction is an object this check cannot find"
                case .dictionary(let action)?:
                    // A go-to action only sets the page and view the file opens at.
                    guard case .name("GoTo")? = action["S"], action["Next"] == nil else {
                        return "its catalog has an /OpenAction action, run when the file opens"
                    }
                default: break
                }
            }
            if catalog["AA"] != nil { return "its catalog has /AA, actions run on document events" }
            if let raw = catalog["AcroForm"] {
                // An empty form some editors leave behind is no form.
                guard let form = resolve(raw)?.dictionary, form["XFA"] == nil, case .array(let fields)? = resolve(form["Fields"]), fields.isEmpty else {
                    return "its catalog has /AcroForm, an interactive form"
                }
            }
            if let raw = catalog["Names"] {
                guard let names = resolve(raw)?.dictionary else { return "its catalog's /Names is an object this check cannot find" }
                if names["JavaScript"] != nil { return "its catalog's /Names has /JavaScript, document scripts" }
                if names["EmbeddedFiles"] != nil { return "its catalog's /Names has /EmbeddedFiles, attached files" }
            }
        }
        if page["AA"] != nil { return "its page has /AA, actions run on page events" }
        var first: (number: Int, action: String)?
        for (number, record) in objects where number < first?.number ?? Int.max {
            if let action = Self.action(in: record.value) { first = (number, action) }
        }
        for (number, value) in replacedValues where number < first?.number ?? Int.max {
            if let action = Self.action(in: value) { first = (number, action) }
        }
        return first.map { "object \($0.number) holds \($0.action)" }
    }

    /// Action types (`/S`) that run code, submit or import data, open other files or programs,
    /// or play media.
    private static let refusedActions: Set<String> = [
        "Launch", "JavaScript", "SubmitForm", "ImportData", "GoToR", "GoToE", "RichMediaExecute", "Rendition", "Sound", "Movie",
    ]

    /// Annotation types (`/Subtype`) that attach files, are form fields, or play media.
    private static let refusedAnnotations: Set<String> = ["FileAttachment", "Widget", "RichMedia", "Screen", "Sound", "Movie", "3D"]

    /// URI schemes that run code or reach local data, as a `/URI` action's address begins.
    private static let refusedSchemes = ["javascript:", "vbscript:", "data:", "file:"]

    /// `a /Launch action`, `a /JS entry (JavaScript)` …, if `value` is or contains a dictionary
    /// whose `/S` is in ``refusedActions``, that has a `/JS` key, a `/URI` action to an address
    /// of a ``refusedSchemes`` scheme (or one in another object), a `/Subtype` in
    /// ``refusedAnnotations``, `/AA` (actions run on events) or `/EF` (an embedded file). An
    /// action nested in a dictionary is named before the dictionary's own kind.
    private static func action(in value: PDFValue) -> String? {
        switch value {
        case .dictionary(let dictionary):
            if case .name(let type)? = dictionary["S"], refusedActions.contains(type) {
                if type == "Rendition", dictionary["JS"] != nil { return "a /Rendition action with /JS (JavaScript)" }
                return "a /\(type) action"
            }
            if dictionary["JS"] != nil { return "a /JS entry (JavaScript)" }
            if case .name("URI")? = dictionary["S"] {
                switch dictionary["URI"] {
                case .string(let address)?:
                    // Browsers skip leading control characters and spaces, and tabs and line
                    // breaks anywhere, and take the scheme in any case.
                    let skipped = address.drop { $0 <= 0x20 }.filter { $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
                    let lowered = String(decoding: skipped.prefix(16).map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
                    if let scheme = refusedSchemes.first(where: { lowered.hasPrefix($0) }) { return "a /URI action to a \(scheme) address" }
                case nil:
                    break
                default:
                    return "a /URI action whose address is not a string in the action itself"
                }
            }
            for item in dictionary.values {
                if let found = action(in: item) { return found }
            }
            if case .name(let subtype)? = dictionary["Subtype"], refusedAnnotations.contains(subtype) { return "a /\(subtype) annotation" }
            if dictionary["AA"] != nil { return "an /AA entry (actions run on events)" }
            if dictionary["EF"] != nil { return "an /EF entry (an embedded file)" }
            return nil
        case .array(let items):
            for item in items {
                if let found = action(in: item) { return found }
            }
            return nil
        default:
            return nil
        }
    }

    private func catalog() -> [String: PDFValue]? {
        if let rootReference {
            return hiddenFromReaders.contains(rootReference) ? nil : objects[rootReference]?.value.dictionary
        }
        return objects.filter { !hiddenFromReaders.contains($0.key) && $0.value.value.typeName == "Catalog" }.values.max { $0.order < $1.order }?.value.dictionary
    }

    /// Depth-first, in page order, visiting each object at most once.
    ///
    /// The tree must be one readers all read alike: the catalog's `/Pages` an indirect
    /// reference to a `/Pages` node; every node a `/Pages` node with `/Kids` or a `/Page`
    /// without; each node's `/Parent` the node whose `/Kids` list it (readers that inherit the
    /// page box by the walk and those that follow `/Parent` then agree), and none listed twice
    /// (which some readers count as two pages).
    ///
    /// Work is bounded by the file: every `/Kids` entry must be an indirect reference (ISO 32000-1,
    /// Table 29), so a node is expanded at most once; a `/Kids` array object is expanded at most
    /// once (two nodes sharing one are refused); and every entry pushed is charged to a budget of
    /// the object count plus 1,024, whose exhaustion makes the tree unreadable.
    private func walkPageTree(from root: PDFValue) -> PageLookup {
        guard case .reference = root else {
            return .unreadable("its catalog's /Pages is not an indirect reference (ISO 32000-1 requires one)")
        }
        var stack: [(item: PDFValue, parent: Int?)] = [(root, nil)]
        var visited: Set<Int> = []
        var expandedKids: Set<Int> = []
        var pages: [[String: PDFValue]] = []
        var unreadableNodes = 0
        var declaredCount: Int?
        var isRoot = true
        var budget = objects.count + 1024
        while let (item, parent) = stack.popLast() {
            guard case .reference(let number) = item else { continue }
            guard visited.insert(number).inserted else {
                return .unreadable("its page tree lists object \(number) more than once, so it is not a tree (readers count its pages differently)")
            }
            guard let node = resolve(item)?.dictionary else {
                if pages.isEmpty, hiddenFromReaders.contains(number) {
                    return .unreadable("its page tree refers to object \(number), which the cross-reference sections a reader follows mark free or do not list, so a reader has no such object")
                }
                if pages.isEmpty { return .unreadable("its page tree refers to objects that are not in the file's uncompressed text") }
                unreadableNodes += 1
                continue
            }
            if let parent {
                guard case .reference(parent)? = node["Parent"] else {
                    return .unreadable("its page tree's object \(number) does not name object \(parent), whose /Kids list it, as its /Parent (readers differ on where it inherits its page box and rotation from)")
                }
            } else if node["Parent"] != nil {
                return .unreadable("its page tree's root (object \(number)) has a /Parent")
            }
            let type = node.typeName
            if isRoot {
                guard type == "Pages" else {
                    return .unreadable("its catalog's /Pages is \(type.map { "a /\($0)" } ?? "an untyped") object, not a /Pages node")
                }
                if let count = node["Count"] {
                    // Readers take a count that is not a whole number, or is out of range, each
                    // their own way (a real rounded, a negative one wrapped to a page count).
                    guard case .integer(let declared)? = resolve(count), (0...1_000_000).contains(declared) else {
                        return .unreadable("its page tree's /Count is not a whole number from 0 to 1,000,000")
                    }
                    declaredCount = declared
                }
                isRoot = false
            }
            switch type {
            case "Pages":
                guard case .array(let list)? = resolve(node["Kids"]) else {
                    if pages.isEmpty { return .unreadable("a /Pages node of its page tree has no readable /Kids") }
                    unreadableNodes += 1
                    continue
                }
                if case .reference(let kidsNumber)? = node["Kids"], !expandedKids.insert(kidsNumber).inserted {
                    return .unreadable("two nodes of its page tree share one /Kids array (object \(kidsNumber)), so it is not a tree")
                }
                for kid in list {
                    guard case .reference = kid else {
                        return .unreadable("its page tree has a /Kids entry that is not an indirect reference (ISO 32000-1 requires references)")
                    }
                }
                guard list.count <= budget else { return .unreadable("its page tree is too large or malformed") }
                budget -= list.count
                stack.append(contentsOf: list.reversed().map { ($0, number) })
            case "Page":
                guard node["Kids"] == nil else {
                    return .unreadable("its page tree has a /Page (object \(number)) with /Kids; readers differ on whether it is a page")
                }
                pages.append(node)
            default:
                return .unreadable("its page tree holds \(type.map { "a /\($0)" } ?? "an untyped") object (object \(number)) where a /Page or /Pages node was expected")
            }
        }
        guard let first = pages.first else { return .unreadable("its page tree has no pages") }
        let pageCount = max(pages.count, declaredCount ?? 0)
        if unreadableNodes > 0, pageCount <= 1, declaredCount != 1 {
            return .unreadable("part of its page tree is not readable, so it cannot be confirmed to have a single page")
        }
        return .found(page: first, pageCount: pageCount)
    }

    /// Without a catalog: `/Type /Page` objects (latest definition of each) in file order.
    private func scanForPages() -> PageLookup {
        let pages = objects.filter { !hiddenFromReaders.contains($0.key) && $0.value.value.typeName == "Page" }.values.sorted { $0.order < $1.order }
        guard let first = pages.first?.value.dictionary else {
            return .unreadable("no /Type /Page object was found in its uncompressed text")
        }
        let declared = objects.filter { !hiddenFromReaders.contains($0.key) }.values.compactMap { record -> Int? in
            guard record.value.typeName == "Pages", let node = record.value.dictionary, node["Parent"] == nil else { return nil }
            return resolve(node["Count"])?.integer
        }.max() ?? 0
        return .found(page: first, pageCount: max(pages.count, declared))
    }
}

extension [String: PDFValue] {
    /// The dictionary's `/Type` name, if it has one.
    fileprivate var typeName: String? {
        if case .name(let name)? = self["Type"] { return name }
        return nil
    }
}

/// Splits PDF bytes into tokens (ISO 32000-1 §7.2), skipping comments and string contents.
private struct PDFLexer {
    /// Why the value just parsed is refused (a repeated dictionary key, a reference with a
    /// generation other than 0), set by the parser; the scan reads and clears it after each
    /// object and trailer.
    var refusal: String?

    enum Token: Equatable {
        case dictionaryStart
        case dictionaryEnd
        case arrayStart
        case arrayEnd
        case name(String)
        case integer(Int)
        case real(Double)
        /// The string's first bytes (at most ``PDFLexer/stringPrefixKept``), decoded.
        case string([UInt8])
        case keyword(String)
        case junk
    }

    /// Keywords that can only appear between objects; finding one inside an object means it is malformed.
    static let structuralKeywords: Set<String> = ["obj", "endobj", "stream", "endstream", "trailer", "xref", "startxref"]
    private static let endStream: [UInt8] = Array("endstream".utf8)
    private static let endOfFileMarker: [UInt8] = Array("%%EOF".utf8)
    /// Names and keywords are kept to this many bytes (PDF's own limit for names is 127).
    private static let maximumKept = 127

    let bytes: [UInt8]
    var position = 0
    /// Where the token `next()` returned last begins (after the white space and comments before it).
    private(set) var tokenStart = 0
    /// How many comments starting with `%%EOF` have been skipped.
    private(set) var endOfFileMarkers = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 || byte == 0x0C || byte == 0x00
    }

    static func isDelimiter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "["), UInt8(ascii: "]"),
            UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "/"), UInt8(ascii: "%"):
            true
        default:
            false
        }
    }

    /// The next token, or `nil` at the end of the data. Always advances while data remains.
    mutating func next() -> Token? {
        skipWhitespaceAndComments()
        tokenStart = position
        guard position < bytes.count else { return nil }
        switch bytes[position] {
        case UInt8(ascii: "<"):
            if position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "<") {
                position += 2
                return .dictionaryStart
            }
            position += 1
            var prefix: [UInt8] = []
            var high: UInt8?
            while position < bytes.count, bytes[position] != UInt8(ascii: ">") {
                if prefix.count < Self.stringPrefixKept, let digit = Self.hexValue(bytes[position]) {
                    if let first = high {
                        prefix.append(first << 4 | digit)
                        high = nil
                    } else {
                        high = digit
                    }
                }
                position += 1
            }
            if let first = high, prefix.count < Self.stringPrefixKept { prefix.append(first << 4) }
            position = min(position + 1, bytes.count)
            return .string(prefix)
        case UInt8(ascii: ">"):
            if position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: ">") {
                position += 2
                return .dictionaryEnd
            }
            position += 1
            return .junk
        case UInt8(ascii: "["):
            position += 1
            return .arrayStart
        case UInt8(ascii: "]"):
            position += 1
            return .arrayEnd
        case UInt8(ascii: "("):
            return .string(skipLiteralString())
        case UInt8(ascii: "/"):
            return .name(readName())
        case UInt8(ascii: ")"), UInt8(ascii: "{"), UInt8(ascii: "}"):
            position += 1
            return .junk
        default:
            return readRegular()
        }
    }

    /// Moves past a stream's data, which follows the `stream` keyword just read.
    ///
    /// Trusts a direct `/Length` only if `endstream` follows it; otherwise searches for `endstream`.
    mutating func skipStreamData(declaredLength: Int?) {
        var start = position
        if start < bytes.count, bytes[start] == 0x0D { start += 1 }
        if start < bytes.count, bytes[start] == 0x0A { start += 1 }
        if let declaredLength, declaredLength >= 0, declaredLength <= bytes.count - start {
            var end = start + declaredLength
            while end < bytes.count, Self.isWhitespace(bytes[end]) { end += 1 }
            if bytes[end...].starts(with: Self.endStream) {
                position = end + Self.endStream.count
                return
            }
        }
        if let found = CardArtByteSearch.firstIndex(of: Self.endStream, in: bytes[start...]) {
            position = found + Self.endStream.count
        } else {
            position = bytes.count
        }
    }

    private mutating func skipWhitespaceAndComments() {
        while position < bytes.count {
            let byte = bytes[position]
            if Self.isWhitespace(byte) {
                position += 1
            } else if byte == UInt8(ascii: "%") {
                if bytes[position...].starts(with: Self.endOfFileMarker) { endOfFileMarkers += 1 }
                while position < bytes.count, bytes[position] != 0x0A, bytes[position] != 0x0D { position += 1 }
            } else {
                return
            }
        }
    }

    /// Skips `( … )` with balanced parentheses and backslash escapes.
    /// How many decoded bytes of a string are kept (enough for a URI's scheme).
    static let stringPrefixKept = 64

    /// Moves past a literal string, returning its first decoded bytes (escapes `\n`, `\r`,
    /// `\t`, `\b`, `\f`, octal and the escaped character itself; a backslash before an end of
    /// line joins the lines).
    private mutating func skipLiteralString() -> [UInt8] {
        position += 1
        var depth = 1
        var prefix: [UInt8] = []
        func keep(_ byte: UInt8) { if prefix.count < Self.stringPrefixKept { prefix.append(byte) } }
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\\"):
                position += 1
                guard position < bytes.count else { break }
                let escaped = bytes[position]
                switch escaped {
                case UInt8(ascii: "n"): keep(0x0A)
                case UInt8(ascii: "r"): keep(0x0D)
                case UInt8(ascii: "t"): keep(0x09)
                case UInt8(ascii: "b"): keep(0x08)
                case UInt8(ascii: "f"): keep(0x0C)
                case 0x0A, 0x0D: break
                case UInt8(ascii: "0")...UInt8(ascii: "7"):
                    var value = UInt32(escaped - UInt8(ascii: "0"))
                    var digits = 1
                    while digits < 3, position + 1 < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(bytes[position + 1]) {
                        position += 1
                        value = value * 8 + UInt32(bytes[position] - UInt8(ascii: "0"))
                        digits += 1
                    }
                    keep(UInt8(truncatingIfNeeded: value))
                default: keep(escaped)
                }
            case UInt8(ascii: "("):
                depth += 1
                keep(byte)
            case UInt8(ascii: ")"):
                depth -= 1
                if depth == 0 {
                    position += 1
                    return prefix
                }
                keep(byte)
            default:
                keep(byte)
            }
            position += 1
        }
        position = bytes.count
        return prefix
    }

    /// Reads `/Name`, decoding `#xx` escapes.
    private mutating func readName() -> String {
        position += 1
        var name: [UInt8] = []
        while position < bytes.count {
            let byte = bytes[position]
            if Self.isWhitespace(byte) || Self.isDelimiter(byte) { break }
            var decoded = byte
            // A control byte is not a regular character (ISO 32000-1 §7.2.2); some readers end the
            // name at one (0x0B for qpdf and pdfminer), others do not.
            if byte < 0x21 || byte == 0x7F, refusal == nil {
                refusal = "has a name with the control byte 0x\(CardArtFormatting.hexByte(byte)) at byte \(position); readers differ on whether it ends the name"
            }
            if byte == UInt8(ascii: "#"), position + 2 < bytes.count,
                let high = Self.hexValue(bytes[position + 1]), let low = Self.hexValue(bytes[position + 2])
            {
                decoded = high << 4 | low
                position += 2
            }
            if name.count < Self.maximumKept { name.append(decoded) }
            position += 1
        }
        // Names are bytes (ISO 32000-1 §7.3.5), and readers compare them so: `#` and every
        // byte outside ASCII are written `#XX`, so two names are equal here only when their
        // bytes are (Swift's String equality would take /Kids and /\u{212A}ids, Kelvin sign, as one).
        var text = ""
        text.reserveCapacity(name.count)
        for byte in name {
            if byte < 0x80, byte != UInt8(ascii: "#") {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                text += "#" + CardArtFormatting.hexByte(byte)
            }
        }
        return text
    }

    /// Reads a run of regular characters: a number or a keyword (`obj`, `R`, `true`, …).
    private mutating func readRegular() -> Token {
        let start = position
        while position < bytes.count, !Self.isWhitespace(bytes[position]), !Self.isDelimiter(bytes[position]) { position += 1 }
        let run = bytes[start..<position]
        if let number = Self.number(run) { return number }
        return .keyword(String(decoding: run.prefix(Self.maximumKept), as: UTF8.self))
    }

    /// A PDF number: optional sign, digits, at most one period, at least one digit (no exponents).
    private static func number(_ run: ArraySlice<UInt8>) -> Token? {
        var digits = run[...]
        var negative = false
        if let sign = digits.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
            negative = sign == UInt8(ascii: "-")
            digits = digits.dropFirst()
        }
        var integerDigits = 0
        var fractionDigits = 0
        var sawPeriod = false
        for byte in digits {
            if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                if sawPeriod { fractionDigits += 1 } else { integerDigits += 1 }
            } else if byte == UInt8(ascii: "."), !sawPeriod {
                sawPeriod = true
            } else {
                return nil
            }
        }
        guard integerDigits + fractionDigits > 0 else { return nil }
        if !sawPeriod, integerDigits <= 18 {
            var value = 0
            for byte in digits { value = value * 10 + Int(byte - UInt8(ascii: "0")) }
            return .integer(negative ? -value : value)
        }
        // Normalize to `[-]D.D` so that Double's parser sees a plain decimal; overlong values become ±infinity.
        var text = negative ? "-" : ""
        let period = digits.firstIndex(of: UInt8(ascii: ".")) ?? digits.endIndex
        let wholePart = digits[digits.startIndex..<period]
        let fractionPart = period < digits.endIndex ? digits[(period + 1)...] : []
        text += wholePart.isEmpty ? "0" : String(decoding: wholePart, as: UTF8.self)
        text += "."
        text += fractionPart.isEmpty ? "0" : String(decoding: fractionPart, as: UTF8.self)
        guard let value = Double(text) else { return nil }
        return .real(value)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

// MARK: - Helpers

/// Byte-pattern search in time linear in the haystack (the pattern is a short constant).
private enum CardArtByteSearch {
    static func firstIndex(of pattern: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard let first = pattern.first, haystack.count >= pattern.count else { return nil }
        var index = haystack.startIndex
        let last = haystack.endIndex - pattern.count
        while index <= last {
            if haystack[index] == first, haystack[index..<(index + pattern.count)].elementsEqual(pattern) {
                return index
            }
            index += 1
        }
        return nil
    }
}

/// Locale-independent number formatting for messages.
private enum CardArtFormatting {
    /// Bytes as MB (1,000,000 bytes, as in Apple's "4 MB") with one decimal, e.g. `5.5`.
    static func megabytes(_ bytes: Int) -> String {
        let tenths = (Int64(bytes) * 10 + 500_000) / 1_000_000
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// `4000000` → `4,000,000`.
    static func grouped(_ value: Int) -> String {
        let digits = Array(String(value.magnitude))
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return value < 0 ? "-" + result : result
    }

    /// A decimal with at most `fractionDigits` digits after the point and no trailing zeros: `307.2`, `1536`.
    static func decimal(_ value: Double, fractionDigits: Int) -> String {
        var scale: Int64 = 1
        for _ in 0..<min(max(fractionDigits, 0), 9) { scale *= 10 }
        // Scaled to whole units it must fit in 64 bits (a 16-digit real in a message crashed
        // the check when scaled by a million).
        guard value.isFinite, abs(value) < 1e15, abs(value) * Double(scale) < 9e18 else { return "\(value)" }
        let units = Int64((abs(value) * Double(scale)).rounded())
        var text = String(units / scale)
        var fraction = units % scale
        if fraction != 0 {
            var places = fractionDigits
            while fraction % 10 == 0 {
                fraction /= 10
                places -= 1
            }
            let digits = String(fraction)
            text += "." + String(repeating: "0", count: places - digits.count) + digits
        }
        return value < 0 && units != 0 ? "-" + text : text
    }

    static func hexByte(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }

    /// Printable ASCII only, cut to `limit` characters, so a hostile header cannot inject lines into a message.
    static func printable(_ text: String, limit: Int) -> String {
        let scalars = text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }
        var result = String(String.UnicodeScalarView(scalars.prefix(limit)))
        if scalars.count > limit { result += "…" }
        return result
    }
}
