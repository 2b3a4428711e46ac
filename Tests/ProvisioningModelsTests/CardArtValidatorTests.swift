import Foundation
import ProvisioningModels
import TestSupport
import Testing

// MARK: - Helpers (the files themselves are built by TestSupport)

private func refusal(of data: Data, declaredContentType: String? = nil) -> CardArtError? {
    if case .failure(let error) = CardArtValidator.validate(data, declaredContentType: declaredContentType) { return error }
    return nil
}

private func acceptance(of data: Data, declaredContentType: String? = nil) -> CardArtInfo? {
    switch CardArtValidator.validate(data, declaredContentType: declaredContentType) {
    case .success(let info):
        return info
    case .failure(let error):
        Issue.record("unexpected refusal: \(error)")
        return nil
    }
}

// MARK: - Limits and format detection

@Suite("Card art: size, format and content type")
struct CardArtLimitsTests {
    @Test func refusesEmptyData() throws {
        let error = try #require(refusal(of: Data()))
        #expect(error.code == .empty)
        #expect(error.message.contains("empty"))
    }

    @Test func sizeLimitIsStrictlyUnderFourMillionBytes() throws {
        #expect(CardArtValidator.maximumSize == 4_000_000)
        let justUnder = TestPDF.onePage(exactSize: CardArtValidator.maximumSize - 1)
        try #require(justUnder.bytes.count == CardArtValidator.maximumSize - 1)
        let info = try #require(acceptance(of: justUnder.data))
        #expect(info.byteCount == CardArtValidator.maximumSize - 1)

        let exactly = TestPDF.onePage(exactSize: CardArtValidator.maximumSize)
        try #require(exactly.bytes.count == CardArtValidator.maximumSize)
        let error = try #require(refusal(of: exactly.data))
        #expect(error.code == .tooLarge)
        #expect(error.message == "file is 4.0 MB (4,000,000 bytes); Apple requires under 4 MB (less than 4,000,000 bytes)")

        // Between 4,000,000 bytes and 4 MiB: refused here, as Apple ("under 4 MB") would.
        let mebibyte = TestPDF.onePage(exactSize: 4 * 1024 * 1024 - 1)
        let betweenError = try #require(refusal(of: mebibyte.data))
        #expect(betweenError.code == .tooLarge)
        #expect(betweenError.message.hasPrefix("file is 4.2 MB (4,194,303 bytes)"))
    }

    @Test func tooLargeMessageNamesTheSize() throws {
        var data = TestPNG.file()
        data.append(Data(count: 5_452_595 - data.count))
        let error = try #require(refusal(of: data))
        #expect(error.code == .tooLarge)
        #expect(error.message.hasPrefix("file is 5.5 MB (5,452,595 bytes)"))
        #expect(error.message.contains("under 4 MB"))
    }

    @Test func refusesRandomBytesAsUnknownFormat() throws {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let bytes = (0..<4096).map { _ -> UInt8 in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
        try #require(!bytes.starts(with: TestPNG.signature.prefix(4)) && !bytes.starts(with: Array("%PDF-".utf8)))
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .unknownFormat)
        #expect(error.message.contains("neither a PNG nor a PDF"))
        #expect(CardArtValidator.detectFormat(of: Data(bytes)) == nil)
    }

    @Test func unknownFormatMessageRecognizesAJPEG() throws {
        let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46])
        let error = try #require(refusal(of: jpeg))
        #expect(error.code == .unknownFormat)
        #expect(error.message.contains("FF D8 FF E0"))
        #expect(error.message.contains("JPEG"))
    }

    @Test func detectsFormatFromContentsOnly() {
        #expect(CardArtValidator.detectFormat(of: TestPNG.file()) == .png)
        #expect(CardArtValidator.detectFormat(of: TestPDF.onePage().data) == .pdf)
        #expect(CardArtValidator.detectFormat(of: Data("PDF-1.4".utf8)) == nil)
        #expect(CardArtValidator.detectFormat(of: Data(TestPNG.signature.prefix(3))) == nil)
    }

    @Test func refusesContentTypeThatNamesTheOtherFormat() throws {
        let pngAsPDF = try #require(refusal(of: TestPNG.file(), declaredContentType: "application/pdf"))
        #expect(pngAsPDF.code == .contentTypeMismatch)
        #expect(pngAsPDF.message == "declared Content-Type is application/pdf but the file is a PNG; send it as image/png")

        let pdfAsPNG = try #require(refusal(of: TestPDF.onePage().data, declaredContentType: "image/png"))
        #expect(pdfAsPNG.code == .contentTypeMismatch)
        #expect(pdfAsPNG.message.contains("the file is a PDF"))
    }

    @Test(arguments: ["image/jpeg", "application/octet-stream", "", "image/png-ish"])
    func refusesContentTypesOtherThanPNGAndPDF(_ declared: String) throws {
        let error = try #require(refusal(of: TestPNG.file(), declaredContentType: declared))
        #expect(error.code == .contentTypeMismatch)
        #expect(error.message.contains("not accepted"))
    }

    /// A card number written into the declared type, in any punctuation, is not echoed.
    @Test(arguments: ["image/4111,1111,1111,1111", "image/4111111111111111", "4111:1111:1111:1111"])
    func mismatchMessageDoesNotEchoACardNumber(_ declared: String) throws {
        let error = try #require(refusal(of: TestPNG.file(), declaredContentType: declared))
        #expect(error.code == .contentTypeMismatch)
        #expect(!error.message.contains("4111"), "\(error.message)")
        #expect(error.message.contains("•••• 1111"), "\(error.message)")
    }

    @Test func mismatchMessageDoesNotEchoControlCharacters() throws {
        let error = try #require(refusal(of: TestPNG.file(), declaredContentType: "image/png\r\nX-Injected: yes"))
        #expect(error.code == .contentTypeMismatch)
        #expect(!error.message.contains("\r"))
        #expect(!error.message.contains("\n"))
    }

    @Test(arguments: [("image/png", true), ("IMAGE/PNG", true), (" image/png ; charset=binary", true), ("application/pdf; q=1", false), ("Application/PDF", false)])
    func acceptsMatchingContentTypeIgnoringCaseAndParameters(_ declared: String, _ isPNG: Bool) throws {
        let data = isPNG ? TestPNG.file() : TestPDF.onePage().data
        let info = try #require(acceptance(of: data, declaredContentType: declared))
        #expect(info.format == (isPNG ? .png : .pdf))
    }

    @Test func formatsReportTheirMediaTypes() {
        #expect(CardArtFormat.png.mediaType == "image/png")
        #expect(CardArtFormat.pdf.mediaType == "application/pdf")
        #expect(CardArtFormat(mediaType: "application/pdf;charset=binary") == .pdf)
        #expect(CardArtFormat(mediaType: "Image/PNG") == .png)
        #expect(CardArtFormat(mediaType: "image/jpeg") == nil)
        #expect(CardArtFormat.png.rawValue == "png")
    }

    @Test func errorCodesAreStableSnakeCase() {
        let codes: [CardArtError.Code] = [
            .empty, .tooLarge, .unknownFormat, .contentTypeMismatch, .pngTruncated, .pngInvalidHeader, .pngCorrupt, .pngTrailingData, .pngWrongSize, .pngAnimated,
            .pdfTruncated, .pdfEncrypted, .pdfDataAfterStartXRef, .pdfInvalidStructure, .pdfNoPage, .pdfActiveContent, .pdfNoPageBox, .pdfInvalidPageBox, .pdfMultiplePages, .pdfPageSizeOutOfRange, .pdfRotated, .pdfNotLandscape, .pdfWrongAspect,
        ]
        #expect(Set(codes).count == codes.count)
        for code in codes {
            #expect(code.rawValue.allSatisfy { $0 == "_" || ($0.isASCII && $0.isLowercase) }, "\(code)")
        }
        #expect(CardArtError.Code.tooLarge.rawValue == "too_large")
        #expect(CardArtError.Code.contentTypeMismatch.rawValue == "content_type_mismatch")
        #expect(CardArtError.Code.pngWrongSize.rawValue == "png_wrong_size")
        #expect(CardArtError.Code.pdfMultiplePages.rawValue == "pdf_multiple_pages")
        #expect(CardArtError(code: .empty, message: "file is empty").description == "empty: file is empty")
    }

    @Test func infoRoundTripsThroughJSON() throws {
        let info = try #require(acceptance(of: TestPDF.onePage().data))
        let decoded = try JSONDecoder().decode(CardArtInfo.self, from: JSONEncoder().encode(info))
        #expect(decoded == info)
        #expect(decoded.mediaType == "application/pdf")
    }

    @Test func validatesASliceOfLargerData() throws {
        let file = TestPNG.file()
        let padded = Data([1, 2, 3, 4, 5]) + file
        let slice = padded[5...]
        try #require(slice.startIndex == 5)
        let info = try #require(acceptance(of: slice, declaredContentType: "image/png"))
        #expect(info.byteCount == file.count)
    }
}

// MARK: - PNG

@Suite("Card art: PNG")
struct CardArtPNGTests {
    @Test func acceptsA1536By969PNG() throws {
        let data = TestPNG.file()
        let info = try #require(acceptance(of: data))
        #expect(info == CardArtInfo(format: .png, dimensions: .pixels(width: 1536, height: 969), byteCount: data.count))
    }

    @Test(arguments: [(1024, 768), (1535, 969), (1536, 970), (969, 1536), (3072, 1938), (1, 1)])
    func refusesOtherPixelSizesNamingTheSize(_ width: Int, _ height: Int) throws {
        let error = try #require(refusal(of: TestPNG.file(width: width, height: height)))
        #expect(error.code == .pngWrongSize)
        #expect(error.message == "PNG is \(width)×\(height) pixels; Apple requires 1536×969")
    }

    @Test(arguments: [4, 8, 12, 16, 20, 29, 32])
    func refusesAPNGCutInsideItsHeader(_ length: Int) throws {
        let error = try #require(refusal(of: Data(TestPNG.bytes(width: 1536, height: 969).prefix(length))))
        #expect(error.code == .pngTruncated)
        #expect(error.message.contains("PNG ends after \(length) bytes"))
    }

    @Test func refusesAPNGCutAfterItsHeader() throws {
        let bytes = TestPNG.bytes(width: 1536, height: 969)
        let withoutEnd = try #require(refusal(of: Data(bytes.dropLast(12))))
        #expect(withoutEnd.code == .pngTruncated)
        #expect(withoutEnd.message.contains("without an IEND chunk"))

        let midImage = try #require(refusal(of: Data(bytes.prefix(bytes.count / 2))))
        #expect(midImage.code == .pngTruncated)
        #expect(midImage.message.contains("inside its IDAT chunk"))
    }

