import Foundation
import SwiftASN1
import X509

/// Files shipped with the crypto tests: Apple's real certificates and the ECC_V2 vectors.
enum TestResources {
    static let directory: URL = Bundle.module.url(forResource: "Resources", withExtension: nil)!

    static func data(_ relativePath: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent(relativePath))
    }

    static func certificate(_ name: String) throws -> Certificate {
        try Certificate(pemEncoded: String(decoding: data("certs/\(name)"), as: UTF8.self))
    }

    static func der(_ name: String) throws -> Data {
        try certificate(name).derData
    }

    static var vectorFiles: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("vectors").path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted()
    }
}
