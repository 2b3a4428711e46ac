import ArgumentParser
import Foundation
import ProvisioningModels

/// `pushprov card-art`: card-art tools.
struct CardArtCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "card-art",
        abstract: "Card-art tools.",
        subcommands: [CardArtCheckCommand.self]
    )
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

    /// Refuses a file over the limit from its size alone, without loading it.
    static func check(_ path: String) -> Result<CardArtInfo, CardArtError> {
        if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int, size >= CardArtValidator.maximumSize {
            return .failure(CardArtError(
                code: .tooLarge,
                message: "file is \(size) bytes; Apple requires under 4 MB (less than \(CardArtValidator.maximumSize) bytes)"
            ))
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            return .failure(CardArtError(code: CardArtError.Code(rawValue: "unreadable"), message: "cannot open the file"))
        }
        defer { try? handle.close() }
        let data: Data
        do {
            data = try handle.read(upToCount: CardArtValidator.maximumSize + 1) ?? Data()
        } catch {
            return .failure(CardArtError(code: CardArtError.Code(rawValue: "unreadable"), message: "cannot read the file"))
        }
        return CardArtValidator.validate(data)
    }

    static func describe(_ info: CardArtInfo) -> String {
        let size: String = switch info.dimensions {
        case .pixels(let width, let height): "\(width)×\(height) pixels"
        case .points(let width, let height): String(format: "%.1f×%.1f points", width, height)
        }
        return "\(info.format.rawValue.uppercased()), \(size), \(info.byteCount) bytes"
    }
}