    @Test func refusesAPNGWhoseFirstChunkIsNotIHDR() throws {
        let bytes = TestPNG.signature + TestPNG.chunk("tEXt", Array("Title\0Card".utf8)) + TestPNG.ihdr(width: 1536, height: 969)
            + TestPNG.idat(width: 1536, height: 969) + TestPNG.chunk("IEND", [])
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngInvalidHeader)
        #expect(error.message.contains("first chunk is tEXt"))
    }

    @Test func refusesAnIHDROfTheWrongLength() throws {
        let bytes = TestPNG.signature + TestPNG.chunk("IHDR", TestPNG.bigEndian(1536) + TestPNG.bigEndian(969) + [1, 0, 0, 0])
            + TestPNG.idat(width: 1536, height: 969) + TestPNG.chunk("IEND", [])
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngInvalidHeader)
        #expect(error.message.contains("12 bytes"))
    }

    @Test func refusesADamagedIHDR() throws {
        var bytes = TestPNG.bytes(width: 1536, height: 969)
        bytes[19] ^= 0x01  // the width's low byte: 1536 → 1537, CRC no longer matches
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngInvalidHeader)
        #expect(error.message.contains("CRC"))
    }

    @Test func refusesAZeroWidth() throws {
        let bytes = TestPNG.signature + TestPNG.ihdr(width: 0, height: 969) + TestPNG.idat(width: 8, height: 1) + TestPNG.chunk("IEND", [])
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngInvalidHeader)
        #expect(error.message.contains("0×969"))
    }

    @Test func refusesDamagedImageData() throws {
        var bytes = TestPNG.bytes(width: 1536, height: 969)
        bytes[33 + 8 + 100] ^= 0xFF  // a byte inside IDAT's data
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngCorrupt)
        #expect(error.message.contains("IDAT chunk at byte 33 fails its CRC check"))
    }

    @Test func toleratesADamagedAncillaryChunkLikeDecodersDo() throws {
        var text = TestPNG.chunk("tEXt", Array("Title\0Card".utf8))
        text[text.count - 1] ^= 0xFF
        let bytes = TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969) + text + TestPNG.idat(width: 1536, height: 969) + TestPNG.chunk("IEND", [])
        #expect(acceptance(of: Data(bytes)) != nil)
    }

    @Test func refusesAPNGWithoutImageData() throws {
        let bytes = TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969) + TestPNG.chunk("IEND", [])
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngCorrupt)
        #expect(error.message.contains("no image data"))
    }

    @Test func refusesChunkLengthsBeyondTheDataWithoutTrapping() throws {
        let header = TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969)
        let huge = try #require(refusal(of: Data(header + TestPNG.bigEndian(0xFFFF_FFF0) + Array("IDAT".utf8) + [0, 0, 0, 0])))
        #expect(huge.code == .pngCorrupt)
        #expect(huge.message.contains("4294967280"))

        let maximal = try #require(refusal(of: Data(header + TestPNG.bigEndian(0x7FFF_FFFF) + Array("IDAT".utf8) + [0, 0, 0, 0])))
        #expect(maximal.code == .pngTruncated)
    }
}

// MARK: - PDF

@Suite("Card art: PDF")
struct CardArtPDFTests {
    @Test func acceptsAOnePagePDFOf1536By969Points() throws {
        let data = TestPDF.onePage().data
        let info = try #require(acceptance(of: data))
        #expect(info == CardArtInfo(format: .pdf, dimensions: .points(width: 1536, height: 969), byteCount: data.count))
    }

    @Test func acceptsAnySizeWithTheRightAspectIncludingReals() throws {
        let info = try #require(acceptance(of: TestPDF.onePage(page: "/MediaBox [0.0 0.0 307.2 193.8]").data))
        #expect(info.dimensions == .points(width: 307.2, height: 193.8))
    }

    @Test(arguments: [
        "/MediaBox[-768 -484.5\r\n768\t484.5]",
        "/MediaBox [ 1536 969 0 0 ]",
        "/MediaBox\n[\n+0\n.0\n1536.\n969\n]",
        "/MediaBox [100 -50 1636 919]",
        "/MediaBox%comment\n[0 0 1536 969]",
    ])
    func readsPageBoxesWrittenInVariousWays(_ entry: String) throws {
        let info = try #require(acceptance(of: TestPDF.onePage(page: entry).data))
        #expect(info.dimensions == .points(width: 1536, height: 969))
    }

    @Test func refusesAPortraitPageNamingItsSize() throws {
        let error = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 612 792]").data))
        #expect(error.code == .pdfNotLandscape)
        #expect(error.message == "PDF page is 612×792 points, which is portrait; card art must be landscape (1536:969)")
    }

    @Test func refusesASquarePage() throws {
        let error = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 969 969]").data))
        #expect(error.code == .pdfNotLandscape)
        #expect(error.message.contains("square"))
    }

    @Test func refusesALandscapePageOfTheWrongAspect() throws {
        let error = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 1000 400]").data))
        #expect(error.code == .pdfWrongAspect)
        #expect(error.message == "PDF page is 1000×400 points, an aspect ratio of 2.5; Apple requires 1536:969 (1.585) within 0.5%")
    }

    @Test(arguments: [("[0 0 1536 972]", true), ("[0 0 1540 969]", true), ("[0 0 1536 980]", false), ("[0 0 1600 969]", false)])
    func appliesTheHalfPercentAspectTolerance(_ box: String, _ accepted: Bool) {
        let result = CardArtValidator.validate(TestPDF.onePage(page: "/MediaBox \(box)").data)
        switch result {
        case .success:
            #expect(accepted, "\(box) should be refused")
        case .failure(let error):
            #expect(!accepted, "\(box) should be accepted: \(error)")
            #expect(error.code == .pdfWrongAspect)
        }
    }

    @Test func refusesTwoPages() throws {
        let file = TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 5 0 R >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 5 0 R >>",
            TestPDF.stream(TestPDF.artwork),
        ])
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfMultiplePages)
        #expect(error.message == "PDF has 2 pages; card art must be a single page")
    }

    @Test func refusesWhenThePageTreeDeclaresMorePagesThanItShows() throws {
        let file = TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 3 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>",
            TestPDF.stream(TestPDF.artwork),
        ])
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfMultiplePages)
        #expect(error.message.contains("3 pages"))
    }

    @Test func usesAPageBoxInheritedFromThePageTree() throws {
        let info = try #require(acceptance(of: TestPDF.onePage(page: "", pages: "/MediaBox [0 0 1536 969]").data))
        #expect(info.dimensions == .points(width: 1536, height: 969))

        let portrait = try #require(refusal(of: TestPDF.onePage(page: "", pages: "/MediaBox [0 0 612 792]").data))
        #expect(portrait.code == .pdfNotLandscape)
    }

    @Test func prefersTheCropBoxClippedToTheMediaBox() throws {
        let cropped = try #require(acceptance(of: TestPDF.onePage(page: "/MediaBox [0 0 2000 2000] /CropBox [100 100 1636 1069]").data))
        #expect(cropped.dimensions == .points(width: 1536, height: 969))

        let portraitCrop = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 1536 969] /CropBox [0 0 612 792]").data))
        #expect(portraitCrop.code == .pdfNotLandscape)
        #expect(portraitCrop.message.contains("612×792"))

        let overhanging = try #require(acceptance(of: TestPDF.onePage(page: "/MediaBox [0 0 1536 969] /CropBox [-100 -100 1536 969]").data))
        #expect(overhanging.dimensions == .points(width: 1536, height: 969))

        let inherited = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 1536 969]", pages: "/CropBox [0 0 1000 400]").data))
        #expect(inherited.code == .pdfWrongAspect)

        let outside = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 1536 969] /CropBox [2000 2000 3536 2969]").data))
        #expect(outside.code == .pdfInvalidPageBox)
    }

    @Test func readsAnIndirectMediaBox() throws {
        let file = TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox 5 0 R /Contents 4 0 R >>",
            TestPDF.stream(TestPDF.artwork),
            "[0 0 1536 969]",
        ])
        let info = try #require(acceptance(of: file.data))
        #expect(info.dimensions == .points(width: 1536, height: 969))
    }

    @Test func refusesARotatedPage() throws {
        let error = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 969 1536] /Rotate 90").data))
        #expect(error.code == .pdfRotated)
        #expect(error.message.contains("/Rotate 90"))

        let inherited = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 1536 969]", pages: "/Rotate 180").data))
        #expect(inherited.code == .pdfRotated)

        #expect(acceptance(of: TestPDF.onePage(page: "/MediaBox [0 0 1536 969] /Rotate 360").data) != nil)
        #expect(acceptance(of: TestPDF.onePage(page: "/MediaBox [0 0 1536 969] /Rotate 0").data) != nil)
    }

    @Test func refusesPagesInsideCompressedObjectStreamsAskingForAnUncompressedSave() throws {
        let error = try #require(refusal(of: TestPDF.withObjectStream().data))
        #expect(error.code == .pdfNoPage)
        #expect(error.message.contains("could not read the PDF's page box"))
        #expect(error.message.contains("without object-stream compression"))
    }

    @Test func refusesAPageWithNoMediaBoxAnywhere() throws {
        let error = try #require(refusal(of: TestPDF.onePage(page: "").data))
        #expect(error.code == .pdfNoPageBox)
        #expect(error.message.contains("no /MediaBox"))
    }

    @Test(arguments: [
        "/MediaBox [0 0 1536]",
        "/MediaBox [0 0 abc 969]",
        "/MediaBox [0 0 1536 969 5]",
        "/MediaBox [0 0 0 969]",
        "/MediaBox (0 0 1536 969)",
        "/MediaBox [0 0 1e400 969]",
        "/MediaBox [0 0 \(String(repeating: "9", count: 400)) 969]",
    ])
    func refusesMalformedPageBoxes(_ entry: String) throws {
        let error = try #require(refusal(of: TestPDF.onePage(page: entry).data))
        #expect(error.code == .pdfInvalidPageBox)
    }

    @Test func usesTheLatestDefinitionAfterAnIncrementalUpdate() throws {
        let portrait = TestPDF.onePage(page: "/MediaBox [0 0 612 792]")
        let nowLandscape = try #require(acceptance(of: TestPDF.updatingPage(of: portrait, mediaBox: "[0 0 1536 969]").data))
        #expect(nowLandscape.dimensions == .points(width: 1536, height: 969))

        let landscape = TestPDF.onePage()
        let nowPortrait = try #require(refusal(of: TestPDF.updatingPage(of: landscape, mediaBox: "[0 0 612 792]").data))
        #expect(nowPortrait.code == .pdfNotLandscape)
    }

    @Test func findsThePageByScanningWhenThereIsNoCatalog() throws {
        let file = TestPDF.build([
            "<< /Type /Pages /Kids [2 0 R] /Count 1 /MediaBox [0 0 1536 969] >>",
            "<< /Type /Page /Parent 1 0 R /Contents 3 0 R >>",
            TestPDF.stream(TestPDF.artwork),
        ], root: 9)
        let info = try #require(acceptance(of: file.data))
        #expect(info.dimensions == .points(width: 1536, height: 969))
    }

    /// The decoy, if read as PDF objects, would redefine the page as portrait and add a second page.
    @Test(arguments: ["direct", "indirect", "wrong"])
    func ignoresPageLikeTextInsideStreams(_ length: String) throws {
        let decoy = "endobj 3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >> endobj 2 0 obj << /Type /Pages /Kids [3 0 R 3 0 R] /Count 2 >> endobj (unbalanced"
        let stream = switch length {
        case "indirect": "<< /Length 6 0 R >>\nstream\n\(decoy)\nendstream"
        case "wrong": "<< /Length 12 >>\nstream\n\(decoy)\nendstream"
        default: TestPDF.stream(decoy)
        }
        let file = TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>",
            TestPDF.stream(TestPDF.artwork),
            stream,
            "\(decoy.utf8.count)",
        ], root: 1)
        let info = try #require(acceptance(of: file.data))
        #expect(info.dimensions == .points(width: 1536, height: 969))
    }

    @Test func refusesAPDFWithoutEndOfFileMarker() throws {
        let bytes = TestPDF.onePage().bytes
        let error = try #require(refusal(of: Data(bytes.prefix(bytes.count / 2))))
        #expect(error.code == .pdfTruncated)
        #expect(error.message.contains("%%EOF"))
    }

    @Test func refusesAPDFWithNoPages() throws {
        let empty = TestPDF.build(["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [] /Count 0 >>"])
        let error = try #require(refusal(of: empty.data))
        #expect(error.code == .pdfNoPage)
        #expect(error.message.contains("could not read the PDF's page box"))

        // Nothing at all, not even cross-reference data.
        let bare = try #require(refusal(of: Data("%PDF-1.4\n%%EOF\n".utf8)))
        #expect(bare.code == .pdfInvalidStructure)
        #expect(bare.message.hasPrefix("PDF has no startxref and cross-reference table"))
    }

    @Test func survivesDeeplyNestedGarbageAndRefusesWhatItCannotRead() throws {
        let garbage = String(repeating: "[<<", count: 50_000) + " ) > ] >> }"
        let file = TestPDF.build([
            garbage,
            "<< /Type /Catalog /Pages 3 0 R >>",
            "<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 3 0 R /MediaBox [0 0 1536 969] /Contents 5 0 R >>",
            TestPDF.stream(TestPDF.artwork),
        ], root: 2)
        // Found without a crash; refused because an object it could not read could hide an action.
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("object 1 could not be read"))
    }

    @Test func validatesANearlyFourMegabytePDFOfManySmallObjects() throws {
        var bodies = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R /Annots [5 0 R] >>",
            TestPDF.stream(TestPDF.artwork),
        ]
        bodies += Array(repeating: "<< /Type /Annot /Subtype /Square /Rect [0 0 1 1] /C [0 0 1] /Border [0 0 1] >>", count: 32_000)
        let file = TestPDF.build(bodies)
        try #require(file.bytes.count > 3_500_000 && file.bytes.count < CardArtValidator.maximumSize)
        let info = acceptance(of: file.data)
        #expect(info?.dimensions == .points(width: 1536, height: 969))
    }
}

