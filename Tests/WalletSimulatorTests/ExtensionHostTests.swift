#if !canImport(PassKit)
import Crypto
import Foundation
import PassKitShim
import ProvisioningCrypto
import ProvisioningModels
import Testing
import WalletSimulator

/// An issuer's non-UI extension written by hand, with knobs for misbehaving.
final class HandwrittenExtension: PKIssuerProvisioningExtensionHandler, @unchecked Sendable {
    var statusDelay: Duration = .zero
    var answerStatusTwice = false
    var answerGenerate = true
    /// What `status` says.
    var requiresAuthentication = false
    var passEntriesAvailable = true
    var remotePassEntriesAvailable = false
    /// The entries list comes back empty whatever `status` said.
    var offersNothing = false
    /// The account the entry targets (nil: none set).
    var offeredAccount: String?
    /// The entry's title and art size, and a last change to its configuration.
    var title = "World Mastercard"
    var artSize = (width: 1536, height: 969)
    var configure: (PKAddPaymentPassRequestConfiguration) -> Void = { _ in }
    /// How many times Wallet asked for entries (either list) and for card data.
    private(set) var entryCalls = 0
    private(set) var generateCalls = 0
    let leaf: P256.KeyAgreement.PublicKey

    init(leaf: P256.KeyAgreement.PublicKey) {
        self.leaf = leaf
        super.init()
    }

    override func status(completion: @escaping (PKIssuerProvisioningExtensionStatus) -> Void) {
        let status = PKIssuerProvisioningExtensionStatus()
        status.requiresAuthentication = requiresAuthentication
        status.passEntriesAvailable = passEntriesAvailable
        status.remotePassEntriesAvailable = remotePassEntriesAvailable
        if answerStatusTwice {
            // Both answers before `status` returns: the misuse is seen whatever the load on
            // the machine (from a task, the second could come after the host has looked).
            completion(status)
            completion(status)
            return
        }
        let delay = statusDelay
        let transfer = UncheckedBox((completion, status))
        Task {
            if delay > .zero { try? await Task.sleep(for: delay) }
            transfer.value.0(transfer.value.1)
        }
    }

    override func passEntries(completion: @escaping ([PKIssuerProvisioningExtensionPassEntry]) -> Void) {
        let offered = entry(identifier: "card-mc")
        completion(offersNothing ? [] : [offered])
    }

    override func remotePassEntries(completion: @escaping ([PKIssuerProvisioningExtensionPassEntry]) -> Void) {
        completion([entry(identifier: "card-mc:WATCH")])
    }

    private func entry(identifier: String) -> PKIssuerProvisioningExtensionPaymentPassEntry {
        entryCalls += 1
        let configuration = PKAddPaymentPassRequestConfiguration(encryptionScheme: .ECC_V2)!
        configuration.cardholderName = "Alice Appleseed"
        configuration.primaryAccountSuffix = "4444"
        configuration.paymentNetwork = .masterCard
        configuration.primaryAccountIdentifier = offeredAccount
        configure(configuration)
        let art = CGImage(passKitShimWidth: artSize.width, height: artSize.height, data: Data())
        return PKIssuerProvisioningExtensionPaymentPassEntry(identifier: identifier, title: title, art: art, addRequestConfiguration: configuration)!
    }

    override func generateAddPaymentPassRequestForPassEntryWithIdentifier(_ identifier: String, configuration: PKAddPaymentPassRequestConfiguration, certificateChain certificates: [Data], nonce: Data, nonceSignature: Data, completionHandler completion: @escaping (PKAddPaymentPassRequest?) -> Void) {
        generateCalls += 1
        guard answerGenerate else { return }
        let payload = try! PassDataPayload(primaryAccountNumber: PrimaryAccountNumber("5555555555554444"), expiration: CardExpiration("12/30"), name: "Alice Appleseed", nonce: nonce, nonceSignature: nonceSignature)
        let sealed = try! ECCV2.seal(payload.jsonData(), for: leaf)
        let request = PKAddPaymentPassRequest()
        request.encryptedPassData = sealed.encryptedData
        request.ephemeralPublicKey = sealed.ephemeralPublicKey
        completion(request)
    }
}

