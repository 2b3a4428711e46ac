import Foundation
import ProvisioningModels
import SDKTestSupport
import TMPTestSupport
import TestSupport
import Testing
@testable import TokenPlatform

/// Card art is checked against the card-art rules once per file and process, not on every
/// request that serves it.
@Suite("Card-art verdicts")
struct CardArtVerdictTests {
    /// A file is checked once per process: the upload's verdict serves the GETs that follow,
    /// and a stored file a GET meets first is checked by that GET only. Another file under
    /// the same id is checked anew.
    @Test func cardArtIsCheckedOnceNotOnEveryRequest() async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let verdicts = platform.environment.cardArtVerdicts
            let png = TestPNG.file(width: 1536, height: 969)
            try await platform.putAliceCard(showing: png, contentType: "image/png", as: "art-1", through: api)
            #expect(verdicts.checks == 1)
            for _ in 0..<3 {
                #expect(try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice")).body == png)
            }
            #expect(verdicts.checks == 1)

            // Stored without this process's upload (another instance, an earlier run).
            let pdf = TestPDF.onePage().data
            try await platform.storeArtDirectly("art-1", contentType: "application/pdf", data: pdf)
            for _ in 0..<3 {
                #expect(try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice")).body == pdf)
            }
            #expect(verdicts.checks == 2)
        }
    }

    /// An upload sent without a content type, or with another spelling of it, is stored under
    /// its format's media type; its verdict is kept under that type too, so the first GET does
    /// not check the file again.
    @Test(arguments: [nil, "image/png; charset=binary", "Image/PNG"] as [String?])
    func anUploadsVerdictServesTheFirstGETWhateverTypeItWasSentWith(contentType: String?) async throws {
        let platform = try await TestPlatform()
        try await platform.run { api in
            let verdicts = platform.environment.cardArtVerdicts
            let png = TestPNG.file(width: 1536, height: 969)
            let upload = try await api.send(.put, "/lifecycle/card-art/art-1", as: .issuer, raw: png, contentType: contentType)
            try #require(upload.status == .ok, "\(upload.text)")
            let card = try await api.send(.put, "/lifecycle/cards/c1", as: .issuer, json: CardUpsertRequest(
                userId: "alice", primaryAccountNumber: try PrimaryAccountNumber("4111111111111111"), expiration: try CardExpiration("12/29"),
                cardholderName: "Alice", network: .visa, productTitle: "Gold", artId: "art-1"
            ))
            try #require(card.status == .created, "\(card.text)")
            let checks = verdicts.checks
            #expect(try await api.send(.get, "/issuer/push-provisioning/cards/c1/art", as: .cardholder("alice")).body == png)
            #expect(verdicts.checks == checks)
        }
    }

    /// Calls that miss on the same file together share one check: the first check is held
    /// until all three calls have asked, so none of them can find a finished verdict.
    @Test func callsMissingTogetherOnOneFileShareItsCheck() async throws {
        let release = DispatchSemaphore(value: 0)
        let verdicts = CardArtVerdicts { data, type in
            release.wait()
            return CardArtValidator.validate(data, declaredContentType: type)
        }
        let file = TestPDF.onePage().data
        async let first = verdicts.verdict(on: file, declaredContentType: "application/pdf")
        async let second = verdicts.verdict(on: file, declaredContentType: "application/pdf")
        async let third = verdicts.verdict(on: file, declaredContentType: "application/pdf")
        let deadline = ContinuousClock.now + .seconds(60)
        while verdicts.calls < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        try #require(verdicts.calls == 3, "the three calls never all asked")
        #expect(verdicts.checks == 1)
        // Enough for every check started; only one may have been.
        for _ in 0..<3 { release.signal() }
        let answers = await [first, second, third]
        #expect(answers.allSatisfy { (try? $0.get()) != nil })
        #expect(verdicts.checks == 1)
    }

    /// The verdicts kept are bounded: past the capacity the oldest is checked again.
    @Test func theCardArtVerdictsKeptAreBounded() async throws {
        let verdicts = CardArtVerdicts(capacity: 2)
        let files = [TestPNG.file(width: 1536, height: 969), TestPDF.onePage().data, TestPNG.file(width: 1024, height: 768)]
        for file in files { _ = await verdicts.verdict(on: file, declaredContentType: nil) }
        #expect(verdicts.checks == 3)
        // The two newest are kept; the same bytes with another declared type are another file.
        _ = await verdicts.verdict(on: files[2], declaredContentType: nil)
        _ = await verdicts.verdict(on: files[1], declaredContentType: nil)
        #expect(verdicts.checks == 3)
        let refused = await verdicts.verdict(on: files[1], declaredContentType: "image/png")
        #expect(verdicts.checks == 4)
        guard case .failure(let refusal) = refused else {
            Issue.record("a PDF declared as PNG was accepted")
            return
        }
        #expect(refusal.code == .contentTypeMismatch)
        _ = await verdicts.verdict(on: files[0], declaredContentType: nil)
        #expect(verdicts.checks == 5)
    }
}