// MARK: - PDF page-tree bombs

@Suite("Card art: PDF page trees built to amplify work")
struct CardArtPDFPageTreeBombTests {
    /// A `/Kids` array of direct `<< /Kids 4 0 R >>` dictionaries that is its own entries' `/Kids`:
    /// each entry expanded pushes the whole array again. Close to the size limit, the old walk
    /// pushed about a thousand copies of the array (gigabytes) before its budget ran out.
    @Test func refusesDirectDictionariesInKidsAtTheSizeLimit() throws {
        let entry = "<</Kids 4 0 R>>"
        let count = (CardArtValidator.maximumSize - 1_000) / entry.utf8.count
        let file = TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids 4 0 R >>",
            "<< /Type /Page /MediaBox [0 0 1536 969] >>",
            "[" + String(repeating: entry, count: count) + "]",
        ])
        try #require(file.bytes.count > CardArtValidator.maximumSize - 2_000 && file.bytes.count < CardArtValidator.maximumSize)
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfNoPage)
        #expect(error.message.contains("a /Kids entry that is not an indirect reference"))
    }

    /// Thousands of distinct `<< /Kids 4 0 R >>` objects sharing one `/Kids` array that lists them all:
    /// the old walk expanded the shared array once per node it reached (hundreds of megabytes).
    @Test func refusesNodesSharingOneKidsArrayAtTheSizeLimit() throws {
        var bodies = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids 4 0 R >>",
            "<< /Type /Page /MediaBox [0 0 1536 969] >>",
            "",
        ]
        // Per node: its object (about 65 bytes), its cross-reference entry (20) and its entry in
        // the array (11). Each names the root as its /Parent, so the walk reaches the sharing.
        let count = (CardArtValidator.maximumSize - 1_000) / 96
        var kids = "["
        for number in 5..<(5 + count) {
            bodies.append("<</Type /Pages /Parent 2 0 R /Kids 4 0 R>>")
            kids += "\(number) 0 R "
        }
        bodies[3] = kids + "]"
        let file = TestPDF.build(bodies)
        try #require(file.bytes.count > CardArtValidator.maximumSize / 2 && file.bytes.count < CardArtValidator.maximumSize)
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfNoPage)
        #expect(error.message.contains("share one /Kids array (object 4)"))
    }

    @Test func refusesAKidsArrayLongerThanTheFileHasObjects() throws {
        let file = TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [" + String(repeating: "3 0 R ", count: 2_000) + "] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] >>",
        ])
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfNoPage)
        #expect(error.message.contains("too large or malformed"))
    }

    @Test func acceptsATwoLevelPageTreeWithAnIndirectKidsArray() throws {
        let file = TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Pages /Parent 2 0 R /Kids 4 0 R /Count 1 /MediaBox [0 0 1536 969] >>",
            "[5 0 R]",
            "<< /Type /Page /Parent 3 0 R /Contents 6 0 R >>",
            TestPDF.stream(TestPDF.artwork),
        ])
        let info = try #require(acceptance(of: file.data))
        #expect(info.dimensions == .points(width: 1536, height: 969))
    }
}

// MARK: - PNG header fields and palette

@Suite("Card art: PNG header fields and palette")
struct CardArtPNGHeaderFieldTests {
    static let legalPairs: [(UInt8, UInt8)] = [
        (0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (2, 8), (2, 16), (3, 1), (3, 2), (3, 4), (3, 8), (4, 8), (4, 16), (6, 8), (6, 16),
    ]

    @Test(arguments: legalPairs)
    func acceptsEveryLegalColourTypeAndBitDepth(_ colourType: UInt8, _ bitDepth: UInt8) throws {
        let data = Data(TestPNG.bytes(width: 1536, height: 969, bitDepth: bitDepth, colourType: colourType))
        let info = try #require(acceptance(of: data))
        #expect(info.dimensions == .pixels(width: 1536, height: 969))
    }

    @Test func acceptsAnInterlacedPNG() throws {
        let data = Data(TestPNG.bytes(width: 1536, height: 969, bitDepth: 8, colourType: 2, interlaced: true))
        #expect(acceptance(of: data)?.format == .png)
    }

    @Test(arguments: [(UInt8(0), UInt8(3)), (0, 32), (2, 1), (2, 4), (3, 16), (4, 1), (4, 4), (6, 2), (6, 4)])
    func refusesABitDepthTheColourTypeDoesNotAllow(_ colourType: UInt8, _ bitDepth: UInt8) throws {
        let bytes = TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969, bitDepth: bitDepth, colourType: colourType)
            + TestPNG.idat(width: 1536, height: 969) + TestPNG.chunk("IEND", [])
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngInvalidHeader)
        #expect(error.message.hasPrefix("PNG's IHDR gives bit depth \(bitDepth) for colour type \(colourType) ("))
    }

    @Test(arguments: [UInt8(1), 5, 7, 255])
    func refusesAColourTypeThatDoesNotExist(_ colourType: UInt8) throws {
        let bytes = TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969, bitDepth: 8, colourType: colourType)
            + TestPNG.idat(width: 1536, height: 969) + TestPNG.chunk("IEND", [])
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngInvalidHeader)
        #expect(error.message == "PNG's IHDR gives colour type \(colourType), which does not exist (the colour types are 0, 2, 3, 4 and 6)")
    }

    @Test func refusesUnknownCompressionFilterAndInterlaceMethods() throws {
        func header(compression: UInt8 = 0, filter: UInt8 = 0, interlace: UInt8 = 0) -> Data {
            Data(TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969, compression: compression, filter: filter, interlace: interlace)
                + TestPNG.idat(width: 1536, height: 969) + TestPNG.chunk("IEND", []))
        }
        let compression = try #require(refusal(of: header(compression: 1)))
        #expect(compression.code == .pngInvalidHeader)
        #expect(compression.message == "PNG's IHDR gives compression method 1; the only one is 0 (deflate)")
        let filter = try #require(refusal(of: header(filter: 1)))
        #expect(filter.code == .pngInvalidHeader)
        #expect(filter.message == "PNG's IHDR gives filter method 1; the only one is 0 (adaptive filtering)")
        let interlace = try #require(refusal(of: header(interlace: 2)))
        #expect(interlace.code == .pngInvalidHeader)
        #expect(interlace.message == "PNG's IHDR gives interlace method 2; it must be 0 (none) or 1 (Adam7)")
    }

    private static let palette = TestPNG.chunk("PLTE", [0, 0, 0, 255, 255, 255])

    private static func indexed(_ before: [UInt8], _ after: [UInt8] = []) -> Data {
        let count = TestPNG.scanlineByteCount(width: 1536, height: 969, bitDepth: 1, colourType: 3, interlaced: false)
        return Data(TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969, bitDepth: 1, colourType: 3) + before
            + TestPNG.chunk("IDAT", TestPNG.zlibZeros(count)) + after + TestPNG.chunk("IEND", []))
    }

    @Test func refusesAnIndexedColourPNGWithoutAPaletteBeforeItsImageData() throws {
        let none = try #require(refusal(of: Self.indexed([])))
        #expect(none.code == .pngCorrupt)
        #expect(none.message == "PNG has colour type 3 (indexed-colour) but no PLTE chunk before its image data at byte 33")

        let late = try #require(refusal(of: Self.indexed([], Self.palette)))
        #expect(late.code == .pngCorrupt)
        #expect(late.message.contains("no PLTE chunk before its image data"))

        #expect(acceptance(of: Self.indexed(Self.palette)) != nil)
    }

    @Test func refusesAPaletteAfterTheImageDataOrTwice() throws {
        let rgb = TestPNG.bytes(width: 1536, height: 969, bitDepth: 8, colourType: 2)
        let iend = TestPNG.chunk("IEND", [])
        let afterData = try #require(refusal(of: Data(rgb.dropLast(iend.count) + Self.palette + iend)))
        #expect(afterData.code == .pngCorrupt)
        #expect(afterData.message.contains("comes after its image data"))

        let twice = try #require(refusal(of: Self.indexed(Self.palette + Self.palette)))
        #expect(twice.code == .pngCorrupt)
        #expect(twice.message.contains("second PLTE chunk"))
    }

    @Test(arguments: [0, 4, 5, 771])
    func refusesAPaletteOfImpossibleLength(_ length: Int) throws {
        let error = try #require(refusal(of: Self.indexed(TestPNG.chunk("PLTE", [UInt8](repeating: 7, count: length)))))
        #expect(error.code == .pngCorrupt)
        #expect(error.message.contains("holds \(length) bytes; a palette is 1 to 256 entries of 3 bytes"))
    }

    @Test(arguments: [UInt8(0), 4])
    func refusesAPaletteInAGreyscalePNG(_ colourType: UInt8) throws {
        let count = TestPNG.scanlineByteCount(width: 1536, height: 969, bitDepth: 8, colourType: colourType, interlaced: false)
        let bytes = TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969, bitDepth: 8, colourType: colourType) + Self.palette
            + TestPNG.chunk("IDAT", TestPNG.zlibZeros(count)) + TestPNG.chunk("IEND", [])
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngCorrupt)
        #expect(error.message.contains("PLTE chunk at byte 33, but its colour type \(colourType)"))
    }

    @Test func acceptsASuggestedPaletteInATruecolourPNG() throws {
        let count = TestPNG.scanlineByteCount(width: 1536, height: 969, bitDepth: 8, colourType: 6, interlaced: false)
        let bytes = TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969, bitDepth: 8, colourType: 6) + Self.palette
            + TestPNG.chunk("IDAT", TestPNG.zlibZeros(count)) + TestPNG.chunk("IEND", [])
        #expect(acceptance(of: Data(bytes))?.format == .png)
    }
}

// MARK: - PNG end

