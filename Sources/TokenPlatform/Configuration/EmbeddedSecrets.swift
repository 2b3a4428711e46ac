import Crypto
import Foundation
import ProvisioningCrypto

/// The embedded run's API keys and cardholder development signing key, kept in one
/// owner-only (0600) JSON file in the data directory and generated on first use.
public struct EmbeddedSecrets: Sendable {
    /// The issuer back office's API key.
    public var issuerAPIKey: String
    /// The token service provider's API key.
    public var tspAPIKey: String
    /// The key `pushprov dev-token` signs cardholder JWTs with.
    public var cardholderDevelopmentKey: SigningKey

    private struct Stored: Codable {
        var issuerApiKey: String
        var tspApiKey: String
        var cardholderKeyId: String
        var cardholderPrivateKey: String
    }

    /// Loads the file, creating it with fresh secrets when it does not exist.
    public static func loadOrCreate(at path: String) throws -> (value: EmbeddedSecrets, created: Bool) {
        if !FileManager.default.fileExists(atPath: path) {
            let key = SigningKey.generate()
            let stored = Stored(issuerApiKey: APIKey.generate(), tspApiKey: APIKey.generate(), cardholderKeyId: key.id, cardholderPrivateKey: key.privateKey.rawRepresentation.base64EncodedString())
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            // Whole or not at all: a concurrent starter reads the winner's complete file.
            let created: Bool
            do { created = try LocalKeyFile.createOwnerOnlyFileAtomically(try encoder.encode(stored), at: path) } catch { throw ConfigurationError("\(error)") }
            if created { return (try load(at: path), true) }
        }
        return (try load(at: path), false)
    }

    /// Loads the file; refuses one that others can read.
    public static func load(at path: String) throws -> EmbeddedSecrets {
        let data: Data
        do { data = try LocalKeyFile.readOwnerOnlyFile(at: path, kind: "secrets file") } catch { throw ConfigurationError("\(error)") }
        guard let stored = try? JSONDecoder().decode(Stored.self, from: data),
            let raw = Data(base64Encoded: stored.cardholderPrivateKey),
            let key = try? P256.Signing.PrivateKey(rawRepresentation: raw)
        else {
            throw ConfigurationError("secrets file \(path) is not a valid pushprov secrets file")
        }
        return EmbeddedSecrets(issuerAPIKey: stored.issuerApiKey, tspAPIKey: stored.tspApiKey, cardholderDevelopmentKey: SigningKey(id: stored.cardholderKeyId, privateKey: key))
    }
}