/// An issuer's authorization extension written by hand: Wallet sets its handler, the test
/// plays the cardholder.
final class HandwrittenAuthorization: NSObject, PKIssuerProvisioningExtensionAuthorizationProviding {
    var completionHandler: ((PKIssuerProvisioningExtensionAuthorizationResult) -> Void)?
}

/// Carries a non-Sendable value into a task, for the hand-written extension above.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

@Suite("Simulated extension host", .serialized)
@MainActor
struct ExtensionHostTests {
    let pki: SimulatedApplePKI
    let wallet = SimulatedWallet()

    init() throws {
        pki = try SimulatedApplePKI()
    }

    func host(statusBudget: Duration = .milliseconds(100), generateBudget: Duration = .seconds(20)) -> SimulatedExtensionHost {
        SimulatedExtensionHost(wallet: wallet, pki: pki, network: ScriptedNetwork(.approved(tokenUniqueReference: "DNITHEX", tokenLast4: "4321")), statusBudget: statusBudget, generateBudget: generateBudget)
    }

    @Test func statusInsideTheBudgetIsUsedAndMeasured() async throws {
        // A generous budget: this checks the answer is used and timed, not how fast a loaded
        // test machine schedules it (the 100 ms default is what the demo enforces). The answer
        // comes from a main-actor task, queued behind the main-actor work of every other
        // suite running meanwhile: on two busy cores that once took more than 10 s.
        let call = await host(statusBudget: .seconds(60)).status(of: HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey))
        #expect(call.value == .init(requiresAuthentication: false, passEntriesAvailable: true, remotePassEntriesAvailable: false))
        #expect(call.elapsed != nil)
        #expect(call.violations.isEmpty)
    }

    @Test func aLateStatusIsIgnoredAndReported() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.statusDelay = .milliseconds(400)
        let call = await host(statusBudget: .milliseconds(20)).status(of: handler)
        #expect(call.value == nil)
        #expect(call.violations == ["status's completion handler was not called within 0.02 seconds"])
    }

    @Test func aStatusAnsweredTwiceIsReported() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.answerStatusTwice = true
        let call = await host(statusBudget: .seconds(10)).status(of: handler)
        #expect(call.value != nil)
        #expect(call.violations == ["status's completion handler was called 2 times"])
    }

    /// Generous budgets where what is checked is not the budget: `status` answers from a
    /// main-actor task, which a loaded machine can hold back for seconds.
    func patientHost(generateBudget: Duration = .seconds(20)) -> SimulatedExtensionHost {
        host(statusBudget: .seconds(60), generateBudget: generateBudget)
    }

    /// The entries Wallet gets after a status that allows them.
    func offered(by handler: HandwrittenExtension, host: SimulatedExtensionHost, for device: DeviceType = .phone) async throws -> [SimulatedExtensionHost.Entry] {
        #expect(await host.status(of: handler).value != nil)
        let entries = await host.entries(of: handler, for: device)
        #expect(entries.violations.isEmpty)
        return try #require(entries.value)
    }

    @Test func anEntryIsAddedThroughGenerateAppleAndTheNetwork() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        let host = patientHost()
        let entry = try #require(try await offered(by: handler, host: host).first)
        #expect(entry.identifier == "card-mc")
        #expect(entry.device == .phone)
        #expect(entry.artWidth == 1536 && entry.artHeight == 969)
        let added = await host.add(entry, handler: handler)
        #expect(added.failure == nil)
        #expect(added.call.value?.deviceAccountIdentifier == "DNITHEX")
        #expect(added.call.value?.primaryAccountNumberSuffix == "4444")
        #expect(wallet.passes(on: .phone).count == 1)
        // An extension that offers the same card for the same device again: Wallet does not
        // add it there.
        handler.offeredAccount = try #require(added.call.value?.primaryAccountIdentifier)
        let offeredAgain = await host.entries(of: handler, for: .phone)
        #expect(offeredAgain.violations == ["the entry card-mc offers a card already on the iPhone"])
        let again = try #require(offeredAgain.value?.first)
        #expect(await host.add(again, handler: handler).failure == "the entry is for a card already on the iPhone")
        #expect(wallet.passes(on: .phone).count == 1)
    }

    @Test func aWatchEntryIsAddedToTheWatch() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.remotePassEntriesAvailable = true
        let host = patientHost()
        let entry = try #require(try await offered(by: handler, host: host, for: .watch).first)
        #expect(entry.device == .watch)
        let added = await host.add(entry, handler: handler)
        #expect(added.failure == nil)
        #expect(added.call.value?.device == .watch)
        #expect(wallet.passes(on: .watch).count == 1 && wallet.passes(on: .phone).isEmpty)
    }

    /// Without a paired Apple Watch, Wallet asks for no Watch entries and adds none: the
    /// handler is not called, and the call is a violation (before, the list was asked for and
    /// the add failed as "already on the Apple Watch").
    @Test func withoutAPairedWatchWalletAsksForNoWatchEntries() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.remotePassEntriesAvailable = true
        let host = patientHost()
        let entry = try #require(try await offered(by: handler, host: host, for: .watch).first)
        wallet.setConfiguration(.init(hasPairedWatch: false))
        let entries = await host.entries(of: handler, for: .watch)
        #expect(entries.value == nil)
        #expect(entries.violations == ["Wallet does not ask remotePassEntries: no Apple Watch is paired"])
        let added = await host.add(entry, handler: handler)
        #expect(added.failure == "Wallet does not ask generateAddPaymentPassRequest: no Apple Watch is paired")
        #expect(handler.generateCalls == 0)
        #expect(wallet.allPasses.isEmpty)
    }

    @Test func aMissingRequestFailsAtTheBudget() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.answerGenerate = false
        let host = patientHost(generateBudget: .milliseconds(30))
        let entry = try #require(try await offered(by: handler, host: host).first)
        let added = await host.add(entry, handler: handler)
        #expect(added.failure == "the extension did not answer within 0.03 seconds")
        #expect(added.call.violations == ["generateAddPaymentPassRequest's completion handler was not called within 0.03 seconds"])
        #expect(wallet.allPasses.isEmpty)
    }

    @Test func onADeviceThatCannotAddPaymentCardsNothingIsAdded() async throws {
        wallet.setConfiguration(.init(hasPairedWatch: false, canAddPaymentPassAnswersTrueThoughNothingCanBeAdded: true))
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        let host = patientHost()
        let entry = try #require(try await offered(by: handler, host: host).first)
        let added = await host.add(entry, handler: handler)
        #expect(added.failure == "this device cannot add payment cards to Wallet")
        #expect(added.call.violations.isEmpty)
        #expect(handler.generateCalls == 0)
        #expect(wallet.allPasses.isEmpty)
    }

    // MARK: What an entry must carry

    enum EntryDefect: String, CaseIterable, Sendable {
        case noCardholderName, blankCardholderName, noLastDigits, noPaymentNetwork, noTitle, smallArt, portraitArt
    }

    @Test(arguments: EntryDefect.allCases)
    func anEntryWithoutWhatAppleRequiresIsAViolation(_ defect: EntryDefect) async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        let expected: String
        switch defect {
        case .noCardholderName:
            handler.configure = { $0.cardholderName = nil }
            expected = "the entry card-mc has no cardholder name"
        case .blankCardholderName:
            handler.configure = { $0.cardholderName = "  " }
            expected = "the entry card-mc has no cardholder name"
        case .noLastDigits:
            handler.configure = { $0.primaryAccountSuffix = nil }
            expected = "the entry card-mc has no last digits of the card (primaryAccountSuffix)"
        case .noPaymentNetwork:
            handler.configure = { $0.paymentNetwork = nil }
            expected = "the entry card-mc names no payment network"
        case .noTitle:
            handler.title = ""
            expected = "the entry card-mc has no title"
        case .smallArt:
            handler.artSize = (768, 484)
            expected = "the entry card-mc has art of 768×484 pixels, not 1536×969"
        case .portraitArt:
            handler.artSize = (969, 1536)
            expected = "the entry card-mc has art of 969×1536 pixels, not 1536×969"
        }
        let host = patientHost()
        _ = await host.status(of: handler)
        let entries = await host.entries(of: handler, for: .phone)
        #expect(entries.violations == [expected])
        #expect(entries.value?.map(\.identifier) == ["card-mc"], "the entries come back as answered")
    }

    @Test func anEntryCarriesItsPaymentNetwork() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        let entry = try #require(try await offered(by: handler, host: patientHost()).first)
        #expect(entry.paymentNetwork == "MasterCard")
    }

    @Test func anEntryForACardAlreadyOnThatDeviceIsAViolation() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.remotePassEntriesAvailable = true
        let host = patientHost()
        let entry = try #require(try await offered(by: handler, host: host).first)
        let pass = try #require(await host.add(entry, handler: handler).call.value)
        // By its account. An entry naming none is not judged: a pass with the same last digits
        // may be another card of the issuer's that ends alike.
        handler.offeredAccount = pass.primaryAccountIdentifier
        #expect(await host.entries(of: handler, for: .phone).violations == ["the entry card-mc offers a card already on the iPhone"])
        handler.offeredAccount = nil
        #expect(await host.entries(of: handler, for: .phone).violations.isEmpty)
        handler.offeredAccount = pass.primaryAccountIdentifier
        // The iPhone's pass does not make the card present on the Watch.
        #expect(await host.entries(of: handler, for: .watch).violations.isEmpty)
        // Nor does a deactivated pass count.
        wallet.setActivationState(.deactivated, deviceAccountIdentifier: pass.deviceAccountIdentifier)
        #expect(await host.entries(of: handler, for: .phone).violations.isEmpty)
    }

    // MARK: Wallet's order

    @Test func walletAsksForEntriesOnlyAfterAStatusThatOffersCardsForThatDevice() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        let host = patientHost()
        let unasked = await host.entries(of: handler, for: .phone)
        #expect(unasked.value == nil)
        #expect(unasked.violations == ["Wallet does not ask passEntries: status has not answered within its budget"])

        // The status offers cards for the iPhone only.
        #expect(await host.status(of: handler).value == .init(requiresAuthentication: false, passEntriesAvailable: true, remotePassEntriesAvailable: false))
        let watch = await host.entries(of: handler, for: .watch)
        #expect(watch.value == nil)
        #expect(watch.violations == ["Wallet does not ask remotePassEntries: status said no cards can be added to the Apple Watch"])
        #expect(handler.entryCalls == 0, "the extension was asked out of Wallet's order")
        let phone = await host.entries(of: handler, for: .phone)
        #expect(phone.value?.map(\.identifier) == ["card-mc"])
        #expect(phone.violations.isEmpty)

        // A later status saying none are left: Wallet stops asking.
        handler.passEntriesAvailable = false
        _ = await host.status(of: handler)
        #expect(await host.entries(of: handler, for: .phone).violations == ["Wallet does not ask passEntries: status said no cards can be added to the iPhone"])
        #expect(handler.entryCalls == 1)
    }

    /// `passEntriesAvailable` promises at least one entry: an empty list after it is reported
    /// (Wallet would show the issuer with nothing to add).
    @Test func anEmptyListAfterAStatusThatPromisedEntriesIsAViolation() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.offersNothing = true
        let host = patientHost()
        _ = await host.status(of: handler)
        let entries = await host.entries(of: handler, for: .phone)
        #expect(entries.value == [])
        #expect(entries.violations == ["status said cards can be added to the iPhone, but passEntries offered none"])
    }

    @Test func aLateStatusLetsWalletAskForNothing() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        let host = patientHost()
        let entry = try #require(try await offered(by: handler, host: host).first)
        // The next status comes too late: Wallet neither lists nor adds.
        handler.statusDelay = .milliseconds(400)
        var impatient = host
        impatient.statusBudget = .milliseconds(20)
        #expect(await impatient.status(of: handler).value == nil)
        #expect(await host.entries(of: handler, for: .phone).violations == ["Wallet does not ask passEntries: status has not answered within its budget"])
        let added = await host.add(entry, handler: handler)
        #expect(added.call.value == nil)
        #expect(added.failure == "Wallet does not ask generateAddPaymentPassRequest: status has not answered within its budget")
        #expect(added.call.violations == [added.failure])
        #expect(handler.entryCalls == 1 && handler.generateCalls == 0)
        #expect(wallet.allPasses.isEmpty)
    }

    @Test func walletAsksForEntriesOnlyOnceTheCardholderHasAuthenticated() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.requiresAuthentication = true
        let host = patientHost()
        let screen = HandwrittenAuthorization()
        let refusal = ["Wallet does not ask passEntries: status said the cardholder must authenticate, and no authorization has succeeded since"]

        // An authorization before the status that asks for one does not count.
        #expect(await host.authorize(screen) { screen.completionHandler?(.authorized) }.value == .authorized)
        #expect(await host.status(of: handler).value?.requiresAuthentication == true)
        #expect(await host.entries(of: handler, for: .phone).violations == refusal)
        // Nor does a cancelled one.
        #expect(await host.authorize(screen) { screen.completionHandler?(.canceled) }.value == .canceled)
        #expect(await host.entries(of: handler, for: .phone).violations == refusal)
        #expect(handler.entryCalls == 0, "the extension was asked before the cardholder authenticated")

        #expect(await host.authorize(screen) { screen.completionHandler?(.authorized) }.value == .authorized)
        let entries = await host.entries(of: handler, for: .phone)
        #expect(entries.violations.isEmpty)
        #expect(entries.value?.count == 1)
    }

    @Test func aLaterStatusThatNoLongerRequiresAuthenticationAlsoLetsWalletAsk() async throws {
        let handler = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        handler.requiresAuthentication = true
        let host = patientHost()
        _ = await host.status(of: handler)
        #expect(await host.entries(of: handler, for: .phone).value == nil)
        handler.requiresAuthentication = false
        _ = await host.status(of: handler)
        let entries = await host.entries(of: handler, for: .phone)
        #expect(entries.violations.isEmpty)
        #expect(entries.value?.count == 1)
    }

    @Test func walletAddsOnlyAnEntryTheHandlersLastListOffered() async throws {
        let offering = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        let other = HandwrittenExtension(leaf: pki.leafPrivateKey.publicKey)
        let host = patientHost()
        let entry = try #require(try await offered(by: offering, host: host).first)
        // Another handler, whose status allows entries but which listed none.
        _ = await host.status(of: other)
        let elsewhere = await host.add(entry, handler: other)
        #expect(elsewhere.call.value == nil)
        #expect(elsewhere.failure == "Wallet does not ask generateAddPaymentPassRequest: the extension's last passEntries answer did not offer this entry (card-mc)")
        #expect(elsewhere.call.violations == [elsewhere.failure])
        // Nor an entry changed after it was offered.
        var changed = entry
        changed.primaryAccountIdentifier = "PAI-OTHER"
        #expect(await host.add(changed, handler: offering).failure == "Wallet does not ask generateAddPaymentPassRequest: the extension's last passEntries answer did not offer this entry (card-mc)")
        #expect(offering.generateCalls == 0 && other.generateCalls == 0)
        #expect(wallet.allPasses.isEmpty)
        // The entry as offered is added.
        #expect(await host.add(entry, handler: offering).failure == nil)
    }
}
#endif
