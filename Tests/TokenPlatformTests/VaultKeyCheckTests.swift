import Foundation
import Logging
import ProvisioningCrypto
import ProvisioningModels
import Testing
import TokenPlatform

/// A server refuses to start on a database whose card numbers its PAN vault keys cannot read.
@Suite("Start-up check of the PAN vault keys")
struct VaultKeyCheckTests {
    static let logger = Logger(label: "test.vault-check") { _ in SwiftLogNoOpLogHandler() }

    static func configuration(dataDirectory: String) throws -> ServerConfiguration {
        var settings = ServerSettings()
        settings.dataDirectory = dataDirectory
        settings.port = 0
        return try settings.resolve(environment: [:])
    }

    @Test func aRegeneratedKeyFileIsRefusedInsteadOfServingCardsItCannotRead() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-vault-check-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // First start: a card is stored with the keys generated then.
        let first = try Self.configuration(dataDirectory: directory)
        let environment = try await TMPServer.makeEnvironment(configuration: first, logger: Self.logger)
        let pan = try PrimaryAccountNumber("4111111111111111")
        let card = CardRecord(
            externalCardId: "c1", userId: "alice", encryptedPAN: try environment.vault.encrypt(pan, cardID: "c1").serialized,
            panLookupHash: environment.vault.lookupHash(pan), panLast4: "1111", panUniqueReference: "PUR-c1", expiration: try CardExpiration("12/29"),
            cardholderName: "Alice", network: .visa, productTitle: "Debit", artId: nil, status: .active, createdAt: Date(), updatedAt: Date()
        )
        _ = try await environment.store.putCard(card, audit: AuditEntry(at: Date(), actor: "test", action: "card.create", subject: "card:c1", detail: ""))
        await environment.store.close()

        // The same keys: starts.
        let again = try await TMPServer.makeEnvironment(configuration: try Self.configuration(dataDirectory: directory), logger: Self.logger)
        await again.store.close()

        // The key file lost and generated again beside the same database: refused, saying why.
        let keyFile = first.keyFilePath
        let kept = try Data(contentsOf: URL(fileURLWithPath: keyFile))
        try FileManager.default.removeItem(atPath: keyFile)
        let regenerated = try Self.configuration(dataDirectory: directory)
        #expect(regenerated.notices.contains { $0.contains("generated PAN vault") })
        let refusal = await #expect(throws: ConfigurationError.self) {
            _ = try await TMPServer.makeEnvironment(configuration: regenerated, logger: Self.logger)
        }
        #expect(refusal?.message.contains("cannot decrypt the stored card numbers") == true, "\(refusal?.message ?? "")")
        #expect(refusal?.message.contains("restore the key file") == true)
        #expect(refusal?.message.contains("4111") == false)

        // The right key file put back: starts again.
        try FileManager.default.removeItem(atPath: keyFile)
        #expect(FileManager.default.createFile(atPath: keyFile, contents: kept, attributes: [.posixPermissions: 0o600]))
        let restored = try await TMPServer.makeEnvironment(configuration: try Self.configuration(dataDirectory: directory), logger: Self.logger)
        #expect(try await restored.store.card(externalCardId: "c1") != nil)
        await restored.store.close()
    }
}
