import Foundation
import ProvisioningModels

/// The files the app shares with its Wallet extensions: the ``ExtensionSnapshot`` and the
/// cards' art, in one folder of the App Group container (any directory on Linux and in tests).
///
/// Layout: `<container>/PushProvisioning/wallet-snapshot.json` and
/// `<container>/PushProvisioning/card-art/<card id>.png|pdf`, and beside the folder
/// `<container>/PushProvisioning.lock` (``withLock(_:)``).
///
/// Writes replace files atomically (a reader sees the old file or the new one, never a mix).
/// Reads are tolerant and bounded: a missing, unreadable, oversized, corrupt, truncated,
/// implausible or newer-version snapshot reads as "no snapshot", never as an error or a crash.
public struct SharedWalletDirectory: Sendable, Hashable {
    /// The largest snapshot file read, in bytes (about 2,000 cards' worth).
    public static let maximumSnapshotBytes = 1 << 20
    /// The most cards a snapshot may hold.
    public static let maximumCards = 1_000

    /// The folder holding the shared files.
    public let url: URL

    /// The shared folder inside `containerURL` (on iOS:
    /// `FileManager.default.containerURL(forSecurityApplicationGroupIdentifier:)`).
    public init(containerURL: URL) {
        self.url = containerURL.appendingPathComponent("PushProvisioning", isDirectory: true)
    }

    /// The snapshot file.
    public var snapshotURL: URL { url.appendingPathComponent("wallet-snapshot.json") }
    /// The folder of card art files.
    public var artDirectoryURL: URL { url.appendingPathComponent("card-art", isDirectory: true) }

    // MARK: Snapshot

    /// What reading the snapshot found.
    public enum SnapshotRead: Sendable, Hashable {
        /// A usable snapshot.
        case found(ExtensionSnapshot)
        /// No file.
        case missing
        /// A file larger than ``SharedWalletDirectory/maximumSnapshotBytes``.
        case tooLarge
        /// A file that is not a snapshot (not JSON, truncated, wrong fields).
        case corrupt
        /// A snapshot written by a newer SDK, in a format this one does not know.
        case newerVersion(Int)
        /// A well-formed snapshot with implausible content (an empty user id, too many cards,
        /// a card id or art file name TMP would never produce).
        case invalid

        /// The snapshot, if one was found.
        public var snapshot: ExtensionSnapshot? {
            if case .found(let snapshot) = self { return snapshot }
            return nil
        }
    }

    /// The snapshot, or nil for anything but a usable one.
    public func readSnapshot() -> ExtensionSnapshot? {
        readSnapshotFile().snapshot
    }

    /// Reads the snapshot and says what was found.
    public func readSnapshotFile() -> SnapshotRead {
        switch decodeSnapshotFile(as: ExtensionSnapshot.self) {
        case .success(let snapshot): Self.isPlausible(snapshot) ? .found(snapshot) : .invalid
        case .failure(let failure): failure.read
        }
    }

    /// Only what Wallet's `status` needs of the snapshot (the same tolerant, bounded read;
    /// nil for anything but a usable snapshot).
    public func readStatusFacts() -> ExtensionSnapshot.StatusFacts? {
        guard case .success(let facts) = decodeSnapshotFile(as: ExtensionSnapshot.StatusFacts.self),
            !facts.userId.isEmpty, facts.cards.count <= Self.maximumCards
        else { return nil }
        return facts
    }

    private func decodeSnapshotFile<Value: Decodable>(as type: Value.Type) -> Result<Value, SnapshotReadFailure> {
        let data: Data
        switch Self.read(snapshotURL, maximumBytes: Self.maximumSnapshotBytes) {
        case .missing: return .failure(SnapshotReadFailure(read: .missing))
        case .tooLarge: return .failure(SnapshotReadFailure(read: .tooLarge))
        case .data(let read): data = read
        }
        do {
            return .success(try JSONDecoder().decode(type, from: data))
        } catch let newer as ExtensionSnapshot.NewerSchemaVersion {
            return .failure(SnapshotReadFailure(read: .newerVersion(newer.version)))
        } catch {
            return .failure(SnapshotReadFailure(read: .corrupt))
        }
    }

    private struct SnapshotReadFailure: Error {
        let read: SnapshotRead
    }

    /// Replaces the snapshot atomically.
    public func write(_ snapshot: ExtensionSnapshot) throws {
        try createDirectories()
        let data = try JSONEncoder().encode(snapshot)
        guard data.count <= Self.maximumSnapshotBytes else {
            throw SharedStorageError(.tooLarge, "the snapshot of \(snapshot.cards.count) cards is \(data.count) bytes; at most \(Self.maximumSnapshotBytes) are read back")
        }
        try data.write(to: snapshotURL, options: Self.atomicWrite)
    }

    // MARK: Card art

