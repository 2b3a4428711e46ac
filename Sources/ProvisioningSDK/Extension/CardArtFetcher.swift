import Foundation
import ProvisioningModels

/// Fetches cards' art from TMP (`GET cards/{id}/art`) into the shared folder, storing only
/// art that passes `CardArtValidator`. Used by the app (in the background, after it writes a
/// snapshot) and by the non-UI extension (for a card new since the snapshot).
public struct CardArtFetcher: Sendable {
    /// TMP.
    public let client: TMPClient
    /// The shared folder.
    public let directory: SharedWalletDirectory

    /// Creates a fetcher.
    public init(client: TMPClient, directory: SharedWalletDirectory) {
        self.client = client
        self.directory = directory
    }

    /// Why a card's art was not stored.
    public enum Failure: Error, Sendable, Hashable {
        /// TMP could not be asked, or refused.
        case download(TMPClientError)
        /// TMP's file is not art Apple accepts; nothing was stored.
        case invalidArt(CardArtError)
        /// The file could not be written.
        case storage(String)
    }

    /// Fetches, validates and stores one card's art; returns its file name.
    public func fetch(externalCardId: String, timeout: Duration? = nil) async throws(Failure) -> String {
        try store(try await download(externalCardId: externalCardId, timeout: timeout), externalCardId: externalCardId)
    }

    /// Fetches one card's art without storing it.
    public func download(externalCardId: String, timeout: Duration? = nil) async throws(Failure) -> CardArtDownload {
        do {
            return try await client.cardArt(externalCardId: externalCardId, timeout: timeout)
        } catch {
            throw .download(error)
        }
    }

    /// Stores downloaded art if `CardArtValidator` accepts it; returns its file name.
    public func store(_ download: CardArtDownload, externalCardId: String) throws(Failure) -> String {
        do {
            return try directory.storeArt(download.data, declaredContentType: download.contentType, externalCardId: externalCardId)
        } catch let error as CardArtError {
            throw .invalidArt(error)
        } catch {
            throw .storage(String(describing: error))
        }
    }

    /// Fetches the art of each card in turn, stopping early when the calling task is
    /// cancelled; returns the file names stored, by card id. Failures leave a card without art.
    public func fetchAll(_ externalCardIds: [String]) async -> [String: String] {
        var stored: [String: String] = [:]
        for id in externalCardIds {
            if Task.isCancelled { break }
            if let name = try? await fetch(externalCardId: id) { stored[id] = name }
        }
        return stored
    }
}

extension SharedWalletDirectory {
    /// The art file stored for each card of `status` that has art at TMP.
    public func artFileNames(for status: WalletStatusSnapshot) -> [String: String] {
        var names: [String: String] = [:]
        for card in status.cards where card.card.artURL != nil {
            names[card.id] = storedArtFileName(externalCardId: card.id)
        }
        return names
    }

    /// The cards of `status` with art at TMP whose art is missing here, or older than
    /// `maximumAge` at `now`.
    public func cardsNeedingArt(in status: WalletStatusSnapshot, now: Date, maximumAge: TimeInterval) -> [String] {
        status.cards.filter { card in
            guard card.card.artURL != nil, CardIdentifier.isValid(card.id) else { return false }
            guard let name = storedArtFileName(externalCardId: card.id), let written = artModificationDate(fileName: name) else { return true }
            return now.timeIntervalSince(written) > maximumAge
        }.map(\.id)
    }
}
