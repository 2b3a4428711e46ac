import Foundation
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import Testing

/// One ``SecretStore`` to put under contract: a fresh, empty store and how to dispose of it.
struct SecretStoreFactory: CustomTestStringConvertible, Sendable {
    let name: String
    let make: @Sendable () throws -> (store: any SecretStore, dispose: @Sendable () -> Void)

    var testDescription: String { name }

    /// Every implementation this platform can run: the file store and the tests' memory store
    /// everywhere, the Keychain store where there is a Keychain.
    static var all: [SecretStoreFactory] {
        var factories = [
            SecretStoreFactory(name: "FileSecretStore") {
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushprov-secret-contract-\(UUID().uuidString)")
                return (FileSecretStore(directory: directory), { try? FileManager.default.removeItem(at: directory) })
            },
            SecretStoreFactory(name: "MemorySecretStore") { (MemorySecretStore(), {}) },
        ]
        #if canImport(Security)
        factories.append(
            SecretStoreFactory(name: "KeychainSecretStore") {
                let store = KeychainSecretStore(service: "PushProvisioning.contract.\(UUID().uuidString)", accessGroup: nil)
                return (store, { try? store.removeAllSecrets() })
            }
        )
        #endif
        return factories
    }

    func withStore(_ body: (any SecretStore) throws -> Void) throws {
        let (store, dispose) = try make()
        defer { dispose() }
        try body(store)
    }
}

/// What every ``SecretStore`` does, run against each implementation (``SecretStoreFactory/all``).
@Suite("SecretStore contract")
struct SecretStoreContractTests {
    static let session = Data(#"{"token":"a session","expires":1}"#.utf8)

    @Test(arguments: SecretStoreFactory.all)
    func aSecretIsReadBackReplacedAndRemoved(factory: SecretStoreFactory) throws {
        try factory.withStore { store in
            #expect(try store.secret(for: "session") == nil)
            try store.setSecret(Self.session, for: "session")
            #expect(try store.secret(for: "session") == Self.session)
            try store.setSecret(Data("second".utf8), for: "session")
            #expect(try store.secret(for: "session") == Data("second".utf8))
            try store.removeSecret(for: "session")
            #expect(try store.secret(for: "session") == nil)
            // Removing what is not there is not an error.
            try store.removeSecret(for: "session")
            try store.removeSecret(for: "never-set")
        }
    }

    @Test(arguments: SecretStoreFactory.all)
    func keysAreIndependentAndAnEmptySecretIsASecret(factory: SecretStoreFactory) throws {
        try factory.withStore { store in
            try store.setSecret(Data("a".utf8), for: "a")
            try store.setSecret(Data(), for: "empty")
            try store.setSecret(Data("b".utf8), for: "b.c_d-E9")
            #expect(try store.secret(for: "empty") == Data())
            try store.removeSecret(for: "a")
            #expect(try store.secret(for: "a") == nil)
            #expect(try store.secret(for: "b.c_d-E9") == Data("b".utf8))
            #expect(try store.secret(for: "empty") == Data())
        }
    }

    @Test(arguments: SecretStoreFactory.all)
    func removingAllSecretsEmptiesTheStoreWhichStaysUsable(factory: SecretStoreFactory) throws {
        try factory.withStore { store in
            // On an empty store (the file store's folder not made yet) too.
            try store.removeAllSecrets()
            for key in ["session", "refresh", "x"] { try store.setSecret(Data(key.utf8), for: key) }
            try store.removeAllSecrets()
            for key in ["session", "refresh", "x"] { #expect(try store.secret(for: key) == nil, "\(key)") }
            try store.setSecret(Self.session, for: "session")
            #expect(try store.secret(for: "session") == Self.session)
        }
    }

    static let invalidKeys = ["", ".hidden", "..", "../session", "a/b", "a b", "sessión", String(repeating: "k", count: 65), "a\u{0}b", "a:b"]

    @Test(arguments: SecretStoreFactory.all)
    func aKeyOutsideTheRulesIsRefusedByEveryCallAndNothingChanges(factory: SecretStoreFactory) throws {
        try factory.withStore { store in
            try store.setSecret(Self.session, for: "session")
            for key in Self.invalidKeys {
                for error in [
                    #expect(throws: SharedStorageError.self) { try store.setSecret(Data("x".utf8), for: key) },
                    #expect(throws: SharedStorageError.self) { _ = try store.secret(for: key) },
                    #expect(throws: SharedStorageError.self) { try store.removeSecret(for: key) },
                ] {
                    #expect(error?.code == .invalidName, "\(key.debugDescription): \(String(describing: error))")
                }
            }
            // The longest key is fine; nothing the refusals touched is lost.
            let longest = String(repeating: "k", count: 64)
            try store.setSecret(Data("long".utf8), for: longest)
            #expect(try store.secret(for: longest) == Data("long".utf8))
            #expect(try store.secret(for: "session") == Self.session)
        }
    }

    @Test(arguments: SecretStoreFactory.all)
    func aSecretOverTheLimitIsRefusedAndTheOneThereKept(factory: SecretStoreFactory) throws {
        try factory.withStore { store in
            let largest = Data(repeating: 0xA5, count: SecretStoreRules.maximumSecretBytes)
            try store.setSecret(largest, for: "large")
            #expect(try store.secret(for: "large") == largest)
            let error = #expect(throws: SharedStorageError.self) {
                try store.setSecret(Data(repeating: 1, count: SecretStoreRules.maximumSecretBytes + 1), for: "large")
            }
            #expect(error?.code == .tooLarge)
            #expect(try store.secret(for: "large") == largest)
        }
    }

    /// Readers never see a secret half written: each read while writers replace it is one of
    /// the values written whole.
    @Test(arguments: SecretStoreFactory.all)
    func concurrentReadersSeeOneWholeSecretOrAnother(factory: SecretStoreFactory) throws {
        try factory.withStore { store in
            let values = (0..<4).map { Data(repeating: UInt8($0 + 1), count: 4096) }
            try store.setSecret(values[0], for: "session")
            let torn = Locked(0)
            let reads = Locked(0)
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                for round in 0..<50 {
                    if worker % 2 == 0 {
                        try? store.setSecret(values[(worker / 2 + round) % values.count], for: "session")
                    } else if let read = try? store.secret(for: "session") {
                        reads.withValue { $0 += 1 }
                        if !values.contains(read) { torn.withValue { $0 += 1 } }
                    }
                }
            }
            #expect(reads.current == 200, "every read found a secret")
            #expect(torn.current == 0)
        }
    }
}