@Suite("Card art: PNG end")
struct CardArtPNGEndTests {
    @Test func refusesBytesAfterIEND() throws {
        let png = TestPNG.bytes(width: 1536, height: 969)
        let appended = Array("%PDF-1.4 anything at all".utf8)
        let error = try #require(refusal(of: Data(png + appended)))
        #expect(error.code == .pngTrailingData)
        #expect(error.message == "PNG has \(appended.count) bytes after its IEND chunk, which ends at byte \(png.count); the file must end there")

        let oneZero = try #require(refusal(of: Data(png + [0])))
        #expect(oneZero.code == .pngTrailingData)
        #expect(CardArtError.Code.pngTrailingData.rawValue == "png_trailing_data")
    }

    @Test func refusesAnIENDWithData() throws {
        let png = TestPNG.bytes(width: 1536, height: 969)
        let iend = TestPNG.chunk("IEND", [])
        let bytes = png.dropLast(iend.count) + TestPNG.chunk("IEND", [1, 2, 3])
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngCorrupt)
        #expect(error.message == "PNG's IEND chunk at byte \(png.count - iend.count) holds 3 bytes of data; it must be empty")
    }
}

// MARK: - PNG chunks and image data

@Suite("Card art: PNG chunks and the start of the image data")
struct CardArtPNGChunkTests {
    private static let header = TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969)
    private static let iend = TestPNG.chunk("IEND", [])
    /// The zlib stream of the default 1-bit greyscale image.
    private static let stream = Array(TestPNG.idat(width: 1536, height: 969).dropFirst(8).dropLast(4))

    @Test(arguments: ["CgBI", "ABCD", "IDAt", "IHDr"])
    func refusesAnUnknownCriticalChunk(_ type: String) throws {
        let bytes = Self.header + TestPNG.chunk(type, [0, 0, 0, 0]) + TestPNG.chunk("IDAT", Self.stream) + Self.iend
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngCorrupt)
        #expect(error.message.hasPrefix("PNG has an unknown critical chunk \(type) at byte 33; the only critical chunks are IHDR, PLTE, IDAT and IEND"))
    }

    @Test func acceptsUnknownAncillaryChunks() throws {
        let bytes = Self.header + TestPNG.chunk("abCd", [1, 2, 3]) + TestPNG.chunk("IDAT", Self.stream) + TestPNG.chunk("zzZz", []) + Self.iend
        #expect(acceptance(of: Data(bytes))?.format == .png)
    }

    @Test func refusesIDATChunksThatAreNotConsecutive() throws {
        let half = Self.stream.count / 2
        let split = Self.header + TestPNG.chunk("IDAT", Array(Self.stream[..<half])) + TestPNG.chunk("tEXt", Array("Title\0Card".utf8))
        let bytes = split + TestPNG.chunk("IDAT", Array(Self.stream[half...])) + Self.iend
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngCorrupt)
        #expect(error.message == "PNG has an IDAT chunk at byte \(split.count) after other chunks followed its image data; IDAT chunks must be consecutive")
    }

    @Test func acceptsImageDataSplitAcrossConsecutiveIDATChunksEvenInsideTheZlibHeader() throws {
        let bytes = Self.header + TestPNG.chunk("IDAT", []) + TestPNG.chunk("IDAT", [Self.stream[0]])
            + TestPNG.chunk("IDAT", Array(Self.stream.dropFirst())) + Self.iend
        #expect(acceptance(of: Data(bytes))?.format == .png)
    }

    @Test(arguments: [
        ([UInt8(0x78), 0x02], "starts with 78 02, which fails the zlib header check"),
        ([0x79, 0x18], "starts with a zlib header for compression method 9; PNG uses 8 (deflate)"),
        ([0x88, 0x1C], "starts with a zlib header for a window of 2^16 bytes; deflate allows at most 2^15"),
        ([0x78, 0x20], "starts with a zlib header asking for a preset dictionary, which PNG does not allow"),
    ])
    func refusesImageDataWithoutAValidZlibHeader(_ zlibHeader: [UInt8], _ problem: String) throws {
        let bytes = Self.header + TestPNG.chunk("IDAT", zlibHeader + Self.stream.dropFirst(2)) + Self.iend
        let error = try #require(refusal(of: Data(bytes)))
        #expect(error.code == .pngCorrupt)
        #expect(error.message == "PNG's image data (IDAT at byte 33) \(problem); the file is damaged")
    }

    @Test func refusesImageDataTooShortForAZlibHeader() throws {
        let error = try #require(refusal(of: Data(Self.header + TestPNG.chunk("IDAT", [0x78]) + Self.iend)))
        #expect(error.code == .pngCorrupt)
        #expect(error.message.contains("holds 1 byte, too few for a zlib stream"))
    }
}

// MARK: - PDF encryption

@Suite("Card art: encrypted PDFs")
struct CardArtPDFEncryptionTests {
    private static let bodies = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>",
        TestPDF.stream(TestPDF.artwork),
        "<< /Filter /Standard /V 2 /R 3 /Length 128 /O (owner-hash) /U (user-hash) /P -3904 >>",
    ]

    @Test func refusesAPDFWhoseTrailerHasEncrypt() throws {
        let file = TestPDF.build(Self.bodies, trailerEntries: " /Encrypt 5 0 R /ID [<0123456789ABCDEF> <0123456789ABCDEF>]")
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfEncrypted)
        #expect(error.message == "PDF is encrypted (its trailer has /Encrypt); save the card art without a password, permissions or other security")
        #expect(CardArtError.Code.pdfEncrypted.rawValue == "pdf_encrypted")
    }

    @Test func refusesAPDFWhoseCrossReferenceStreamHasEncrypt() throws {
        var data = TestPDF.withObjectStream().data
        let entry = try #require(data.range(of: Data("/Root 1 0 R /Length".utf8)))
        data.replaceSubrange(entry, with: Data("/Root 1 0 R /Encrypt << /Filter /Standard /V 1 /R 2 >> /Length".utf8))
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfEncrypted)
        #expect(error.message.hasPrefix("PDF is encrypted (its cross-reference stream has /Encrypt)"))
    }

    @Test func acceptsTheSameFileWithoutEncrypt() throws {
        let info = try #require(acceptance(of: TestPDF.build(Self.bodies).data))
        #expect(info.dimensions == .points(width: 1536, height: 969))
    }
}

// MARK: - PDF end of file

@Suite("Card art: what follows a PDF's last startxref")
struct CardArtPDFEndOfFileTests {
    /// `file` with `text` inserted just before its final `%%EOF`.
    private static func inserting(_ text: String, beforeEndOf file: TestPDF.File) throws -> Data {
        var data = file.data
        let marker = try #require(data.range(of: Data("%%EOF".utf8), options: .backwards))
        data.insert(contentsOf: Data(text.utf8), at: marker.lowerBound)
        return data
    }

    private static let landscapePage = "3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>\nendobj\n"

    @Test func refusesAnObjectBetweenTheLastStartxrefAndEOF() throws {
        let portrait = TestPDF.onePage(page: "/MediaBox [0 0 612 792]")
        let data = try Self.inserting(Self.landscapePage, beforeEndOf: portrait)
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfDataAfterStartXRef)
        let at = portrait.bytes.count - "%%EOF\n".utf8.count
        #expect(error.message == "PDF has data at byte \(at) after its last startxref and offset; only white space and comments (%%EOF) may follow them")
        #expect(CardArtError.Code.pdfDataAfterStartXRef.rawValue == "pdf_data_after_startxref")
    }

    @Test func refusesAnObjectAfterTheFinalEOF() throws {
        let portrait = TestPDF.onePage(page: "/MediaBox [0 0 612 792]")
        let error = try #require(refusal(of: portrait.data + Data(Self.landscapePage.utf8)))
        #expect(error.code == .pdfDataAfterStartXRef)
        #expect(error.message.hasPrefix("PDF has data at byte \(portrait.bytes.count) after its last startxref"))
    }

    @Test func refusesAStartxrefWithoutAnOffset() throws {
        // Bytes, not text: the header's binary comment would not survive a round trip through
        // String, and the cross-reference offsets would no longer match.
        let file = TestPDF.onePage().data
        let withoutOffset = try #require(file.range(of: Data("startxref\n".utf8), options: .backwards)).upperBound
        let data = file[..<withoutOffset] + Data("%%EOF\n".utf8)
        let error = try #require(refusal(of: Data(data)))
        #expect(error.code == .pdfDataAfterStartXRef)
        #expect(error.message == "PDF's last startxref is not followed by the byte offset of its cross-reference section")
    }

    @Test func refusesAStartxrefAfterTheLastEOF() throws {
        let file = TestPDF.onePage()
        let error = try #require(refusal(of: file.data + Data("startxref\n\(file.xrefOffset)\n".utf8)))
        #expect(error.code == .pdfTruncated)
        #expect(error.message == "PDF has no %%EOF marker after its last startxref; the file looks cut off")
    }

    @Test func acceptsWhiteSpaceAndCommentsAroundTheFinalEOF() throws {
        let data = try Self.inserting("% written by a tool\r\n\t ", beforeEndOf: TestPDF.onePage()) + Data("\n\0\0% trailing comment\n".utf8)
        #expect(acceptance(of: data)?.format == .pdf)
    }

    @Test func stillAcceptsAnIncrementalUpdateAfterAnEarlierEOF() throws {
        let updated = TestPDF.updatingPage(of: TestPDF.onePage(page: "/MediaBox [0 0 612 792]"), mediaBox: "[0 0 1536 969]")
        #expect(String(decoding: updated.bytes, as: UTF8.self).components(separatedBy: "%%EOF").count == 3)
        #expect(acceptance(of: updated.data)?.dimensions == .points(width: 1536, height: 969))
    }
}

// MARK: - PDF page size

@Suite("Card art: PDF page size limits")
struct CardArtPDFPageSizeTests {
    @Test(arguments: [
        ("[0 0 1536000 969000]", "PDF page's /MediaBox is 1536000×969000 points"),
        ("[0 0 0.1536 0.0969]", "PDF page's /MediaBox is 0.15×0.1 points"),
        ("[0 0 14400.5 9084.7]", "PDF page's /MediaBox is 14400.5×9084.7 points"),
        ("[0 0 4.6 2.9]", "PDF page's /MediaBox is 4.6×2.9 points"),
    ])
    func refusesPagesOutsideThreeTo14400Points(_ box: String, _ described: String) throws {
        let error = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox \(box)").data))
        #expect(error.code == .pdfPageSizeOutOfRange)
        #expect(error.message == "\(described); page sides must be between 3 and 14,400 points (ISO 32000-1, Annex C)")
        #expect(CardArtError.Code.pdfPageSizeOutOfRange.rawValue == "pdf_page_size_out_of_range")
    }

    @Test(arguments: ["[0 0 14400 9084.375]", "[0 0 4.7554 3]"])
    func acceptsPagesAtTheLimits(_ box: String) throws {
        #expect(acceptance(of: TestPDF.onePage(page: "/MediaBox \(box)").data)?.format == .pdf)
    }

    @Test func refusesAHugeMediaBoxEvenWithACropBoxOfTheRightSize() throws {
        let error = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 20000 20000] /CropBox [0 0 1536 969]").data))
        #expect(error.code == .pdfPageSizeOutOfRange)
        #expect(error.message.hasPrefix("PDF page's /MediaBox is 20000×20000 points"))
    }

    @Test func refusesATinyCropBox() throws {
        let error = try #require(refusal(of: TestPDF.onePage(page: "/MediaBox [0 0 1536 969] /CropBox [0 0 1.536 0.969]").data))
        #expect(error.code == .pdfPageSizeOutOfRange)
        #expect(error.message.hasPrefix("PDF page is 1.54×0.97 points"))
    }
}

// MARK: - PDF active content

