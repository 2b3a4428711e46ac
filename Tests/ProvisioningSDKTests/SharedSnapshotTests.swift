import Foundation
import ProvisioningModels
import ProvisioningSDK
import SDKTestSupport
import TestSupport
import Testing

/// The snapshot file the app writes and the extensions read: round trip, atomic replace, and
/// every way a file can be unusable reads as "no snapshot".
@Suite("Shared snapshot")
struct SharedSnapshotTests {
    @Test func aWrittenSnapshotReadsBackEqual() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        let snapshot = Fixtures.snapshot([
            Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active),
            Fixtures.snapshotCard("card-2", last4: "2222", status: .blocked),
        ])
        try directory.write(snapshot)
        #expect(directory.readSnapshotFile() == .found(snapshot))
        // The replace is atomic: only the snapshot is left in the folder, no temporary file.
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).sorted()
        #expect(names == ["card-art", "wallet-snapshot.json"])
    }

    @Test func theFileHoldsNoPANAndNoTokenReference() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        let card = Fixtures.card("card-1")
        let pass = Fixtures.pass("DAPL-SECRET-REF", account: "PAI-1", device: .phone, serial: "SERIAL-XYZ")
        let status = WalletStatusCalculator.statuses(.init(cards: [card], passes: [pass], tokens: [Fixtures.token("DAPL-SECRET-REF", card: "card-1", status: .active)], passLibraryAvailable: true, addablePrimaryAccountIdentifiers: ["PAI-1"]))
        try directory.write(ExtensionSnapshot(status, userId: "alice", writtenAt: Date(timeIntervalSince1970: 0), artFileNames: [:]))
        let text = try String(contentsOf: directory.snapshotURL, encoding: .utf8)
        #expect(!text.contains("DAPL-SECRET-REF"))
        #expect(!text.contains("SERIAL-XYZ"))
        // Each card holds these members only: nothing of the token or the pass beyond the
        // account identifier and the presence per device.
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let cards = try #require(object["cards"] as? [[String: Any]])
        #expect(cards.map { Set($0.keys) } == [["externalCardId", "panLast4", "cardholderName", "network", "productTitle", "status", "primaryAccountIdentifier", "phone", "watch"]])
        let read = try #require(directory.readSnapshot())
        #expect(read.cards.first?.phone == .init(hasPass: true, state: .active))
        #expect(read.cards.first?.primaryAccountIdentifier == "PAI-1")
    }

    @Test func eachDevicesPresenceIsOneWord() throws {
        let snapshot = Fixtures.snapshot([
            Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active, watch: .requiresActivation),
            ExtensionSnapshot.Card(externalCardId: "card-2", panLast4: "2222", cardholderName: "", network: .mastercard, productTitle: "Gold", artFileName: nil, status: .active, primaryAccountIdentifier: "PAI-2", phone: .init(hasPass: true, state: .notAdded), watch: .init(hasPass: true, state: .suspended)),
        ])
        let text = String(decoding: try JSONEncoder().encode(snapshot), as: UTF8.self)
        for word in [#""phone":"active""#, #""watch":"requiresActivation""#, #""phone":"dead""#, #""watch":"suspended""#] {
            #expect(text.contains(word), "\(word)")
        }
        #expect(try JSONDecoder().decode(ExtensionSnapshot.self, from: Data(text.utf8)) == snapshot)
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        try Data(text.replacingOccurrences(of: #""phone":"dead""#, with: #""phone":"notAdded""#).utf8).write(to: directory.snapshotURL)
        #expect(directory.readSnapshotFile() == .corrupt)
        // `status` reads the index, which the damage did not reach.
        #expect(directory.readStatusFacts()?.cards.map(\.phone) == [.init(hasPass: true, state: .active), .init(hasPass: true, state: .notAdded)])
    }

    @Test func statusReadsTheSameFactsAsTheFullSnapshot() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        let snapshot = Fixtures.snapshot([Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active), Fixtures.snapshotCard("card-2", status: .closed)])
        try directory.write(snapshot)
        let facts = try #require(directory.readStatusFacts())
        #expect(facts.userId == "alice")
        #expect(facts.cards.map(\.panLast4) == ["1111", "1111"])
        #expect(facts.cards.map(\.status) == [.active, .closed])
        #expect(facts.cards.first?.primaryAccountIdentifier == "PAI-1")
        #expect(facts.cards.first?.phone == .init(hasPass: true, state: .active))
    }

    @Test func theStatusIndexCarriesEveryFactEvenOddAccounts() throws {
        let accounts: [String?] = ["PAI-1", "-", "a b|c%2D\n", "ключ", nil]
        let cards = accounts.enumerated().map { index, account in
            Fixtures.snapshotCard("card-\(index)", last4: "00\(index)7", status: index == 3 ? .blocked : .active, account: account, phone: index % 2 == 0 ? .active : .notAdded, watch: index == 1 ? .suspended : .notAdded)
        }
        let data = try JSONEncoder().encode(Fixtures.snapshot(cards))
        let facts = try JSONDecoder().decode(ExtensionSnapshot.StatusFacts.self, from: data)
        #expect(facts.cards.map(\.primaryAccountIdentifier) == accounts)
        #expect(facts.cards.map(\.panLast4) == cards.map(\.panLast4))
        #expect(facts.cards.map(\.status) == cards.map(\.status))
        #expect(facts.cards.map(\.phone) == cards.map(\.phone))
        #expect(facts.cards.map(\.watch) == cards.map(\.watch))
        #expect(String(decoding: data, as: UTF8.self).contains(#""statusIndex":"ACTIVE active absent 0007 PAI%2D1\nACTIVE absent suspended 0017 %2D\n"#))
    }

    @Test func aDamagedStatusIndexFallsBackToTheCards() throws {
        let snapshot = Fixtures.snapshot([Fixtures.snapshotCard("card-1", account: "PAI-1", phone: .active)])
        var object = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(snapshot)) as? [String: Any])
        for damaged in ["ACTIVE active", "OPEN active absent 1111 PAI-1\n", "ACTIVE notAdded absent 1111 PAI-1\n"] {
            object["statusIndex"] = damaged
            let facts = try JSONDecoder().decode(ExtensionSnapshot.StatusFacts.self, from: try JSONSerialization.data(withJSONObject: object))
            #expect(facts.cards.first?.primaryAccountIdentifier == "PAI-1", "\(damaged)")
            #expect(facts.cards.first?.phone == .init(hasPass: true, state: .active), "\(damaged)")
        }
        object["statusIndex"] = nil
        let facts = try JSONDecoder().decode(ExtensionSnapshot.StatusFacts.self, from: try JSONSerialization.data(withJSONObject: object))
        #expect(facts.cards.count == 1)
    }

    @Test func noFileIsMissing() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        #expect(SharedWalletDirectory(containerURL: folder.url).readSnapshotFile() == .missing)
    }

    @Test(arguments: [
        ("not json", Data("hello".utf8)),
        ("empty", Data()),
        ("wrong fields", Data(#"{"schemaVersion":1,"cards":"no"}"#.utf8)),
        ("binary", Data([0xFF, 0x00, 0xFE, 0x7B])),
    ])
    func aCorruptFileIsNoSnapshot(_ name: String, _ bytes: Data) throws {
        let (folder, directory) = try written(bytes)
        defer { folder.remove() }
        #expect(directory.readSnapshotFile() == .corrupt, "\(name)")
        #expect(directory.readSnapshot() == nil)
    }

    @Test func aTruncatedFileIsNoSnapshot() throws {
        let encoded = try JSONEncoder().encode(Fixtures.snapshot([Fixtures.snapshotCard("card-1"), Fixtures.snapshotCard("card-2")]))
        for length in [1, encoded.count / 2, encoded.count - 1] {
            let (folder, directory) = try written(encoded.prefix(length))
            defer { folder.remove() }
            #expect(directory.readSnapshotFile() == .corrupt, "cut at \(length) of \(encoded.count) bytes")
        }
    }

    @Test func aNewerSchemaVersionIsNoSnapshotEvenWhenItsFieldsLookFamiliar() throws {
        var snapshot = Fixtures.snapshot([Fixtures.snapshotCard("card-1")])
        snapshot.schemaVersion = ExtensionSnapshot.currentSchemaVersion + 1
        let (folder, directory) = try written(try JSONEncoder().encode(snapshot))
        defer { folder.remove() }
        #expect(directory.readSnapshotFile() == .newerVersion(2))
        #expect(directory.readSnapshot() == nil)
    }

    @Test func anOversizedFileIsNotReadAtAll() throws {
        let (folder, directory) = try written(Data(repeating: 0x20, count: SharedWalletDirectory.maximumSnapshotBytes + 1))
        defer { folder.remove() }
        #expect(directory.readSnapshotFile() == .tooLarge)
    }

    @Test func implausibleContentIsNoSnapshot() throws {
        let pathArt = Fixtures.snapshot([Fixtures.snapshotCard("card-1", art: "../../etc/passwd.png")])
        let badId = Fixtures.snapshot([Fixtures.snapshotCard("card/1")])
        let noUser = Fixtures.snapshot([Fixtures.snapshotCard("card-1")], user: "")
        for snapshot in [pathArt, badId, noUser] {
            let (folder, directory) = try written(try JSONEncoder().encode(snapshot))
            defer { folder.remove() }
            #expect(directory.readSnapshotFile() == .invalid)
        }
    }

    @Test func signOutRemovesTheSnapshotAndTheArt() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let directory = SharedWalletDirectory(containerURL: folder.url)
        try directory.write(Fixtures.snapshot([Fixtures.snapshotCard("card-1")]))
        try directory.storeArt(TestPNG.file(), externalCardId: "card-1")
        try directory.removeAll()
        #expect(directory.readSnapshotFile() == .missing)
        #expect(directory.storedArtFileName(externalCardId: "card-1") == nil)
        #expect(!FileManager.default.fileExists(atPath: directory.url.path))
    }

    /// A shared folder whose snapshot file holds exactly `bytes`, in a temporary folder the
    /// caller removes (`folder.remove()`: the shared folder's own removal left it behind).
    func written(_ bytes: Data) throws -> (folder: TemporaryDirectory, directory: SharedWalletDirectory) {
        let folder = try TemporaryDirectory()
        let directory = SharedWalletDirectory(containerURL: folder.url)
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        try bytes.write(to: directory.snapshotURL)
        return (folder, directory)
    }
}