    /// The name of the art file stored for a card, whatever its format: `<card id>.png` or `.pdf`.
    public func storedArtFileName(externalCardId: String) -> String? {
        guard CardIdentifier.isValid(externalCardId) else { return nil }
        return CardArtFormat.allCases.lazy.map { Self.artFileName(externalCardId: externalCardId, format: $0) }
            .first { FileManager.default.fileExists(atPath: artDirectoryURL.appendingPathComponent($0).path) }
    }

    /// Validates `data` with `CardArtValidator` and, only if it is acceptable art, stores it
    /// atomically as the card's art (removing art of the other format). Returns the file name.
    ///
    /// - Throws: the validator's ``CardArtError`` (nothing is stored), ``SharedStorageError``
    ///   for a card id TMP would never issue, or a file error.
    @discardableResult
    public func storeArt(_ data: Data, declaredContentType: String? = nil, externalCardId: String) throws -> String {
        guard CardIdentifier.isValid(externalCardId) else {
            throw SharedStorageError(.invalidName, "the card id is not a TMP card id, so its art has no safe file name")
        }
        let info = try CardArtValidator.validate(data, declaredContentType: declaredContentType).get()
        try createDirectories()
        let name = Self.artFileName(externalCardId: externalCardId, format: info.format)
        try data.write(to: artDirectoryURL.appendingPathComponent(name), options: Self.atomicWrite)
        for other in CardArtFormat.allCases where other != info.format {
            try? FileManager.default.removeItem(at: artDirectoryURL.appendingPathComponent(Self.artFileName(externalCardId: externalCardId, format: other)))
        }
        return name
    }

    /// The art stored under `fileName`, validated again, or nil if there is none usable.
    public func art(named fileName: String) -> (data: Data, info: CardArtInfo)? {
        guard Self.isArtFileName(fileName),
            case .data(let data) = Self.read(artDirectoryURL.appendingPathComponent(fileName), maximumBytes: CardArtValidator.maximumSize),
            case .success(let info) = CardArtValidator.validate(data)
        else { return nil }
        return (data, info)
    }

    /// When the card's art file was last written, if there is one.
    public func artModificationDate(fileName: String) -> Date? {
        guard Self.isArtFileName(fileName) else { return nil }
        let attributes = try? FileManager.default.attributesOfItem(atPath: artDirectoryURL.appendingPathComponent(fileName).path)
        return attributes?[.modificationDate] as? Date
    }

    /// Removes the art of every card not in `externalCardIds`.
    public func removeArt(keeping externalCardIds: Set<String>) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: artDirectoryURL.path)) ?? []
        for name in names {
            let id = (name as NSString).deletingPathExtension
            if !externalCardIds.contains(id) {
                try? FileManager.default.removeItem(at: artDirectoryURL.appendingPathComponent(name))
            }
        }
    }

    // MARK: Sign-out

    /// Removes the snapshot and all art.
    public func removeAll() throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        try FileManager.default.removeItem(at: url)
    }

    // MARK: Helpers

    static func artFileName(externalCardId: String, format: CardArtFormat) -> String {
        "\(externalCardId).\(format.rawValue)"
    }

    /// `<card id>.png` or `<card id>.pdf`: never a path, never hidden.
    static func isArtFileName(_ name: String) -> Bool {
        let format = CardArtFormat.allCases.first { name.hasSuffix(".\($0.rawValue)") }
        guard let format else { return false }
        let id = String(name.dropLast(format.rawValue.count + 1))
        return CardIdentifier.isValid(id) && !id.hasPrefix(".")
    }

    static func isPlausible(_ snapshot: ExtensionSnapshot) -> Bool {
        guard !snapshot.userId.isEmpty, snapshot.cards.count <= maximumCards else { return false }
        return snapshot.cards.allSatisfy { card in
            CardIdentifier.isValid(card.externalCardId) && (card.artFileName.map(isArtFileName) ?? true)
        }
    }

    private func createDirectories() throws {
        try FileManager.default.createDirectory(at: artDirectoryURL, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    private enum Read {
        case data(Data)
        case missing
        case tooLarge
    }

    /// At most `maximumBytes` of the file; reading one byte more tells an oversized file.
    private static func read(_ url: URL, maximumBytes: Int) -> Read {
        guard let handle = try? FileHandle(forReadingFrom: url) else { return .missing }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: maximumBytes + 1) else { return .data(Data()) }
        return data.count > maximumBytes ? .tooLarge : .data(data)
    }

    #if canImport(Darwin)
    // Readable by the extensions whenever the device has been unlocked once since boot,
    // whatever the app's default protection class.
    static let atomicWrite: Data.WritingOptions = [.atomic, .completeFileProtectionUntilFirstUserAuthentication]
    #else
    static let atomicWrite: Data.WritingOptions = [.atomic]
    #endif
}