@Suite("Card art: PDF active content")
struct CardArtPDFActiveContentTests {
    private static func file(catalog: String = "", page: String = "", extra: [String] = []) -> TestPDF.File {
        TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R \(catalog) >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R \(page) >>",
            TestPDF.stream(TestPDF.artwork),
        ] + extra)
    }

    @Test(arguments: ["/OpenAction << /S /GoTo /D [3 0 R /Fit] >>", "/OpenAction [3 0 R /Fit]", "/AcroForm << /Fields [] >>"])
    func acceptsAnOpeningViewAndAnEmptyForm(_ entry: String) throws {
        #expect(acceptance(of: Self.file(catalog: entry).data) != nil)
    }

    @Test func refusesObjectStreamsItCannotLookInto() throws {
        let error = try #require(refusal(of: Self.file(extra: ["<< /Type /ObjStm /N 1 /First 4 /Length 0 >>"]).data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("compressed object streams"))
    }

    @Test(arguments: [
        ("/OpenAction << /S /JavaScript /JS (app.alert(1)) >>", "its catalog has an /OpenAction action, run when the file opens"),
        ("/OpenAction 5 0 R", "its catalog has an /OpenAction action, run when the file opens"),
        ("/AA << /WC << /S /URI /URI (https://example.com) >> >>", "its catalog has /AA, actions run on document events"),
        ("/AcroForm << /Fields [5 0 R] >>", "its catalog has /AcroForm, an interactive form"),
        ("/OpenAction 9 0 R", "its catalog's /OpenAction is an object this check cannot find"),
        ("/Names 9 0 R", "its catalog's /Names is an object this check cannot find"),
        ("/Names << /JavaScript << /Names [] >> >>", "its catalog's /Names has /JavaScript, document scripts"),
        ("/Names 6 0 R", "its catalog's /Names has /EmbeddedFiles, attached files"),
    ])
    func refusesActiveContentInTheCatalog(_ entry: String, _ found: String) throws {
        // (Object 9 does not exist: in a real file it would sit in a compressed object stream.)
        let extra = ["<< /S /URI /URI (https://example.com) >>", "<< /EmbeddedFiles << /Names [(a.exe) 7 0 R] >> >>", "<< /Type /Filespec /F (a.exe) >>"]
        let error = try #require(refusal(of: Self.file(catalog: entry, extra: extra).data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message == "PDF has active content: \(found); card art must not carry actions, scripts, forms or attached files")
    }

    @Test func refusesAdditionalActionsOnThePage() throws {
        let error = try #require(refusal(of: Self.file(page: "/AA << /O << /S /URI /URI (https://example.com) >> >>").data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("its page has /AA, actions run on page events"))
    }

    @Test(arguments: ["Launch", "JavaScript"])
    func refusesLaunchAndJavaScriptActionsAnywhere(_ type: String) throws {
        let annotation = "<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /A << /S /\(type) /F (calc.exe) /JS (x) >> >>"
        let error = try #require(refusal(of: Self.file(page: "/Annots [5 0 R]", extra: [annotation]).data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("object 5 holds a /\(type) action"))
        #expect(CardArtError.Code.pdfActiveContent.rawValue == "pdf_active_content")
    }

    @Test func acceptsAnOpenActionDestinationAndALinkToAWebPage() throws {
        let link = "<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /A << /S /URI /URI (https://example.com) >> >>"
        let data = Self.file(catalog: "/OpenAction [3 0 R /Fit] /Names << /Dests 6 0 R >>", page: "/Annots [5 0 R]", extra: [link, "<< /Names [] >>"]).data
        #expect(acceptance(of: data)?.dimensions == .points(width: 1536, height: 969))
    }
}

// MARK: - PDF top-level structure

@Suite("Card art: PDF top-level structure")
struct CardArtPDFStructureTests {

    /// `file` with `text` inserted where `before` first occurs; also the byte offset of the insertion.
    private static func inserting(_ text: String, before: String, in file: TestPDF.File) throws -> (data: Data, at: Int) {
        var data = file.data
        let place = try #require(data.range(of: Data(before.utf8)))
        data.insert(contentsOf: Data(text.utf8), at: place.lowerBound)
        return (data, place.lowerBound)
    }

    /// The string opened in object 4 runs to the `)` of object 6, so the scan reads objects 5
    /// and 6 as part of it; a reader jumps to object 5 by the table and finds the action.
    /// Before the check the file was accepted.
    @Test func refusesAnObjectTheTableGivesWhereTheScanFoundNone() throws {
        let file = TestPDF.build(TestPDF.annotatedPage + ["<< /Length 0 /X (hidden", TestPDF.launchAnnotation, ") >>"])
        let object5 = try #require(file.data.range(of: Data("5 0 obj".utf8))).lowerBound
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF's cross-reference table gives object 5 at byte \(object5), where this check found no object 5"), "\(error.message)")
    }

    /// Object 4's /Length runs over its own `endstream` to object 6's, so the scan takes objects
    /// 5 and 6 for stream data; a reader jumps to object 5 by the table. Before the check the
    /// file was accepted.
    @Test func refusesAnObjectHiddenInStreamDataByAMisleadingLength() throws {
        let launch = TestPDF.launchAnnotation
        let empty = "<< /Length 0 >>\nstream\n\nendstream"
        let covered = TestPDF.artwork + "\nendstream\nendobj\n5 0 obj\n" + launch + "\nendobj\n6 0 obj\n<< /Length 0 >>\nstream\n"
        let file = TestPDF.build(TestPDF.annotatedPage + ["<< /Length \(covered.utf8.count) >>\nstream\n\(TestPDF.artwork)\nendstream", launch, empty])
        let object5 = try #require(file.data.range(of: Data("5 0 obj".utf8))).lowerBound
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF's cross-reference table gives object 5 at byte \(object5), where this check found no object 5"), "\(error.message)")
    }

    /// Without any cross-reference data a reader rebuilds the table from the `N G obj` headers
    /// and finds object 5 inside object 4's unterminated string. Before the header scan the file
    /// was accepted (the same went for a cross-reference stream, which this check does not decode).
    @Test func refusesAnObjectHeaderInsideAnotherObjectWithoutACrossReferenceTable() throws {
        let file = TestPDF.build(TestPDF.annotatedPage + ["<< /Length 0 /X (hidden", TestPDF.launchAnnotation, ") >>"]).data
        let table = try #require(file.range(of: Data("\nxref\n".utf8))).upperBound - "xref\n".utf8.count
        let data = file[..<table] + Data("%%EOF\n".utf8)
        let object5 = try #require(file.range(of: Data("5 0 obj".utf8))).lowerBound
        let error = try #require(refusal(of: Data(data)))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF has an object header (N G obj) at byte \(object5) that this check did not read as an object"), "\(error.message)")
    }

    /// Object 4's /Length runs over its own `endstream` to object 6's, so the scan skips
    /// object 5 as stream data. With a cross-reference stream (which this check does not
    /// decode) or no cross-reference data at all, a reader finds object 5 and its action: the
    /// header inside stream data is refused. Before the check both files were accepted.
    @Test(arguments: ["a cross-reference stream", "no cross-reference data"])
    func refusesAnObjectHiddenInStreamDataWhenAReaderMayGoByHeaders(_ index: String) throws {
        let launch = TestPDF.launchAnnotation
        let covered = TestPDF.artwork + "\nendstream\nendobj\n5 0 obj\n" + launch + "\nendobj\n6 0 obj\n<< /Length 0 >>\nstream\n"
        let bodies = TestPDF.annotatedPage + ["<< /Length \(covered.utf8.count) >>\nstream\n\(TestPDF.artwork)\nendstream", launch, "<< /Length 0 >>\nstream\n\nendstream"]
        let data: Data
        if index == "no cross-reference data" {
            let file = TestPDF.build(bodies).data
            let table = try #require(file.range(of: Data("\nxref\n".utf8))).upperBound - "xref\n".utf8.count
            data = file[..<table] + Data("%%EOF\n".utf8)
        } else {
            data = TestPDF.buildWithCrossReferenceStream(bodies).data
        }
        let object5 = try #require(data.range(of: Data("5 0 obj".utf8))).lowerBound
        let error = try #require(refusal(of: Data(data)))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF has an object header (N G obj) at byte \(object5 - data.startIndex) that this check did not read as an object"), "\(error.message)")
    }

