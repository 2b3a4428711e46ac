import Crypto
import Foundation
import SwiftASN1
import X509

/// The root certificates a chain may end at.
///
/// The default, ``apple``, holds only Apple Root CA - G3, embedded in the package and pinned
/// by its SHA-256 fingerprint. Extra anchors (for example the Wallet simulator's root) are
/// added explicitly; a production deployment uses ``apple`` alone.
public struct TrustAnchors: Sendable {
    /// The anchor certificates.
    public private(set) var certificates: [Certificate]

    /// SHA-256 of Apple Root CA - G3's DER, as Apple publishes it.
    public static let appleRootCAG3Fingerprint = "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179"

    /// Apple Root CA - G3, the anchor of Apple's issuer-encryption chain.
    public static let appleRootCAG3: Certificate = {
        // The embedded file is part of the package; a mismatch means the build was tampered with.
        let pem = String(decoding: PackageResources.AppleRootCA_G3_pem, as: UTF8.self)
        let certificate = try! Certificate(pemEncoded: pem)
        precondition(
            certificate.sha256Fingerprint == appleRootCAG3Fingerprint,
            "embedded Apple Root CA - G3 does not match its pinned fingerprint"
        )
        return certificate
    }()

    /// Trust only Apple Root CA - G3.
    public static var apple: TrustAnchors { TrustAnchors(certificates: [appleRootCAG3]) }

    /// Anchors from explicit certificates (Apple's root is not added implicitly).
    public init(certificates: [Certificate]) {
        self.certificates = certificates
    }

    /// These anchors plus `extra`.
    public func adding(_ extra: [Certificate]) -> TrustAnchors {
        TrustAnchors(certificates: certificates + extra.filter { !certificates.contains($0) })
    }

    /// Reads every certificate from a PEM file (one or more `CERTIFICATE` blocks) or a DER file.
    ///
    /// - Throws: ``CertificateFileError`` naming the file when it cannot be read or holds no certificate.
    public static func certificates(fromFile path: String) throws -> [Certificate] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CertificateFileError(path: path, reason: "cannot be read")
        }
        return try certificates(from: data, source: path)
    }

    /// Parses PEM (one or more blocks) or a single DER certificate.
    public static func certificates(from data: Data, source: String) throws -> [Certificate] {
        if let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN") {
            let blocks: [PEMDocument]
            do {
                blocks = try PEMDocument.parseMultiple(pemString: text)
            } catch {
                throw CertificateFileError(path: source, reason: "is not valid PEM")
            }
            let certificates = try blocks.filter { $0.discriminator == "CERTIFICATE" }.map { block in
                do { return try Certificate(derEncoded: block.derBytes) } catch {
                    throw CertificateFileError(path: source, reason: "holds a CERTIFICATE block that is not a valid X.509 certificate")
                }
            }
            guard !certificates.isEmpty else { throw CertificateFileError(path: source, reason: "holds no CERTIFICATE block") }
            return certificates
        }
        do {
            return [try Certificate(derEncoded: Array(data))]
        } catch {
            throw CertificateFileError(path: source, reason: "is neither PEM nor a DER X.509 certificate")
        }
    }
}

/// A certificate file that could not be used.
public struct CertificateFileError: Error, Sendable, CustomStringConvertible {
    /// The file.
    public var path: String
    /// What is wrong with it.
    public var reason: String
    /// `path reason`.
    public var description: String { "\(path) \(reason)" }
}

extension Certificate {
    /// The certificate's DER encoding.
    public var derData: Data {
        var serializer = DER.Serializer()
        // Serializing a certificate that was parsed or built successfully cannot fail.
        try! serializer.serialize(self)
        return Data(serializer.serializedBytes)
    }

    /// Lowercase hex SHA-256 of the certificate's DER encoding.
    public var sha256Fingerprint: String {
        Data(SHA256.hash(data: derData)).lowercaseHex
    }
}
