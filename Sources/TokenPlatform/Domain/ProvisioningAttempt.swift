import Foundation
import ProvisioningModels

/// A `signed-cards` call that produced a sealed card; lets TMP correlate the TSP's decision.
///
/// Holds no PAN: only ids, hashes and the leaf certificate's fingerprint.
public struct ProvisioningAttempt: Sendable, Hashable {
    /// The activation data's unique id (`jti`).
    public var activationDataId: String
    /// The card.
    public var externalCardId: String
    /// The caller.
    public var userId: String
    /// The target device.
    public var deviceType: DeviceType
    /// base64url SHA-256 of Wallet's nonce.
    public var nonceHash: String
    /// Lowercase hex SHA-256 of the leaf certificate.
    public var leafFingerprint: String
    /// When.
    public var createdAt: Date
    /// When its activation data expires.
    public var expiresAt: Date

    /// Creates an attempt.
    public init(activationDataId: String, externalCardId: String, userId: String, deviceType: DeviceType, nonceHash: String, leafFingerprint: String, createdAt: Date, expiresAt: Date) {
        self.activationDataId = activationDataId
        self.externalCardId = externalCardId
        self.userId = userId
        self.deviceType = deviceType
        self.nonceHash = nonceHash
        self.leafFingerprint = leafFingerprint
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A tokenization decision TMP gave the TSP.
public struct TokenizationDecisionRecord: Sendable, Hashable {
    /// The TSP's request id.
    public var requestId: String
    /// The card, when known.
    public var panUniqueReference: String?
    /// The device.
    public var deviceType: DeviceType
    /// The decision.
    public var decision: TokenizationDecision
    /// Why.
    public var reason: String
    /// When.
    public var decidedAt: Date
    /// The activation data the decision used up, as read back from the store (which records
    /// the id passed as `consumingActivationData`): nil when it used none, or when it was
    /// recorded before stores kept it.
    public var activationDataId: String?

    /// Creates a record.
    public init(requestId: String, panUniqueReference: String?, deviceType: DeviceType, decision: TokenizationDecision, reason: String, decidedAt: Date, activationDataId: String? = nil) {
        self.requestId = requestId
        self.panUniqueReference = panUniqueReference
        self.deviceType = deviceType
        self.decision = decision
        self.reason = reason
        self.decidedAt = decidedAt
        self.activationDataId = activationDataId
    }
}

/// Uploaded card art.
public struct CardArtRecord: Sendable, Hashable {
    /// The art id.
    public var artId: String
    /// `image/png` or `application/pdf`.
    public var contentType: String
    /// The file.
    public var data: Data
    /// When uploaded.
    public var updatedAt: Date

    /// Creates a record.
    public init(artId: String, contentType: String, data: Data, updatedAt: Date) {
        self.artId = artId
        self.contentType = contentType
        self.data = data
        self.updatedAt = updatedAt
    }
}

/// What tells two stored files of one card art id apart without reading them: the content
/// type, the size and the upload time (``TMPStore/cardArtVersion(id:)``).
///
/// An upload replacing art with a file of the same size, within the same millisecond (the
/// SQLite store's precision), would keep the version; the server's own uploads also clear
/// its cached copy (``CardArtCache``), so only two instances sharing a PostgreSQL database
/// (microseconds there) uploading to one id at the same instant could meet that.
public struct CardArtVersion: Sendable, Hashable {
    /// `image/png` or `application/pdf`.
    public var contentType: String
    /// The file's size in bytes.
    public var byteCount: Int
    /// When uploaded.
    public var updatedAt: Date

    /// Creates a version.
    public init(contentType: String, byteCount: Int, updatedAt: Date) {
        self.contentType = contentType
        self.byteCount = byteCount
        self.updatedAt = updatedAt
    }
}