    /// The same file with a truthful /Length is read whole: its action is found.
    @Test func theActionIsFoundInAFileWithACrossReferenceStreamWhenNothingHidesIt() throws {
        let data = TestPDF.buildWithCrossReferenceStream(TestPDF.annotatedPage + [TestPDF.stream(TestPDF.artwork), TestPDF.launchAnnotation]).data
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("object 5 holds a /Launch action"))
    }

    /// Object 4's unterminated string swallows object 5 in a file indexed by a cross-reference
    /// stream: its header is found.
    @Test func refusesAnObjectHiddenInAStringWhenTheFileHasACrossReferenceStream() throws {
        let data = TestPDF.buildWithCrossReferenceStream(TestPDF.annotatedPage + ["<< /Length 0 /X (hidden", TestPDF.launchAnnotation, ") >>"]).data
        let object5 = try #require(data.range(of: Data("5 0 obj".utf8))).lowerBound
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF has an object header (N G obj) at byte \(object5) that this check did not read as an object"), "\(error.message)")
    }

    /// Shapes that readers (poppler, MuPDF, pdf.js, PDFium, qpdf, pypdf) read otherwise than
    /// the check did, from a differential test of this stop: each was accepted as a landscape
    /// page before.
    private static func page(_ entries: String, pages: String = "/Kids [3 0 R] /Count 1", extra: [String] = []) -> Data {
        TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages \(pages) >>",
            "<< /Type /Page /Parent 2 0 R \(entries) /Resources << >> /Contents 4 0 R >>",
            TestPDF.stream(TestPDF.artwork),
        ] + extra).data
    }

    /// `/\u{212A}ids` (Kelvin sign) is another name than `/Kids` for every reader; Swift's
    /// String equality took them as one, and the check walked the landscape page 5.
    @Test func aLookAlikeNameIsAnotherName() throws {
        let data = Self.page("/MediaBox [0 0 612 792]", pages: "/Kids [3 0 R] /\u{212A}ids [5 0 R] /Count 1", extra: [
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Resources << >> /Contents 4 0 R >>",
        ])
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfNotLandscape, "\(error.message)")
    }

    /// Readers differ on which of two values for one key counts (pypdf and poppler the first).
    @Test func refusesADictionaryWithAKeyTwice() throws {
        let data = Self.page("/MediaBox [0 0 612 792] /MediaBox [0 0 1536 969]")
        let at = try #require(data.range(of: Data("3 0 obj".utf8))).lowerBound
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message == "PDF's object 3 at byte \(at) has a dictionary with the key /MediaBox twice; readers differ on which value they use")
    }

    /// Objects are read by number: a generation other than 0, in a reference or a definition,
    /// could make a reader (which matches generations) use another object.
    @Test func refusesGenerationsOtherThanZero() throws {
        let reference = Self.page("/MediaBox 5 7 R", extra: ["[0 0 1536 969]"])
        let at = try #require(reference.range(of: Data("3 0 obj".utf8))).lowerBound
        let error = try #require(refusal(of: reference))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message == "PDF's object 3 at byte \(at) refers to object 5 with generation 7 (5 7 R); this check reads generation 0 only (a reader matches generations)")

        var definition = TestPDF.onePage().data
        let header = try #require(definition.range(of: Data("3 0 obj".utf8)))
        definition.replaceSubrange(header, with: Data("3 1 obj".utf8))
        let refused = try #require(refusal(of: definition))
        #expect(refused.code == .pdfInvalidStructure)
        #expect(refused.message.hasPrefix("PDF defines object 3 with generation 1 at byte \(header.lowerBound)"), "\(refused.message)")
    }

    /// MuPDF and PDFium rotate by 90.5, pdf.js and pypdf by the string (90).
    @Test(arguments: ["90.5", "90.000001", "4294967386.0", "(90)", "[90]"])
    func refusesARotateThatIsNotAWholeNumber(_ rotate: String) throws {
        let error = try #require(refusal(of: Self.page("/MediaBox [0 0 1536 969] /Rotate \(rotate)")))
        #expect(error.code == .pdfRotated)
        #expect(error.message.hasPrefix("PDF page has a /Rotate that is not a whole number of degrees"), "\(error.message)")
    }

    /// poppler, MuPDF and PDFium report 2 pages for /Count 2.0; MuPDF 2 for a negative count.
    @Test(arguments: ["2.0", "-4294967294", "(1)"])
    func refusesAPageCountThatIsNotAWholeNumber(_ count: String) throws {
        let error = try #require(refusal(of: Self.page("/MediaBox [0 0 1536 969]", pages: "/Kids [3 0 R] /Count \(count)")))
        #expect(error.code == .pdfNoPage)
        #expect(error.message.hasPrefix("could not read the PDF's page box: its page tree's /Count is not a whole number"), "\(error.message)")
    }

    /// PDFium works in 32-bit floats and showed this page at 612×792.
    @Test func refusesABoxFarFromTheOrigin() throws {
        let error = try #require(refusal(of: Self.page("/MediaBox [1000000000000000 0 1000000000001536 969]")))
        #expect(error.code == .pdfPageSizeOutOfRange)
        #expect(error.message == "PDF page's /MediaBox has a corner beyond 14,400 points from the origin; readers that work in 32-bit numbers would show it at another size")
    }

    /// Page trees readers read differently, each accepted before: a page whose /Parent is an
    /// orphan node with a landscape box (poppler, pypdf and pdfminer inherit by the tree walk: a
    /// portrait page), a kid listed twice (pypdf and qpdf: 2 pages), a /Page with /Kids (PDFium
    /// shows the child), a root that is a /Page (MuPDF: no pages), a node of another type
    /// (qpdf counts it as a page).
    @Test(arguments: [
        ("off-tree parent", "does not name object 2, whose /Kids list it, as its /Parent"),
        ("kid twice", "lists object 3 more than once"),
        ("page with kids", "has a /Page (object 3) with /Kids"),
        ("root is a page", "its catalog's /Pages is a /Page object, not a /Pages node"),
        ("other type", "holds a /Pag object (object 5) where a /Page or /Pages node was expected"),
    ])
    func refusesPageTreesReadersReadDifferently(_ shape: String, _ reason: String) throws {
        let portraitRoot = "/Type /Pages /MediaBox [0 0 612 792]"
        let page = "<< /Type /Page /Parent 2 0 R /Resources << >> /Contents 4 0 R >>"
        let bodies: [String] = switch shape {
        case "off-tree parent": [
            "<< /Type /Catalog /Pages 2 0 R >>", "<< \(portraitRoot) /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 5 0 R /Resources << >> /Contents 4 0 R >>", TestPDF.stream(TestPDF.artwork),
            "<< /Type /Pages /MediaBox [0 0 1536 969] /Kids [] /Count 0 >>",
        ]
        case "kid twice": [
            "<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /MediaBox [0 0 1536 969] /Kids [3 0 R 3 0 R] /Count 1 >>",
            page, TestPDF.stream(TestPDF.artwork),
        ]
        case "page with kids": [
            "<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Kids [5 0 R] /Contents 4 0 R >>", TestPDF.stream(TestPDF.artwork),
            "<< /Type /Page /Parent 3 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        ]
        case "root is a page": [
            "<< /Type /Catalog /Pages 3 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /MediaBox [0 0 1536 969] /Resources << >> /Contents 4 0 R >>", TestPDF.stream(TestPDF.artwork),
        ]
        default: [
            "<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /MediaBox [0 0 1536 969] /Kids [3 0 R 5 0 R] /Count 1 >>",
            page, TestPDF.stream(TestPDF.artwork), "<< /Type /Pag /Parent 2 0 R /Contents 4 0 R >>",
        ]
        }
        let error = try #require(refusal(of: TestPDF.build(bodies).data))
        #expect(error.code == .pdfNoPage, "\(error.message)")
        #expect(error.message.contains(reason), "\(error.message)")
    }

    /// qpdf and pdfminer end a name at 0x0B (the page's /MediaBox then portrait), the check did
    /// not (an unknown key, the parent's landscape box inherited).
    @Test func refusesAControlByteInAName() throws {
        let data = Self.page("/MediaBox\u{0B}[0 0 969 1536]", pages: "/Kids [3 0 R] /Count 1 /MediaBox [0 0 1536 969]")
        let at = try #require(data.range(of: Data("3 0 obj".utf8))).lowerBound
        let byte = try #require(data.firstIndex(of: 0x0B))
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message == "PDF's object 3 at byte \(at) has a name with the control byte 0x0B at byte \(byte); readers differ on whether it ends the name")
    }

    /// A null entry is no entry: readers ignore a null /CropBox, and the media box is the page's.
    @Test func aNullCropBoxIsNoCropBox() throws {
        #expect(acceptance(of: Self.page("/MediaBox [0 0 1536 969] /CropBox null"))?.dimensions == .points(width: 1536, height: 969))
    }

    /// A file indexed by a cross-reference stream is refused, last (after what else is wrong):
    /// readers reach objects through it that the scan may not see (a header written with
    /// comments inside, say). Before, such a file with nothing else wrong was accepted.
    @Test func refusesAFileIndexedByACrossReferenceStream() throws {
        let data = TestPDF.buildWithCrossReferenceStream([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Resources << >> /Contents 4 0 R >>",
            TestPDF.stream(TestPDF.artwork),
        ]).data
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF indexes its objects with a cross-reference stream (PDF 1.5 compression), which this check does not decode"), "\(error.message)")
    }

    /// A linearized file (its first cross-reference table at the start, `startxref 0`) has
    /// tables: stream data is not searched for headers, and it is accepted.
    @Test func acceptsALinearizedFile() throws {
        let file = TestPDF.linearized()
        #expect(acceptance(of: file.data)?.dimensions == .points(width: 1536, height: 969))
    }

    @Test func aStrayByteAfterTheFinalEOFIsDataAfterStartxrefNamedInHex() throws {
        let file = TestPDF.onePage().data
        let error = try #require(refusal(of: file + Data([0x1A])))
        #expect(error.code == .pdfDataAfterStartXRef)
        #expect(error.message == "PDF has the byte 0x1A at byte \(file.count) after an earlier startxref and %%EOF, where only white space, comments or a complete incremental update may follow")
    }

    /// 40,000 entries pointing at the start of 400,000 spaces before object 3: each run of white
    /// space is walked once, not once per entry (a 3.8 MB file of this shape, 1.4 MB of spaces and
    /// 100,000 entries, was still being checked after 25 s when each entry walked the run). The
    /// file is valid.
    @Test(.timeLimit(.minutes(1))) func manyEntriesIntoOneRunOfWhiteSpaceAreCheckedInLinearTime() throws {
        var out = Array("%PDF-1.4\n".utf8)
        var offsets: [Int] = []
        let bodies = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>",
            TestPDF.stream(TestPDF.artwork),
        ]
        for (index, body) in bodies.enumerated() {
            offsets.append(out.count)
            if index == 2 { out += [UInt8](repeating: 0x20, count: 400_000) }
            out += Array("\(index + 1) 0 obj\n\(body)\nendobj\n".utf8)
        }
        let xrefOffset = out.count
        var tail = "xref\n0 5\n0000000000 65535 f \n" + offsets.map { "\(TestPDF.offset10($0)) 00000 n \n" }.joined()
        // A number is listed once per section: one section per entry.
        tail += String(repeating: "xref\n3 1\n\(TestPDF.offset10(offsets[2])) 00000 n \n", count: 40_000)
        tail += "trailer\n<< /Size 5 /Root 1 0 R >>\nstartxref\n\(xrefOffset)\n%%EOF\n"
        out += Array(tail.utf8)
        #expect(out.count < CardArtValidator.maximumSize)
        #expect(acceptance(of: Data(out)) != nil)
    }

    @Test func acceptsATableWhoseOffsetsPointAtTheLineBeforeAnObject() throws {
        // Some writers count the end of line before the object: white space is skipped.
        let file = TestPDF.onePage().data
        let offset = try #require(file.range(of: Data("3 0 obj".utf8))).lowerBound
        func pointing(at target: Int) throws -> Data {
            var data = file
            let entry = try #require(data.range(of: Data("\(TestPDF.offset10(offset)) 00000 n".utf8)))
            data.replaceSubrange(entry, with: Data("\(TestPDF.offset10(target)) 00000 n".utf8))
            return data
        }
        #expect(acceptance(of: try pointing(at: offset - 1)) != nil)
        // …but an offset inside the object is refused.
        #expect(refusal(of: try pointing(at: offset + 2))?.code == .pdfInvalidStructure)
    }

    @Test func theLaunchActionIsFoundWhenNothingHidesIt() throws {
        let error = try #require(refusal(of: TestPDF.launching.data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("object 5 holds a /Launch action"))
    }

    /// Before the fix an unbalanced "(" or a stray "stream" swallowed object 5 and the file was accepted.
    @Test(arguments: [
        ("(\n", "a string"),
        ("stream\n", "the keyword stream"),
        ("endobj\n", "the keyword endobj"),
        ("12\n", "the number 12"),
        ("<< /Type /Page >>\n", "a dictionary"),
        (")\n", "the byte \")\""),
    ])
    func refusesAnythingButObjectsBetweenObjects(_ junk: String, _ found: String) throws {
        let (data, at) = try Self.inserting(junk, before: "5 0 obj", in: TestPDF.launching)
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message == "PDF has \(found) at byte \(at) outside any object; only objects (N G obj … endobj), cross-reference sections, trailers, startxref and comments may stand there")
        #expect(CardArtError.Code.pdfInvalidStructure.rawValue == "pdf_invalid_structure")
    }

    /// A 16-digit real where an object should start was named in the message scaled to a
    /// millionth, past 64 bits: the check crashed (found by the card-art fuzz target).
    @Test func aHugeRealOutsideObjectsIsNamedNotACrash() throws {
        let error = try #require(refusal(of: Data("%PDF-1.4\n400077777777701.4\nxref\n375\n%%EOF\n".utf8)))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF has the number 400077777777701.4"), "\(error.message)")
    }

    @Test func refusesAnObjectNotClosedByEndobj() throws {
        var data = TestPDF.launching.data
        let end = try #require(data.range(of: Data(">>\nendobj\n4 0 obj".utf8)))
        data.replaceSubrange(end, with: Data(">>\n4 0 obj".utf8))
        let object3 = try #require(data.range(of: Data("3 0 obj".utf8))).lowerBound
        let next = try #require(data.range(of: Data("4 0 obj".utf8))).lowerBound
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message == "PDF's object 3 at byte \(object3) is not closed by endobj (found the number 4 at byte \(next))")
    }

    /// A viewer going by the cross-reference table shows the first (portrait) page; before the
    /// fix the validator read the second (landscape) one and accepted the file.
    @Test func refusesAnObjectNumberDefinedTwiceInOneRevision() throws {
        let portrait = TestPDF.onePage(page: "/MediaBox [0 0 612 792]")
        let second = "3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>\nendobj\n"
        let (data, at) = try Self.inserting(second, before: "xref\n", in: portrait)
        let first = try #require(data.range(of: Data("3 0 obj".utf8))).lowerBound
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message == "PDF defines object 3 twice in one revision (at bytes \(first) and \(at)); a reader following the cross-reference table could show the one not checked here")
    }

    @Test func refusesAnObjectNumberDefinedTwiceWithDifferentGenerations() throws {
        let second = "3 1 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>\nendobj\n"
        let (data, _) = try Self.inserting(second, before: "xref\n", in: TestPDF.onePage(page: "/MediaBox [0 0 612 792]"))
        #expect(refusal(of: data)?.code == .pdfInvalidStructure)
    }

    /// Before the fix the appended object and its own startxref passed, and its landscape page was read.
    @Test func refusesAnAppendedObjectWithAStartxrefButNoCrossReferenceSection() throws {
        let portrait = TestPDF.onePage(page: "/MediaBox [0 0 612 792]")
        let appended = "3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>\nendobj\n"
            + "startxref\n\(portrait.bytes.count)\n%%EOF\n"
        let error = try #require(refusal(of: portrait.data + Data(appended.utf8)))
        #expect(error.code == .pdfDataAfterStartXRef)
        #expect(error.message == "PDF has data at byte \(portrait.bytes.count) after an earlier startxref and %%EOF that is not a complete incremental update: it has no cross-reference section (xref and trailer, or a cross-reference stream) before its startxref")
    }

    @Test func refusesAnAppendedCrossReferenceSectionWithoutStartxref() throws {
        let portrait = TestPDF.onePage(page: "/MediaBox [0 0 612 792]")
        var data = TestPDF.updatingPage(of: portrait, mediaBox: "[0 0 1536 969]").data
        let last = try #require(data.range(of: Data("startxref".utf8), options: .backwards)).lowerBound
        let end = try #require(data.range(of: Data("%%EOF".utf8), options: .backwards)).lowerBound
        try #require(last > portrait.bytes.count)
        data.removeSubrange(last..<end)
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfDataAfterStartXRef)
        #expect(error.message.hasPrefix("PDF has data at byte \(portrait.bytes.count) after its last startxref and %%EOF that is not a complete incremental update"))
    }

    @Test func acceptsARedefinitionInALaterUpdateAndChecksEveryDefinition() throws {
        let link = "<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /A << /S /URI /URI (https://example.com) >> >>"
        let harmless = TestPDF.updating(TestPDF.onePage(), object: 3, body: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>", size: 5)
        #expect(acceptance(of: harmless.data)?.dimensions == .points(width: 1536, height: 969))

        // The update replaces the launching annotation; the definition it replaces is still checked.
        let replaced = TestPDF.updating(TestPDF.launching, object: 5, body: link, size: 6)
        let error = try #require(refusal(of: replaced.data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("object 5 holds a /Launch action"))
    }

    private static let landscapePage = "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Resources << >> /Contents 4 0 R >>"

    /// Where a test's update starts and ends.
    private struct Redefinition {
        /// The whole file.
        var data: Data
        /// Where the portrait page (object 3) is defined first, and then again as landscape.
        var older: Int
        var newer: Int
        /// Where the update's cross-reference section begins (its `xref`, or what precedes it).
        var table: Int
        /// The original file's cross-reference table.
        var base: Int
    }

    /// A portrait one-page file and an update defining its page (object 3) again as landscape,
    /// closed by what `section` returns (cross-reference section, trailer, `startxref`, `%%EOF`;
    /// given the offsets of ``Redefinition``, its `data` still empty).
    private static func redefiningThePage(_ section: (Redefinition) -> String) throws -> Redefinition {
        let base = TestPDF.onePage(page: "/MediaBox [0 0 612 792]")
        let older = try #require(base.data.range(of: Data("3 0 obj".utf8))).lowerBound
        var out = base.bytes
        let newer = out.count
        out += Array("3 0 obj\n\(Self.landscapePage)\nendobj\n".utf8)
        var update = Redefinition(data: Data(), older: older, newer: newer, table: out.count, base: base.xrefOffset)
        out += Array(section(update).utf8)
        update.data = Data(out)
        return update
    }

    /// The update redefines the page (object 3) as landscape, but its cross-reference section
    /// does not list object 3, lists it at the older offset, or marks it free: a reader following
    /// startxref and /Prev shows the portrait page (or none) while the check read the landscape
    /// one. Before the check all three files were accepted. Marked free, the page is read as a
    /// reader reads it: there is none.
    @Test(arguments: ["unlisted", "older offset", "free"])
    func refusesARedefinitionAReaderDoesNotUse(_ how: String) throws {
        let update = try Self.redefiningThePage { update in
            let entry = switch how {
            case "older offset": "3 1\n\(TestPDF.offset10(update.older)) 00000 n \n"
            case "free": "3 1\n0000000000 00001 f \n"
            default: ""
            }
            return "xref\n0 1\n0000000000 65535 f \n\(entry)trailer\n<< /Size 5 /Root 1 0 R /Prev \(update.base) >>\nstartxref\n\(update.table)\n%%EOF\n"
        }
        let (older, newer) = (update.older, update.newer)
        let error = try #require(refusal(of: update.data))
        if how == "free" {
            #expect(error.code == .pdfNoPage)
            #expect(error.message.hasPrefix("could not read the PDF's page box: its page tree refers to object 3, which the cross-reference sections a reader follows mark free or do not list"), "\(error.message)")
            return
        }
        #expect(error.code == .pdfInvalidStructure)
        // Unlisted in the update, object 3 is where the base's section (its /Prev) gives it.
        #expect(error.message == "PDF defines object 3 more than once (at bytes \(older), \(newer)), and the newest cross-reference section listing it gives byte \(older), so a reader shows that definition, not the latest one at byte \(newer) that this check reads; export the file again")
    }

    /// An update without /Prev whose section lists no object: a reader following it has no
    /// catalog, and neither does the check.
    @Test func aCatalogNoSectionAReaderFollowsListsIsNoCatalog() throws {
        let update = try Self.redefiningThePage { update in
            "xref\n0 1\n0000000000 65535 f \ntrailer\n<< /Size 5 /Root 1 0 R >>\nstartxref\n\(update.table)\n%%EOF\n"
        }
        let error = try #require(refusal(of: update.data))
        #expect(error.code == .pdfNoPage)
        #expect(error.message.hasPrefix("could not read the PDF's page box: its catalog (object 1) is marked free, or not listed, by the cross-reference sections a reader follows"), "\(error.message)")
    }

    /// A negative /Prev crashed the check (an index out of range) before offsets were bounded.
    @Test func aNegativePrevIsRefusedNotACrash() throws {
        let update = try Self.redefiningThePage { update in
            "xref\n0 1\n0000000000 65535 f \n3 1\n\(TestPDF.offset10(update.newer)) 00000 n \ntrailer\n<< /Size 5 /Root 1 0 R /Prev -1 >>\nstartxref\n\(update.table)\n%%EOF\n"
        }
        let error = try #require(refusal(of: update.data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF's /Prev gives byte -1, where this check found no cross-reference section"), "\(error.message)")
    }

    /// A reader looks for the last `startxref` in the bytes, comments included: after the update
    /// (landscape), a comment's `startxref` sends it to the portrait original. Before the check
    /// the file was accepted as landscape.
    @Test func refusesAStartxrefInACommentAfterTheLastOne() throws {
        let base = TestPDF.onePage(page: "/MediaBox [0 0 612 792]")
        var data = TestPDF.updating(base, object: 3, body: Self.landscapePage, size: 5).data
        let last = try #require(data.range(of: Data("startxref".utf8), options: .backwards)).lowerBound
        data += Data("%startxref \(base.xrefOffset)\n%%EOF\n".utf8)
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfInvalidStructure)
        let comment = try #require(data.range(of: Data("%startxref".utf8), options: .backwards)).lowerBound + 1
        #expect(error.message == "PDF has the text startxref at byte \(comment), in a comment after its last startxref at byte \(last); a reader looking for the last startxref from the file's end reads that one; export the file again")
    }

    /// A cross-reference stream inside another stream's data (a truthful /Length), reached by the
    /// trailer's /XRefStm or /Prev, points a reader at a hidden page with a script. Before the
    /// check both files were accepted as landscape.
    @Test(arguments: ["XRefStm", "Prev"])
    func refusesCrossReferenceDataInsideStreamData(_ key: String) throws {
        let base = TestPDF.onePage()
        var out = base.bytes
        let hiddenPage = "3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /AA << /O << /S /JavaScript /JS (app.alert(1)) >> >> >>\nendobj\n"
        let objectStart = out.count
        let head = "5 0 obj\n<< /Length 0000000000 >>\nstream\n"
        let hiddenPageAt = objectStart + head.utf8.count
        let streamAt = hiddenPageAt + hiddenPage.utf8.count
        let entry: [UInt8] = [1] + TestPNG.bigEndian(UInt32(hiddenPageAt)) + [0, 0]
        let hiddenStream = Array("6 0 obj\n<< /Type /XRef /Size 7 /Index [3 1] /W [1 4 2] /Length \(entry.count) >>\nstream\n".utf8) + entry + Array("\nendstream\nendobj\n".utf8)
        let data = Array(hiddenPage.utf8) + hiddenStream
        out += Array("5 0 obj\n<< /Length \(TestPDF.offset10(data.count)) >>\nstream\n".utf8) + data + Array("\nendstream\nendobj\n".utf8)
        let table = out.count
        // With /Prev, the update's /Prev leads into the stream data instead of to the original table.
        let pointers = key == "XRefStm" ? "/Prev \(base.xrefOffset) /XRefStm \(streamAt)" : "/Prev \(streamAt)"
        out += Array("xref\n0 1\n0000000000 65535 f \n5 1\n\(TestPDF.offset10(objectStart)) 00000 n \ntrailer\n<< /Size 7 /Root 1 0 R \(pointers) >>\nstartxref\n\(table)\n%%EOF\n".utf8)
        let error = try #require(refusal(of: Data(out)))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF's /\(key) gives byte \(streamAt), where this check found no cross-reference section"), "\(error.message)")
    }

    /// A reader reads the trailer right after a table; a second one named another /Prev. Before
    /// the check the file was accepted as landscape while readers showed the portrait page.
    @Test func refusesASecondTrailerForOneSection() throws {
        let base = TestPDF.onePage(page: "/MediaBox [0 0 612 792]")
        let update = TestPDF.updating(base, object: 3, body: Self.landscapePage, size: 5)
        var out = update.bytes
        let table = out.count
        out += Array("xref\n0 1\n0000000000 65535 f \ntrailer\n<< /Size 5 /Root 1 0 R /Prev \(base.xrefOffset) >>\n".utf8)
        let second = out.count
        out += Array("trailer\n<< /Size 5 /Root 1 0 R /Prev \(update.xrefOffset) >>\nstartxref\n\(table)\n%%EOF\n".utf8)
        let error = try #require(refusal(of: Data(out)))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message == "PDF has a second trailer at byte \(second) for the cross-reference section at byte \(table); a reader reads only the first")
    }

    /// `startxref` may point at a comment before its table (readers skip it): the table is
    /// followed, and its entry for the redefined page gives the older, portrait one. Before, the
    /// sections were not followed and the file was accepted as landscape.
    @Test func aStartxrefPointingAtACommentBeforeItsTableIsFollowed() throws {
        let update = try Self.redefiningThePage { update in
            "%a comment\nxref\n0 1\n0000000000 65535 f \n3 1\n\(TestPDF.offset10(update.older)) 00000 n \ntrailer\n<< /Size 5 /Root 1 0 R /Prev \(update.base) >>\nstartxref\n\(update.table)\n%%EOF\n"
        }
        let error = try #require(refusal(of: update.data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.contains("the newest cross-reference section listing it gives byte \(update.older)"), "\(error.message)")
    }

    @Test func refusesAStartxrefThatLeadsToNoSection() throws {
        var data = TestPDF.onePage().data
        let xref = try #require(data.range(of: Data("\nxref\n".utf8))).lowerBound + 1
        let last = try #require(data.range(of: Data("startxref\n\(xref)".utf8), options: .backwards))
        data.replaceSubrange(last, with: Data("startxref\n\(xref - 20)".utf8))
        let error = try #require(refusal(of: data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF's startxref gives byte \(xref - 20), where this check found no cross-reference section"), "\(error.message)")
    }

    /// Readers differ on which of two entries for one number in a section counts (the first, or
    /// the last as PDFium keeps it).
    @Test func refusesAnObjectListedTwiceInOneSection() throws {
        let update = try Self.redefiningThePage { update in
            "xref\n0 1\n0000000000 65535 f \n3 1\n\(TestPDF.offset10(update.newer)) 00000 n \n3 1\n\(TestPDF.offset10(update.older)) 00000 n \ntrailer\n<< /Size 5 /Root 1 0 R /Prev \(update.base) >>\nstartxref\n\(update.table)\n%%EOF\n"
        }
        let error = try #require(refusal(of: update.data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message == "PDF's cross-reference section at byte \(update.table) lists object 3 twice; readers differ on which entry they use")
    }

    /// The page's /MediaBox is object 5, which the table marks free: a reader has no media box
    /// there (qpdf and pdf.js fall back to letter). Before, the check read object 5 and accepted
    /// the file.
    @Test func aMediaBoxTheTableMarksFreeIsNotRead() throws {
        var file = TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox 5 0 R /Resources << >> /Contents 4 0 R >>",
            TestPDF.stream(TestPDF.artwork),
            "[0 0 1536 969]",
        ])
        let offset = try #require(file.data.range(of: Data("5 0 obj".utf8))).lowerBound
        let entry = Array("\(TestPDF.offset10(offset)) 00000 n ".utf8)
        let at = try #require(file.data.range(of: Data(entry))).lowerBound
        file.bytes.replaceSubrange(at..<(at + entry.count), with: Array("0000000000 00001 f ".utf8))
        let error = try #require(refusal(of: file.data))
        #expect(error.code == .pdfNoPageBox, "\(error.message)")
        #expect(error.message == "could not read the PDF's page box: its /MediaBox is object 5, which the cross-reference sections a reader follows mark free or do not list, so a reader has no such box; export the file again")
    }

    /// With a cross-reference stream (not decoded here) which definition a reader uses cannot be
    /// told: a redefinition is refused, saying so.
    @Test func refusesARedefinitionInAFileWithACrossReferenceStream() throws {
        let base = TestPDF.buildWithCrossReferenceStream([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << >> /Contents 4 0 R >>",
            TestPDF.stream(TestPDF.artwork),
        ])
        let update = TestPDF.updating(base, object: 3, body: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Resources << >> /Contents 4 0 R >>", size: 6)
        let error = try #require(refusal(of: update.data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.contains("indexes its objects with a cross-reference stream, which this check does not decode"), "\(error.message)")
    }

    /// Updates on updates: the newest section wins over the ones its /Prev chain leads to.
    @Test func acceptsARedefinitionListedByTheNewestOfSeveralUpdates() throws {
        let portrait = "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << >> /Contents 4 0 R >>"
        let landscape = "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Resources << >> /Contents 4 0 R >>"
        let once = TestPDF.updating(TestPDF.onePage(), object: 3, body: portrait, size: 5)
        let twice = TestPDF.updating(once, object: 3, body: landscape, size: 5)
        #expect(acceptance(of: twice.data)?.dimensions == .points(width: 1536, height: 969))
        let back = TestPDF.updating(twice, object: 3, body: portrait, size: 5)
        #expect(refusal(of: back.data)?.code == .pdfNotLandscape)
    }

    @Test func refusesTwoDefinitionsInsideOneUpdate() throws {
        let base = TestPDF.onePage()
        let page = "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R >>"
        var update = TestPDF.updating(base, object: 3, body: page, size: 5)
        let twice = "3 0 obj\n\(page)\nendobj\n"
        update.bytes.insert(contentsOf: Array(twice.utf8), at: base.bytes.count)
        let error = try #require(refusal(of: update.data))
        #expect(error.code == .pdfInvalidStructure)
        #expect(error.message.hasPrefix("PDF defines object 3 twice in one revision (at bytes \(base.bytes.count) and \(base.bytes.count + twice.utf8.count))"))
    }
}

