import Foundation

// Card-art files for tests, built byte by byte: PNGs of any size with correct CRCs and zlib
// streams, and PDFs with correct cross-reference tables. Shared by every test target that
// needs real art (the validator, the server's upload, the CLI, the SDK).

/// Builds complete, valid PNG files: signature, IHDR, one IDAT holding a zlib stream of
/// stored (uncompressed) deflate blocks, and IEND, every chunk with its correct CRC-32.
public enum TestPNG {
    public static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Bitwise CRC-32 (reflected polynomial 0xEDB88320), deliberately table-free and independent of the validator's.
    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 {
                crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
            }
        }
        return ~crc
    }

    public static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }

    public static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// length, type, data, CRC over type + data.
    public static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typeAndData = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + typeAndData + bigEndian(crc32(typeAndData))
    }

    /// A zlib stream (RFC 1950) of stored deflate blocks (RFC 1951 BTYPE 00), at most 65,535 bytes each.
    public static func zlibStored(_ raw: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]  // CMF/FLG: deflate, 32K window, (0x7801 % 31 == 0)
        var offset = 0
        repeat {
            let length = min(65_535, raw.count - offset)
            let isFinal = offset + length == raw.count
            out.append(isFinal ? 1 : 0)  // BFINAL, BTYPE = 00; the rest of the byte is padding
            out += [UInt8(length & 0xFF), UInt8(length >> 8)]
            out += [UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)]
            out += raw[offset..<(offset + length)]
            offset += length
        } while offset < raw.count
        return out + bigEndian(adler32(raw))
    }

    /// By default 1-bit greyscale, deflate, adaptive filtering, no interlace.
    public static func ihdr(
        width: Int, height: Int, bitDepth: UInt8 = 1, colourType: UInt8 = 0, compression: UInt8 = 0, filter: UInt8 = 0, interlace: UInt8 = 0
    ) -> [UInt8] {
        chunk("IHDR", bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [bitDepth, colourType, compression, filter, interlace])
    }

    /// Samples per pixel of a colour type: greyscale 1, truecolour 3, indexed 1, greyscale with alpha 2, truecolour with alpha 4.
    public static func channels(colourType: UInt8) -> Int {
        switch colourType {
        case 2: 3
        case 4: 2
        case 6: 4
        default: 1
        }
    }

    /// The size of an image's scanlines with their filter bytes, in Adam7's seven passes when `interlaced`.
    public static func scanlineByteCount(width: Int, height: Int, bitDepth: UInt8, colourType: UInt8, interlaced: Bool) -> Int {
        let bitsPerPixel = Int(bitDepth) * channels(colourType: colourType)
        // (first column, first row, column step, row step) of each pass; a single pass without interlacing.
        let passes = interlaced
            ? [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
            : [(0, 0, 1, 1)]
        var total = 0
        for (column, row, columnStep, rowStep) in passes {
            let passWidth = width > column ? (width - column + columnStep - 1) / columnStep : 0
            let passHeight = height > row ? (height - row + rowStep - 1) / rowStep : 0
            guard passWidth > 0, passHeight > 0 else { continue }
            total += passHeight * ((passWidth * bitsPerPixel + 7) / 8 + 1)
        }
        return total
    }

    /// A zlib stream of `count` zero bytes in one fixed-Huffman deflate block (RFC 1951 BTYPE 01):
    /// a literal 0, then copies of 258 bytes at distance 1, then the rest as literals.
    public static func zlibZeros(_ count: Int) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var accumulator: UInt32 = 0
        var bitCount = 0
        func put(_ value: UInt32, bits: Int) {  // least significant bit first
            accumulator |= value << UInt32(bitCount)
            bitCount += bits
            while bitCount >= 8 {
                out.append(UInt8(accumulator & 0xFF))
                accumulator >>= 8
                bitCount -= 8
            }
        }
        func putCode(_ code: UInt32, bits: Int) {  // Huffman codes go most significant bit first
            var reversed: UInt32 = 0
            for index in 0..<bits where code & (1 << UInt32(index)) != 0 { reversed |= 1 << UInt32(bits - 1 - index) }
            put(reversed, bits: bits)
        }
        put(1, bits: 1)  // BFINAL
        put(1, bits: 2)  // BTYPE 01: fixed Huffman codes
        var remaining = count
        if remaining > 0 {
            putCode(0x30, bits: 8)  // literal 0
            remaining -= 1
        }
        while remaining >= 258 {
            putCode(0xC5, bits: 8)  // length code 285: 258 bytes
            putCode(0, bits: 5)  // distance code 0: distance 1
            remaining -= 258
        }
        for _ in 0..<remaining { putCode(0x30, bits: 8) }
        putCode(0, bits: 7)  // end of block (256)
        if bitCount > 0 { out.append(UInt8(accumulator & 0xFF)) }
        return out + bigEndian(UInt32(count % 65521) << 16 | 1)  // Adler-32 of zeros: a = 1, b = count
    }

    /// A valid all-black (or palette entry 0) PNG of any legal bit depth and colour type;
    /// colour type 3 gets a two-entry `PLTE` before its image data.
    public static func bytes(width: Int, height: Int, bitDepth: UInt8, colourType: UInt8, interlaced: Bool = false) -> [UInt8] {
        let palette = colourType == 3 ? chunk("PLTE", [0x10, 0x30, 0x70, 0xE0, 0xB0, 0x30]) : []
        let count = scanlineByteCount(width: width, height: height, bitDepth: bitDepth, colourType: colourType, interlaced: interlaced)
        return signature + ihdr(width: width, height: height, bitDepth: bitDepth, colourType: colourType, interlace: interlaced ? 1 : 0)
            + palette + chunk("IDAT", zlibZeros(count)) + chunk("IEND", [])
    }

    /// A 1-bit greyscale image of diagonal stripes, every scanline with filter type 0.
    public static func idat(width: Int, height: Int) -> [UInt8] {
        let rowBytes = (width + 7) / 8
        var raw: [UInt8] = []
        raw.reserveCapacity(height * (rowBytes + 1))
        for row in 0..<height {
            raw.append(0)
            for column in 0..<rowBytes {
                raw.append((row / 8 + column) % 2 == 0 ? 0xF0 : 0x0F)
            }
        }
        return chunk("IDAT", zlibStored(raw))
    }

    public static func bytes(width: Int, height: Int) -> [UInt8] {
        signature + ihdr(width: width, height: height) + idat(width: width, height: height) + chunk("IEND", [])
    }

    public static func file(width: Int = 1536, height: Int = 969) -> Data {
        Data(bytes(width: width, height: height))
    }
}

