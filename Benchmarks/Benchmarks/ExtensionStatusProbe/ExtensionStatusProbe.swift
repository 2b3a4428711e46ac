import Foundation
import ProvisioningModels
import ProvisioningSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// One Wallet `status` answer per process, as Wallet gets it from a freshly launched
// extension: a cold runtime and, on Linux, the snapshot and session files evicted from the
// page cache first. Prints its own elapsed time; extension-status.sh runs it many times.
// The timed part is what the handler runs on the main thread: make `WalletExtension`, read
// the passes, `status(passLibraryAvailable:passes:)`; no task, no thread hop.
//
//   ExtensionStatusProbe prepare <folder> <cards>   writes a snapshot of <cards> cards and a session
//   ExtensionStatusProbe status <folder> <cards>    times WalletExtension.status() (files to answer)
//   ExtensionStatusProbe read <folder>              baseline: times reading the same two files' bytes

/// The device's passes, in memory: a quarter of the cards on the iPhone, a quarter on the Watch.
struct ProbePassLibrary: PassLibrary {
    let passes: [WalletPass]
    func isPassLibraryAvailable() async -> Bool { true }
    func secureElementPasses() async -> [WalletPass] { passes }
    func canAddSecureElementPass(primaryAccountIdentifier: String) async -> Bool { true }

    static func passes(cards: Int) -> [WalletPass] {
        (0..<cards).compactMap { index in
            guard index % 4 < 2 else { return nil }
            return WalletPass(serialNumber: "S\(index)", deviceAccountIdentifier: "DAPL\(index)", primaryAccountIdentifier: "PAI\(index)", primaryAccountNumberSuffix: last4(index), activationState: .activated, device: index % 4 == 0 ? .phone : .watch)
        }
    }

    static func last4(_ index: Int) -> String {
        let digits = String(1000 + index % 9000)
        return String(digits.suffix(4))
    }
}

@main
enum ExtensionStatusProbe {
    static let userId = "bench-user"

    static func main() throws {
        let arguments = CommandLine.arguments
        guard arguments.count >= 3 else {
            FileHandle.standardError.write(Data("usage: ExtensionStatusProbe prepare <folder> <cards> | status <folder> <cards> | read <folder>\n".utf8))
            exit(2)
        }
        let folder = URL(fileURLWithPath: arguments[2], isDirectory: true)
        let directory = SharedWalletDirectory(containerURL: folder)
        let secrets = FileSecretStore(directory: folder.appendingPathComponent("secrets", isDirectory: true))
        let cards = Int(arguments.count > 3 ? arguments[3] : "") ?? 1
        switch arguments[1] {
        case "prepare":
            try prepare(directory: directory, secrets: secrets, cards: cards)
        case "status":
            evictFiles(directory: directory, secrets: secrets)
            let library = ProbePassLibrary(passes: ProbePassLibrary.passes(cards: cards))
            let cpu = threadCPUTime()
            let start = ContinuousClock.now
            let walletExtension = WalletExtension(configuration: WalletExtensionConfiguration(
                tmp: .init(baseURL: URL(string: "https://tmp.invalid/")!),
                directory: directory,
                secrets: secrets,
                passLibrary: library
            ))
            let status = walletExtension.status(passLibraryAvailable: true, passes: library.passes)
            let elapsed = start.duration(to: .now)
            let cpuUsed = threadCPUTime() - cpu
            print("status \(nanoseconds(elapsed)) \(cpuUsed) auth=\(status.requiresAuthentication) phone=\(status.passEntriesAvailable) watch=\(status.remotePassEntriesAvailable)")
        case "read":
            evictFiles(directory: directory, secrets: secrets)
            let cpu = threadCPUTime()
            let start = ContinuousClock.now
            let snapshot = try Data(contentsOf: directory.snapshotURL)
            let session = try Data(contentsOf: secrets.directory.appendingPathComponent(ExtensionSessionStore.key))
            let elapsed = start.duration(to: .now)
            let cpuUsed = threadCPUTime() - cpu
            print("read \(nanoseconds(elapsed)) \(cpuUsed) bytes=\(snapshot.count + session.count)")
        default:
            FileHandle.standardError.write(Data("unknown command \(arguments[1])\n".utf8))
            exit(2)
        }
    }

    /// A snapshot of `cards` cards: every fourth blocked, passes as ProbePassLibrary has them.
    static func prepare(directory: SharedWalletDirectory, secrets: FileSecretStore, cards: Int) throws {
        let snapshotCards = (0..<cards).map { index in
            let onPhone = index % 4 == 0
            let onWatch = index % 4 == 1
            return ExtensionSnapshot.Card(
                externalCardId: "card-\(index)",
                panLast4: ProbePassLibrary.last4(index),
                cardholderName: "Jane Appleseed",
                network: index % 2 == 0 ? .visa : .mastercard,
                productTitle: "Everyday Debit",
                artFileName: "card-\(index).png",
                status: index % 4 == 3 ? .blocked : .active,
                primaryAccountIdentifier: onPhone || onWatch ? "PAI\(index)" : nil,
                phone: onPhone ? .init(hasPass: true, state: .active) : .absent,
                watch: onWatch ? .init(hasPass: true, state: .active) : .absent
            )
        }
        try directory.write(ExtensionSnapshot(userId: userId, writtenAt: Date(), passLibraryAvailable: true, cards: snapshotCards))
        try ExtensionSessionStore(secrets: secrets).save(ExtensionSession(cardholderToken: "bench-token", expiresAt: Date().addingTimeInterval(365 * 86_400), userId: userId))
        print("prepared \(cards) cards in \(directory.url.path)")
    }

    /// Drops the two files from the page cache (Linux), so the timed read goes to the disk.
    static func evictFiles(directory: SharedWalletDirectory, secrets: FileSecretStore) {
        #if os(Linux)
        for url in [directory.snapshotURL, secrets.directory.appendingPathComponent(ExtensionSessionStore.key)] {
            let descriptor = open(url.path, O_RDONLY)
            if descriptor >= 0 {
                _ = fdatasync(descriptor)
                _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED)
                close(descriptor)
            }
        }
        #endif
    }

    /// CPU time this thread has used, in nanoseconds: unlike the elapsed time, it does not
    /// grow while other processes hold the CPU.
    static func threadCPUTime() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
