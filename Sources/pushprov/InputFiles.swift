import Foundation
import ProvisioningModels
import ProvisioningCrypto
import X509

/// Reading the files the crypto commands take, with one-line errors naming the file.
enum InputFiles {
    /// The most bytes a crypto command reads from one file: certificates, keys and payloads
    /// are a few kilobytes.
    static let maximumSize = 1 << 20

    /// The bytes of the regular file at `path`, under ``maximumSize`` (``BoundedFile``).
    static func read(_ path: String) throws -> Data {
        switch BoundedFile.read(path, limit: maximumSize) {
        case .success(let data):
            return data
        case .failure(.cannotOpen):
            throw CLIError(FileManager.default.fileExists(atPath: path) ? "\(path): cannot be read" : "\(path): no such file")
        case .failure(.cannotRead), .failure(.writableByOthers), .failure(.foreignOwner):
            // (Read unguarded: the last two do not come.)
            throw CLIError("\(path): cannot be read")
        case .failure(.notRegular(let kind)):
            throw CLIError("\(path): not a regular file (\(kind))")
        case .failure(.tooLarge(let size, let limit)):
            throw CLIError("\(path): \(size) bytes or more; a certificate, key or payload file must be under \(limit) bytes")
        }
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
        try derCertificates(in: try read(path), source: path)
    }

    /// ``derCertificates(_:)`` of bytes already read from `source`.
    static func derCertificates(in data: Data, source: String) throws -> [Data] {
        guard String(data: data, encoding: .utf8)?.contains("-----BEGIN") == true else { return [data] }
        do {
            return try TrustAnchors.certificates(from: data, source: source).map(\.derData)
        } catch let error as CertificateFileError {
            throw CLIError(error.description)
        }
    }
}