/// Builds PDF files with a correct cross-reference table, so that they open in real readers.
public enum TestPDF {
    public struct File: Sendable {
        public var bytes: [UInt8]
        public var xrefOffset: Int
        public var data: Data { Data(bytes) }
    }

    /// `%PDF-1.x`, the customary binary comment line, and `padding` extra bytes of comment.
    public static func header(version: String, padding: Int) -> [UInt8] {
        var out = Array("%PDF-\(version)\n".utf8) + [0x25, 0xE2, 0xE3, 0xCF, 0xD3, 0x0A]
        if padding >= 2 {
            out += [UInt8(ascii: "%")] + [UInt8](repeating: UInt8(ascii: " "), count: padding - 2) + [0x0A]
        } else if padding == 1 {
            out.append(0x0A)
        }
        return out
    }

    public static func offset10(_ value: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, 10 - digits.count)) + digits
    }

    /// Object `i + 1` has body `bodies[i]`; the trailer's `/Root` is object `root`, followed by `trailerEntries`.
    public static func build(_ bodies: [String], root: Int = 1, version: String = "1.4", padding: Int = 0, trailerEntries: String = "") -> File {
        var out = header(version: version, padding: padding)
        var offsets: [Int] = []
        for (index, body) in bodies.enumerated() {
            offsets.append(out.count)
            out += Array("\(index + 1) 0 obj\n\(body)\nendobj\n".utf8)
        }
        let xrefOffset = out.count
        var tail = "xref\n0 \(bodies.count + 1)\n0000000000 65535 f \n"
        for offset in offsets { tail += "\(offset10(offset)) 00000 n \n" }
        tail += "trailer\n<< /Size \(bodies.count + 1) /Root \(root) 0 R\(trailerEntries) >>\nstartxref\n\(xrefOffset)\n%%EOF\n"
        out += Array(tail.utf8)
        return File(bytes: out, xrefOffset: xrefOffset)
    }

    public static func stream(_ content: String, extra: String = "") -> String {
        "<< /Length \(content.utf8.count)\(extra) >>\nstream\n\(content)\nendstream"
    }

    public static let artwork = "0.05 0.2 0.45 rg 0 0 1536 969 re f 1 1 1 rg 96 96 288 180 re f"

    /// Catalog (1), page tree (2), page (3), content stream (4).
    public static func onePage(page: String = "/MediaBox [0 0 1536 969]", pages: String = "", padding: Int = 0) -> File {
        build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 \(pages) >>",
            "<< /Type /Page /Parent 2 0 R \(page) /Resources << >> /Contents 4 0 R >>",
            stream(artwork),
        ], padding: padding)
    }

    /// A one-page PDF of exactly `size` bytes (the comment after the header absorbs the difference).
    public static func onePage(exactSize size: Int) -> File {
        var padding = size - onePage().bytes.count
        var file = onePage(padding: padding)
        padding += size - file.bytes.count  // the startxref number may have grown a digit
        file = onePage(padding: padding)
        return file
    }

    /// A PDF 1.5 whose catalog, page tree and page live in a FlateDecode object stream (stored
    /// deflate blocks) indexed by a cross-reference stream: valid, but its page is not visible as text.
    public static func withObjectStream() -> File {
        var out = header(version: "1.5", padding: 0)
        let content = stream(artwork)
        let offset4 = out.count
        out += Array("4 0 obj\n\(content)\nendobj\n".utf8)

        let bodies = [
            (1, "<< /Type /Catalog /Pages 2 0 R >>"),
            (2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
            (3, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Resources << >> /Contents 4 0 R >>"),
        ]
        var index = ""
        var objects = ""
        for (number, body) in bodies {
            index += "\(number) \(objects.utf8.count) "
            objects += body + "\n"
        }
        let decoded = Array((index + objects).utf8)
        let compressed = TestPNG.zlibStored(decoded)
        let offset5 = out.count
        out += Array("5 0 obj\n<< /Type /ObjStm /N 3 /First \(index.utf8.count) /Filter /FlateDecode /Length \(compressed.count) >>\nstream\n".utf8)
        out += compressed
        out += Array("\nendstream\nendobj\n".utf8)

        let offset6 = out.count
        func entry(_ type: UInt8, _ field2: Int, _ field3: Int) -> [UInt8] {
            [type] + TestPNG.bigEndian(UInt32(field2)) + [UInt8(field3 >> 8), UInt8(field3 & 0xFF)]
        }
        var xref = entry(0, 0, 65_535)
        xref += entry(2, 5, 0) + entry(2, 5, 1) + entry(2, 5, 2)
        xref += entry(1, offset4, 0) + entry(1, offset5, 0) + entry(1, offset6, 0)
        out += Array("6 0 obj\n<< /Type /XRef /Size 7 /W [1 4 2] /Root 1 0 R /Length \(xref.count) >>\nstream\n".utf8)
        out += xref
        out += Array("\nendstream\nendobj\nstartxref\n\(offset6)\n%%EOF\n".utf8)
        return File(bytes: out, xrefOffset: offset6)
    }

    /// Object `i + 1` has body `bodies[i]`, indexed by a cross-reference stream (the last
    /// object, `/W [1 4 2]`, not compressed) instead of a table; its `/Root` is object `root`.
    public static func buildWithCrossReferenceStream(_ bodies: [String], root: Int = 1) -> File {
        var out = header(version: "1.5", padding: 0)
        var offsets: [Int] = []
        for (index, body) in bodies.enumerated() {
            offsets.append(out.count)
            out += Array("\(index + 1) 0 obj\n\(body)\nendobj\n".utf8)
        }
        let xrefOffset = out.count
        offsets.append(xrefOffset)
        func entry(_ type: UInt8, _ field2: Int, _ field3: Int) -> [UInt8] {
            [type] + TestPNG.bigEndian(UInt32(field2)) + [UInt8(field3 >> 8), UInt8(field3 & 0xFF)]
        }
        var xref = entry(0, 0, 65_535)
        for offset in offsets { xref += entry(1, offset, 0) }
        let number = bodies.count + 1
        out += Array("\(number) 0 obj\n<< /Type /XRef /Size \(number + 1) /W [1 4 2] /Root \(root) 0 R /Length \(xref.count) >>\nstream\n".utf8)
        out += xref
        out += Array("\nendstream\nendobj\nstartxref\n\(xrefOffset)\n%%EOF\n".utf8)
        return File(bytes: out, xrefOffset: xrefOffset)
    }

    /// A linearized one-page file: the linearization dictionary (object 5) and the first page's
    /// cross-reference table come first (`startxref 0`), the catalog, page tree, page and
    /// content after them, and the main table with `/Prev` at the end — the shape of a file
    /// saved for fast web view.
    public static func linearized() -> File {
        let bodies = [
            (1, "<< /Type /Catalog /Pages 2 0 R >>"),
            (2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
            (3, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Resources << >> /Contents 4 0 R >>"),
            (4, stream(artwork)),
        ]
        // Two passes: the first finds the offsets, the second writes them (same lengths).
        var total = 0
        var mainTable = 0
        var result = File(bytes: [], xrefOffset: 0)
        for _ in 0..<2 {
            var out = header(version: "1.4", padding: 0)
            let offset5 = out.count
            out += Array("5 0 obj\n<< /Linearized 1 /L \(offset10(total)) /O 3 /N 1 /E \(offset10(total)) /T \(offset10(mainTable)) /H [0 0] >>\nendobj\n".utf8)
            let firstTable = out.count
            out += Array("xref\n5 1\n\(offset10(offset5)) 00000 n \ntrailer\n<< /Size 6 /Root 1 0 R /Prev \(offset10(mainTable)) >>\nstartxref\n0\n%%EOF\n".utf8)
            var offsets: [Int] = []
            for (number, body) in bodies {
                offsets.append(out.count)
                out += Array("\(number) 0 obj\n\(body)\nendobj\n".utf8)
            }
            mainTable = out.count
            var tail = "xref\n0 5\n0000000000 65535 f \n"
            for offset in offsets { tail += "\(offset10(offset)) 00000 n \n" }
            tail += "trailer\n<< /Size 6 >>\nstartxref\n\(firstTable)\n%%EOF\n"
            out += Array(tail.utf8)
            total = out.count
            result = File(bytes: out, xrefOffset: firstTable)
        }
        return result
    }

    /// Catalog (1), page tree (2) and a page (3) whose content is object 4 and whose one
    /// annotation is object 5.
    public static let annotatedPage = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R /Annots [5 0 R] >>",
    ]

    /// A link annotation whose action launches a program.
    public static let launchAnnotation = "<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /A << /S /Launch /F (calc.exe) >> >>"

    /// A landscape one-page file whose page's one annotation (object 5) launches a program:
    /// refused whenever it is read.
    public static let launching = build(annotatedPage + [stream(artwork), launchAnnotation])

    /// Appends an incremental update that redefines the page (object 3) with a new `/MediaBox`.
    public static func updatingPage(of base: File, mediaBox: String) -> File {
        updating(base, object: 3, body: "<< /Type /Page /Parent 2 0 R /MediaBox \(mediaBox) /Resources << >> /Contents 4 0 R >>", size: 5)
    }
}

extension TestPDF {
    /// Appends an incremental update (object, cross-reference section, trailer with `/Prev`,
    /// `startxref`, `%%EOF`) that defines object `number` as `body`; `size` is the trailer's `/Size`.
    public static func updating(_ base: File, object number: Int, body: String, size: Int) -> File {
        var out = base.bytes
        let offset = out.count
        out += Array("\(number) 0 obj\n\(body)\nendobj\n".utf8)
        let xrefOffset = out.count
        let tail = "xref\n0 1\n0000000000 65535 f \n\(number) 1\n\(offset10(offset)) 00000 n \n"
            + "trailer\n<< /Size \(size) /Root 1 0 R /Prev \(base.xrefOffset) >>\nstartxref\n\(xrefOffset)\n%%EOF\n"
        out += Array(tail.utf8)
        return File(bytes: out, xrefOffset: xrefOffset)
    }
}

/// Card art at a given size, for tests that need a valid file and not its construction.
public enum SampleCardArt {
    /// A valid PNG of `width` × `height` pixels (Apple's 1536 × 969 by default).
    public static func png(width: Int = 1536, height: Int = 969) -> Data {
        TestPNG.file(width: width, height: height)
    }

    /// A valid one-page PDF whose page is `width` × `height` points.
    public static func pdf(width: Int = 1536, height: Int = 969) -> Data {
        TestPDF.onePage(page: "/MediaBox [0 0 \(width) \(height)]").data
    }
}