// MARK: - PDF actions

@Suite("Card art: PDF actions and scripts")
struct CardArtPDFActionTests {
    private static func file(annotation: String) -> TestPDF.File {
        TestPDF.build([
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 1536 969] /Contents 4 0 R /Annots [5 0 R] >>",
            TestPDF.stream(TestPDF.artwork),
            annotation,
        ])
    }

    @Test(arguments: ["SubmitForm", "ImportData", "GoToR", "GoToE", "RichMediaExecute", "Launch", "JavaScript"])
    func refusesActionsThatReachOutsideTheFile(_ type: String) throws {
        let annotation = "<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /A << /S /\(type) /F (other.pdf) >> >>"
        let error = try #require(refusal(of: Self.file(annotation: annotation).data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message == "PDF has active content: object 5 holds a /\(type) action; card art must not carry actions, scripts, forms or attached files")
    }

    @Test func refusesARenditionActionCarryingJavaScript() throws {
        let annotation = "<< /Type /Annot /Subtype /Screen /Rect [0 0 100 100] /A << /S /Rendition /OP 0 /JS (app.alert(1)) >> >>"
        let error = try #require(refusal(of: Self.file(annotation: annotation).data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("object 5 holds a /Rendition action with /JS (JavaScript)"))
    }

    @Test(arguments: ["<< /Type /Annot /Subtype /Widget /Rect [0 0 1 1] /JS (x) >>", "<< /Next [<< /J#53 (x) >>] >>"])
    func refusesAJSEntryAnywhere(_ annotation: String) throws {
        let error = try #require(refusal(of: Self.file(annotation: annotation).data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("object 5 holds a /JS entry (JavaScript)"))
    }

    /// Annotations and actions the differential test found readers act on (pdf.js, PDFium,
    /// poppler list the attachment, render the field, play the media): each was accepted.
    @Test(arguments: [
        ("<< /Type /Annot /Subtype /FileAttachment /Rect [0 0 10 10] /FS << /Type /Filespec /F (run.bat) >> >>", "a /FileAttachment annotation"),
        ("<< /Type /Annot /Subtype /Widget /Rect [0 0 10 10] /FT /Tx /T (f) >>", "a /Widget annotation"),
        ("<< /Type /Annot /Subtype /Screen /Rect [0 0 10 10] >>", "a /Screen annotation"),
        ("<< /Type /Annot /Subtype /RichMedia /Rect [0 0 10 10] >>", "a /RichMedia annotation"),
        ("<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /A << /S /Sound /Sound 6 0 R >> >>", "a /Sound action"),
        ("<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /A << /S /Rendition /OP 0 >> >>", "a /Rendition action"),
        ("<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /AA << /E << /S /URI /URI (https://example.com) >> >> >>", "an /AA entry (actions run on events)"),
        ("<< /Type /Filespec /F (a.txt) /EF << /F 6 0 R >> >>", "an /EF entry (an embedded file)"),
        ("<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /A << /S /URI /URI (javascript:app.alert\\(1\\)) >> >>", "a /URI action to a javascript: address"),
        ("<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /A << /S /URI /URI ( \\tJava\\nScript:x) >> >>", "a /URI action to a javascript: address"),
        ("<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /A << /S /URI /URI <6A6176617363726970743A78> >> >>", "a /URI action to a javascript: address"),
        ("<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /A << /S /URI /URI (\\152avascript:x) >> >>", "a /URI action to a javascript: address"),
        ("<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /A << /S /URI /URI (file:///etc/passwd) >> >>", "a /URI action to a file: address"),
        ("<< /Type /Annot /Subtype /Link /Rect [0 0 10 10] /A << /S /URI /URI 6 0 R >> >>", "a /URI action whose address is not a string in the action itself"),
    ])
    func refusesAttachmentsFormsMediaAndScriptAddresses(_ annotation: String, _ found: String) throws {
        let error = try #require(refusal(of: Self.file(annotation: annotation).data))
        #expect(error.code == .pdfActiveContent)
        #expect(error.message.contains("object 5 holds \(found)"), "\(error.message)")
    }

    @Test func stillAcceptsALinkToAWebPage() throws {
        let annotation = "<< /Type /Annot /Subtype /Link /Rect [0 0 100 100] /A << /S /URI /URI (https://example.com) >> >>"
        #expect(acceptance(of: Self.file(annotation: annotation).data)?.format == .pdf)
    }
}

