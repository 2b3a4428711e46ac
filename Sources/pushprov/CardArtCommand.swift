import ArgumentParser
import Foundation
import ProvisioningDemo
import ProvisioningModels

/// `pushprov card-art`: card-art tools.
struct CardArtCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "card-art",
        abstract: "Card-art tools.",
        subcommands: [CardArtCheckCommand.self, CardArtSampleCommand.self]
    )
}

/// `pushprov card-art sample <file>`: writes placeholder art that meets Apple's rules, to try
/// the card-art upload and the SDK's art with before the issuer's own art exists.
struct CardArtSampleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sample",
        abstract: "Write a placeholder card art PNG (1536×969, two flat bands) that passes `card-art check`.",
        discussion: "An existing file is never overwritten."
    )

    @Argument(help: ArgumentHelp("Where to write the PNG.", valueName: "file"))
    var file: String

    func run() async throws {
        guard !file.isEmpty else { throw CLIError("give the path of the PNG to write") }
        let png = DemoArt.png()
        // Written whole beside the target, then linked to its name: link() never replaces a
        // file (or a link) already there, and the name never holds half a file.
        let url = URL(fileURLWithPath: file)
        // Named apart from the target's name, so a name near the 255-byte limit still fits.
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".pushprov-card-art-\(UUID().uuidString).tmp").path
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw CLIError("cannot write \(file): \(String(cString: strerror(errno)))") }
        defer { unlink(temporary) }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: png)
            try handle.close()
        } catch {
            throw CLIError("cannot write \(file): \(error.localizedDescription)")
        }
        guard link(temporary, file) == 0 else {
            let reason = errno == EEXIST ? "it already exists; choose another name or remove it" : String(cString: strerror(errno))
            throw CLIError("cannot write \(file): \(reason)")
        }
        print("\(file): PNG, 1536×969 pixels, \(png.count) bytes (placeholder card art)")
    }
}

/// `pushprov card-art check <file>…`: Apple's card-art rules, as the server's upload and the
/// SDK apply them, on files.
struct CardArtCheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check card art against Apple's rules (1536×969 PNG or landscape PDF of that aspect, under 4 MB).",
        discussion: """
            Prints one line per file: "ok" with the format and size, or "refused" with a stable \
            reason code and a message naming what is wrong. Exit status 0 only when every file \
            is acceptable.
            """
    )

    @Argument(help: ArgumentHelp("Card-art files (PNG or PDF).", valueName: "file"))
    var files: [String]

    func run() async throws {
        guard !files.isEmpty else { throw CLIError("name at least one card-art file") }
        var refused = 0
        for path in files {
            switch Self.check(path) {
            case .success(let info):
                print("\(path): ok: \(Self.describe(info))")
            case .failure(let error):
                refused += 1
                print("\(path): refused: \(error.code.rawValue): \(error.message)")
            }
        }
        if refused > 0 { throw ExitCode(1) }
    }

    /// Refuses a file over the limit from its size alone, without loading it, and anything but
    /// a regular file (``BoundedFile``); validates the rest.
    static func check(_ path: String) -> Result<CardArtInfo, CardArtError> {
        switch BoundedFile.read(path, limit: CardArtValidator.maximumSize) {
        case .success(let data):
            return CardArtValidator.validate(data)
        case .failure(.cannotOpen):
            return .failure(unreadable("cannot open the file"))
        case .failure(.cannotRead), .failure(.writableByOthers), .failure(.foreignOwner):
            // (Read unguarded: the last two do not come.)
            return .failure(unreadable("cannot read the file"))
        case .failure(.notRegular(let kind)):
            return .failure(unreadable("not a regular file (\(kind)); name the card-art file itself"))
        case .failure(.tooLarge(let size, _)):
            return .failure(CardArtError(
                code: .tooLarge,
                message: "file is \(size) bytes; Apple requires under 4 MB (less than \(CardArtValidator.maximumSize) bytes)"
            ))
        }
    }

    private static func unreadable(_ message: String) -> CardArtError {
        CardArtError(code: CardArtError.Code(rawValue: "unreadable"), message: message)
    }

    static func describe(_ info: CardArtInfo) -> String {
        let size: String = switch info.dimensions {
        case .pixels(let width, let height): "\(width)×\(height) pixels"
        case .points(let width, let height): String(format: "%.1f×%.1f points", width, height)
        }
        return "\(info.format.rawValue.uppercased()), \(size), \(info.byteCount) bytes"
    }
}
