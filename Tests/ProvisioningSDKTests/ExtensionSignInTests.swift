import Foundation
import ProvisioningSDK
import SDKTestSupport
import Testing

/// The authorization extension's sign-in: the session it leaves and how long it lives.
@Suite("Wallet extension: sign-in")
struct ExtensionSignInTests {
    struct WrongPassword: Error {}

    /// An unsigned JWT whose payload carries `exp`.
    static func jwt(exp: TimeInterval) -> String {
        let payload = Data(#"{"sub":"alice","exp":\#(Int(exp))}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        return "eyJhbGciOiJFUzI1NiJ9.\(payload).c2ln"
    }

    @Test func theSessionLivesFiveMinutesByDefault() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let date = FixedDate()
        let secrets = FileSecretStore(directory: folder.url)
        let session = try await ExtensionSignIn(secrets: secrets, now: date.function).signIn {
            SignedInCardholder(cardholderToken: "opaque-token", userId: "alice")
        }
        #expect(session.expiresAt == date.now.addingTimeInterval(300))
        let store = ExtensionSessionStore(secrets: secrets)
        #expect(store.validSession(at: date.now)?.cardholderToken == "opaque-token")
        date.advance(299)
        #expect(store.validSession(at: date.now) != nil)
        date.advance(1)
        #expect(store.validSession(at: date.now) == nil)
    }

    @Test func theSessionNeverOutlivesTheToken() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let date = FixedDate()
        let signIn = ExtensionSignIn(secrets: FileSecretStore(directory: folder.url), lifetime: .seconds(600), now: date.function)
        let fromJWT = try await signIn.signIn { SignedInCardholder(cardholderToken: Self.jwt(exp: date.now.timeIntervalSince1970 + 120), userId: "alice") }
        #expect(fromJWT.expiresAt == date.now.addingTimeInterval(120))
        let explicit = try await signIn.signIn { SignedInCardholder(cardholderToken: "opaque", userId: "alice", tokenExpiresAt: date.now.addingTimeInterval(30)) }
        #expect(explicit.expiresAt == date.now.addingTimeInterval(30))
        let longLived = try await signIn.signIn { SignedInCardholder(cardholderToken: Self.jwt(exp: date.now.timeIntervalSince1970 + 86_400), userId: "alice") }
        #expect(longLived.expiresAt == date.now.addingTimeInterval(600))
    }

    @Test func anExpiredTokenIsRefusedAndNothingIsStored() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let date = FixedDate()
        let secrets = FileSecretStore(directory: folder.url)
        await #expect(throws: ExtensionSignIn.Failure.tokenExpired) {
            try await ExtensionSignIn(secrets: secrets, now: date.function).signIn { SignedInCardholder(cardholderToken: Self.jwt(exp: date.now.timeIntervalSince1970 - 1), userId: "alice") }
        }
        #expect(try secrets.secret(for: ExtensionSessionStore.key) == nil)
    }

    @Test func aFailedAttemptKeepsTheEarlierSession() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let date = FixedDate()
        let secrets = FileSecretStore(directory: folder.url)
        let signIn = ExtensionSignIn(secrets: secrets, now: date.function)
        _ = try await signIn.signIn { SignedInCardholder(cardholderToken: "first", userId: "alice") }
        await #expect(throws: ExtensionSignIn.Failure.self) {
            try await signIn.signIn { throw WrongPassword() }
        }
        #expect(ExtensionSessionStore(secrets: secrets).validSession(at: date.now)?.cardholderToken == "first")
    }

    /// An error carrying a callback URL with an authorization code, as an OAuth sign-in's can.
    struct CallbackFailed: LocalizedError, CustomStringConvertible {
        var description: String { "CallbackFailed(url: bank://signin?code=SECRET-CODE)" }
        var errorDescription: String? { "The bank's sign-in page could not be reached." }
    }

    /// Neither a failed sign-in's reason nor a signed-in cardholder's description shows a
    /// secret: the error's localized description only, and the token redacted.
    @Test func noDescriptionShowsTheTokenOrTheSignInsSecrets() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let signIn = ExtensionSignIn(secrets: FileSecretStore(directory: folder.url))
        let failure = await #expect(throws: ExtensionSignIn.Failure.self) {
            try await signIn.signIn { throw CallbackFailed() }
        }
        #expect(failure?.description == "sign-in failed: The bank's sign-in page could not be reached.")
        let urlFailure = await #expect(throws: ExtensionSignIn.Failure.self) {
            try await signIn.signIn { throw URLError(.cannotConnectToHost, userInfo: [NSURLErrorFailingURLErrorKey: URL(string: "bank://signin?code=SECRET-CODE")!]) }
        }
        #expect(urlFailure.map { !$0.description.contains("SECRET-CODE") } == true, "\(String(describing: urlFailure))")

        let cardholder = SignedInCardholder(cardholderToken: "eyJ.secret-jwt.sig", userId: "alice")
        let session = ExtensionSession(cardholderToken: "eyJ.secret-jwt.sig", expiresAt: Date(timeIntervalSince1970: 0), userId: "alice")
        func dumped(_ value: Any) -> String {
            var text = ""
            dump(value, to: &text)
            return text
        }
        for text in ["\(cardholder)", String(reflecting: cardholder), dumped(cardholder), dumped(session)] {
            #expect(!text.contains("secret-jwt") && text.contains("alice"), "\(text)")
        }
        let request = TransportRequest(method: "POST", url: URL(string: "https://tmp.example/issuer/push-provisioning/cards")!, headers: ["Authorization": "Bearer eyJ.secret-jwt.sig", "Content-Type": "application/json"], body: Data("{}".utf8), timeout: .seconds(5))
        #expect("\(request)" == "POST https://tmp.example/issuer/push-provisioning/cards [Authorization: <redacted>, Content-Type: application/json] 2 bytes")
        let dumpedRequest = dumped(request)
        #expect(!dumpedRequest.contains("secret-jwt") && dumpedRequest.contains("<redacted>") && dumpedRequest.contains("bodyBytes: 2"), "\(dumpedRequest)")
    }

    @Test func expiryIsReadOnlyFromAWellFormedJWT() {
        #expect(ExtensionSignIn.expiry(ofJWT: Self.jwt(exp: 1_790_000_000)) == Date(timeIntervalSince1970: 1_790_000_000))
        #expect(ExtensionSignIn.expiry(ofJWT: "opaque") == nil)
        #expect(ExtensionSignIn.expiry(ofJWT: "a.%%%.c") == nil)
        #expect(ExtensionSignIn.expiry(ofJWT: "a.e30.c") == nil)
    }
}
