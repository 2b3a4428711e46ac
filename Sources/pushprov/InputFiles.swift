import Foundation
import ProvisioningCrypto
import X509

/// Reading the files the crypto commands take, with one-line errors naming the file.
enum InputFiles {
    static func read(_ path: String) throws -> Data {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CLIError("\(path): no such file")
        }
        guard !isDirectory.boolValue, let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("\(path): cannot be read")
        }
        return data
    }

    /// Every certificate in a PEM file (in file order) or the one certificate of a DER file.
    static func certificates(_ path: String) throws -> [Certificate] {
        let data = try read(path)
        do {
            return try TrustAnchors.certificates(from: data, source: path)
        } catch let error as CertificateFileError {
            throw CLIError(error.description)
        }
    }

    /// The DER bytes of every certificate in a file: a DER file as it is (so a policy sees
    /// exactly the bytes Wallet would send), each PEM block re-encoded.
    static func derCertificates(_ path: String) throws -> [Data] {
        let data = try read(path)
        guard String(data: data, encoding: .utf8)?.contains("-----BEGIN") == true else { return [data] }
        return try certificates(path).map(\.derData)
    }
}
