import Foundation
import Testing
import WalletSimulator

@Suite("Activation link format")
struct ActivationLinkFormatTests {
    @Test func carriesTheSerialNumberPercentEncodedAndReadsItBack() {
        let format = ActivationLinkFormat()
        let link = format.link(serialNumber: "A&B=C D")
        #expect(link.absoluteString == "pushprov-issuer://wallet/activate?serialNumber=A%26B%3DC%20D")
        #expect(format.serialNumber(in: link) == "A&B=C D")
    }

    @Test func aUniversalLinkFormatWithItsOwnQueryItem() throws {
        let format = ActivationLinkFormat(scheme: "https", host: "bank.example", path: "/wallet/activate", serialNumberQueryItem: "pass")
        let link = format.link(serialNumber: "SN-42")
        #expect(link.absoluteString == "https://bank.example/wallet/activate?pass=SN-42")
        #expect(format.serialNumber(in: link) == "SN-42")
    }

    @Test func readsNothingFromOtherLinks() throws {
        let format = ActivationLinkFormat()
        for text in ["https://wallet/activate?serialNumber=1", "pushprov-issuer://other/activate?serialNumber=1", "pushprov-issuer://wallet/activate?serial=1", "pushprov-issuer://wallet/activate?serialNumber="] {
            #expect(format.serialNumber(in: try #require(URL(string: text))) == nil, "\(text)")
        }
    }
}
