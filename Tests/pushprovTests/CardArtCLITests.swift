import Foundation
import TestSupport
import Testing

@Suite("pushprov card-art check", .serialized)
struct CardArtCLITests {
    @Test func acceptsAppleSizedPNGAndPDF() async throws {
        let png = try CLI.temporaryFile(TestPNG.file(width: 1536, height: 969))
        defer { try? FileManager.default.removeItem(atPath: png) }
        let pdf = try CLI.temporaryFile(TestPDF.onePage(page: "/MediaBox [0 0 768 484.5]").data)
        defer { try? FileManager.default.removeItem(atPath: pdf) }
        let result = try await CLI.run(["card-art", "check", png, pdf])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("\(png): ok: PNG, 1536×969 pixels, "))
        #expect(result.stdout.contains("\(pdf): ok: PDF, 768.0×484.5 points, "))
    }

    @Test func refusesWithTheCodeAndWhatIsWrongForEachFile() async throws {
        let good = try CLI.temporaryFile(TestPNG.file(width: 1536, height: 969))
        defer { try? FileManager.default.removeItem(atPath: good) }
        let small = try CLI.temporaryFile(TestPNG.file(width: 1024, height: 768))
        defer { try? FileManager.default.removeItem(atPath: small) }
        let portrait = try CLI.temporaryFile(TestPDF.onePage(page: "/MediaBox [0 0 969 1536]").data)
        defer { try? FileManager.default.removeItem(atPath: portrait) }
        let jpeg = try CLI.temporaryFile(Data([0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10]))
        defer { try? FileManager.default.removeItem(atPath: jpeg) }
        let result = try await CLI.run(["card-art", "check", good, small, portrait, jpeg, "/nonexistent/art.png"])
        #expect(result.status == 1)
        #expect(result.stdout.contains("\(good): ok: "))
        #expect(result.stdout.contains("\(small): refused: png_wrong_size: "))
        #expect(result.stdout.contains("1024×768"))
        #expect(result.stdout.contains("\(portrait): refused: pdf_not_landscape: "))
        #expect(result.stdout.contains("\(jpeg): refused: unknown_format: "))
        #expect(result.stdout.contains("/nonexistent/art.png: refused: unreadable: cannot open the file"))
    }

    @Test func refusesAFileOfFourMegabytesWithoutReadingItAll() async throws {
        let big = try CLI.temporaryFile(TestPDF.onePage(exactSize: 8 * 1024 * 1024).data)
        defer { try? FileManager.default.removeItem(atPath: big) }
        let result = try await CLI.run(["card-art", "check", big])
        #expect(result.status == 1)
        #expect(result.stdout.contains("refused: too_large: file is 8388608 bytes; "))
    }

    /// The size that counts is the file's, not a symbolic link's to it (a few bytes): a link to
    /// a file over the limit is refused from that file's size, as the file itself is.
    @Test func aLinkToAFileOverTheLimitIsRefusedFromTheFilesSize() async throws {
        let big = try CLI.temporaryFile(TestPDF.onePage(exactSize: 8 * 1024 * 1024).data)
        defer { try? FileManager.default.removeItem(atPath: big) }
        let link = big + ".link.pdf"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: big)
        defer { try? FileManager.default.removeItem(atPath: link) }
        let result = try await CLI.run(["card-art", "check", link])
        #expect(result.status == 1)
        #expect(result.stdout == "\(link): refused: too_large: file is 8388608 bytes; Apple requires under 4 MB (less than 4000000 bytes)\n", "\(result.stdout)")
    }

    /// A FIFO (or a directory) is refused at once in one line, rather than waited on for a writer.
    @Test func aFIFOOrADirectoryIsRefusedWithoutWaiting() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-fifo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("art.png").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let result = try await CLI.run(["card-art", "check", fifo, directory.path], timeout: .seconds(20))
        #expect(result.status == 1)
        #expect(result.stdout == """
            \(fifo): refused: unreadable: not a regular file (a FIFO); name the card-art file itself
            \(directory.path): refused: unreadable: not a regular file (a directory); name the card-art file itself

            """, "\(result.stdout)")
    }

    @Test func aSampleIsWrittenThatPassesTheCheckAndNothingIsOverwritten() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-sample-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("art.png").path
        let written = try await CLI.run(["card-art", "sample", path])
        #expect(written.status == 0, "\(written.stderr)")
        #expect(written.stdout.hasPrefix("\(path): PNG, 1536×969 pixels, "))
        let checked = try await CLI.run(["card-art", "check", path])
        #expect(checked.status == 0)
        #expect(checked.stdout.contains("\(path): ok: PNG, 1536×969 pixels, "))
        // A file already there is left as it is.
        let mine = directory.appendingPathComponent("mine.png").path
        try Data("my own art".utf8).write(to: URL(fileURLWithPath: mine))
        let refused = try await CLI.run(["card-art", "sample", mine])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("cannot write \(mine): it already exists"), "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: mine)) == Data("my own art".utf8))
        // Nor is a link in its place followed, and nothing is left beside the files.
        let link = directory.appendingPathComponent("link.png").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: directory.appendingPathComponent("elsewhere.png").path)
        #expect(try await CLI.run(["card-art", "sample", link]).status != 0)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("elsewhere.png").path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["art.png", "link.png", "mine.png"])
        // A name of 255 bytes, the most a file name may have, is written (the temporary file
        // beside it is named apart); an empty path is refused in one line.
        let longest = String(repeating: "a", count: 251) + ".png"
        let long = try await CLI.run(["card-art", "sample", directory.appendingPathComponent(longest).path])
        #expect(long.status == 0, "\(long.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent(longest).path))
        let empty = try await CLI.run(["card-art", "sample", ""])
        #expect(empty.status != 0 && empty.stderr.contains("give the path of the PNG to write"), "\(empty.stderr)")
    }

    @Test func needsAtLeastOneFile() async throws {
        let result = try await CLI.run(["card-art", "check"])
        #expect(result.status == 64)  // EX_USAGE
        #expect(result.stderr.contains("Missing expected argument '<file> ...'"), "\(result.stderr)")
    }
}