// MARK: - PNG animation and palette size

@Suite("Card art: PNG animation and palette size")
struct CardArtPNGAnimationAndPaletteTests {
    private static let header = TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969)
    private static let image = TestPNG.idat(width: 1536, height: 969)
    private static let iend = TestPNG.chunk("IEND", [])
    /// `acTL`: two frames, played forever.
    private static let animationControl = TestPNG.chunk("acTL", TestPNG.bigEndian(2) + TestPNG.bigEndian(0))

    @Test func refusesAnAnimatedPNG() throws {
        let error = try #require(refusal(of: Data(Self.header + Self.animationControl + Self.image + Self.iend)))
        #expect(error.code == .pngAnimated)
        #expect(error.message == "PNG has an acTL chunk at byte 33, so it is an animated PNG (APNG); card art must be a still image")
        #expect(CardArtError.Code.pngAnimated.rawValue == "png_animated")
    }

    @Test func refusesAnAnimationControlChunkAfterTheImageDataToo() throws {
        let error = try #require(refusal(of: Data(Self.header + Self.image + Self.animationControl + Self.iend)))
        #expect(error.code == .pngAnimated)
        #expect(error.message.hasPrefix("PNG has an acTL chunk at byte \(Self.header.count + Self.image.count)"))
    }

    private static func indexed(bitDepth: UInt8, entries: Int) -> Data {
        let count = TestPNG.scanlineByteCount(width: 1536, height: 969, bitDepth: bitDepth, colourType: 3, interlaced: false)
        return Data(TestPNG.signature + TestPNG.ihdr(width: 1536, height: 969, bitDepth: bitDepth, colourType: 3)
            + TestPNG.chunk("PLTE", [UInt8](repeating: 0x80, count: entries * 3))
            + TestPNG.chunk("IDAT", TestPNG.zlibZeros(count)) + Self.iend)
    }

    @Test(arguments: [(UInt8(1), 3), (2, 5), (4, 17)])
    func refusesAPaletteLargerThanTheBitDepthCanIndex(_ bitDepth: UInt8, _ entries: Int) throws {
        let error = try #require(refusal(of: Self.indexed(bitDepth: bitDepth, entries: entries)))
        #expect(error.code == .pngCorrupt)
        #expect(error.message == "PNG's PLTE chunk at byte 33 holds \(entries) entries; bit depth \(bitDepth) indexes at most \(1 << Int(bitDepth))")
    }

    @Test(arguments: [(UInt8(1), 2), (2, 4), (4, 16), (8, 256), (1, 1)])
    func acceptsAPaletteTheBitDepthCanIndex(_ bitDepth: UInt8, _ entries: Int) {
        #expect(acceptance(of: Self.indexed(bitDepth: bitDepth, entries: entries))?.format == .png)
    }
}
