import Foundation
import Hummingbird
import Logging
import SDKTestSupport
import Testing
@testable import TokenPlatform

@Suite("Server log handler")
struct ServerLogHandlerTests {
    static func logger(level: Logger.Level = .notice, provider: Logger.MetadataProvider? = nil) -> (Logger, Locked<[String]>) {
        let lines = Locked<[String]>([])
        var logger = Logger(label: "pushprov") { label in
            ServerLogHandler(label: label, metadataProvider: provider) { line in lines.withValue { $0.append(line) } }
        }
        logger.logLevel = level
        return (logger, lines)
    }

    @Test func writesOneLineWithTimeLevelLabelSortedMetadataAndMessage() throws {
        var (logger, lines) = Self.logger()
        logger[metadataKey: "hb.request.id"] = "r-1"
        logger[metadataKey: "b"] = "logger"
        logger.notice("card sealed", metadata: ["b": "event", "a": "1"])
        let line = try #require(lines.current.first)
        #expect(lines.current.count == 1)
        #expect(line.hasSuffix(" notice pushprov: a=1 b=event hb.request.id=r-1 card sealed\n"))
        let stamp = String(line.prefix { $0 != " " })
        #expect(try Date(stamp, strategy: .iso8601) <= Date())
    }

    @Test func aServiceLineLoggedWhileARequestIsServedCarriesItsId() {
        let (logger, lines) = Self.logger(provider: RequestLogContext.metadataProvider)
        let id = RequestID()
        RequestLogContext.$requestID.withValue(id) { logger.notice("signed-cards refused certificate chain") }
        logger.notice("token realignment runs")
        #expect(lines.current.count == 2)
        #expect(lines.current.first?.hasSuffix(" notice pushprov: hb.request.id=\(id) signed-cards refused certificate chain\n") == true, "\(lines.current)")
        #expect(lines.current.last?.contains("hb.request.id") == false, "outside a request: no id")
    }

    @Test func belowTheLevelNothingIsWritten() {
        let (logger, lines) = Self.logger(level: .notice)
        logger.info("quiet")
        logger.debug("quieter")
        #expect(lines.current.isEmpty)
        logger.error("loud")
        #expect(lines.current.count == 1 && lines.current[0].contains(" error pushprov: loud"))
    }

    @Test func theMetadataProviderIsAskedWhenALineIsWrittenAndTheEventWins() {
        let calls = Locked(0)
        let provider = Logger.MetadataProvider {
            calls.withValue { $0 += 1 }
            return ["trace": "t-9", "a": "provider"]
        }
        let (logger, lines) = Self.logger(provider: provider)
        logger.info("skipped")
        #expect(calls.current == 0)
        logger.warning("kept", metadata: ["a": "event"])
        #expect(calls.current == 1)
        #expect(lines.current.first?.hasSuffix(" warning pushprov: a=event trace=t-9 kept\n") == true)
    }

    @Test func copiesKeepTheirOwnMetadataAndLevel() {
        var (first, lines) = Self.logger()
        first[metadataKey: "request"] = "1"
        var second = first
        second[metadataKey: "request"] = "2"
        second.logLevel = .error
        first.notice("one")
        second.notice("dropped")
        second.error("two")
        #expect(lines.current.count == 2)
        #expect(lines.current[0].contains("request=1 one"))
        #expect(lines.current[1].contains("request=2 two"))
    }

    @Test func controlCharactersFromOutsideCannotStartAnotherLine() throws {
        let (logger, lines) = Self.logger()
        logger.warning(
            "token service command failed",
            metadata: ["error": "upstream said: bad\n2026-11-23T00:00:00Z notice pushprov: forged\r\u{1B}[31m\u{85}\u{2028}\u{202E}end", "path": "C:\\tmp\tx"]
        )
        let line = try #require(lines.current.first)
        #expect(lines.current.count == 1)
        #expect(line.filter { $0 == "\n" }.count == 1 && line.hasSuffix("\n"))
        #expect(!line.unicodeScalars.dropLast().contains { $0.value < 0x20 || $0.value == 0x7F || (0x80...0x9F).contains($0.value) || $0.value == 0x2028 || $0.value == 0x202E })
        #expect(line.contains(#"error="upstream said: bad\n2026-11-23T00:00:00Z notice pushprov: forged\r\u001B[31m\u0085\u2028\u202Eend""#))
        #expect(line.contains(#"path="C:\\tmp\tx""#))
    }

    @Test func aValueFromOutsideCannotReadAsMoreKeysOfItsLine() throws {
        struct UpstreamError: Error, CustomStringConvertible { var description: String { #"refused: decision=APPROVED reason="ok""# } }
        let (logger, lines) = Self.logger()
        logger.warning(
            "token service command failed",
            error: UpstreamError(),
            metadata: ["detail": "x=1 admin=true", "empty": "", "quote": #"a"b"#, "slash": #"C:\" end"#, "plain": "r-1", "two words=\"": "k", "ctl": "a\u{1B}b\nc\\d"]
        )
        let line = try #require(lines.current.first)
        #expect(line.hasSuffix(#" warning pushprov: ctl="a\u001Bb\nc\\d" detail="x=1 admin=true" empty="" plain=r-1 quote="a\"b" slash="C:\\\" end" two_words__=k token service command failed error="refused: decision=APPROVED reason=\"ok\""\#n"#), "\(line)")
        // Read back as logfmt: exactly the keys the code wrote, each with its whole value.
        let fields = try Self.logfmtFields(of: String(line.dropLast()))
        #expect(fields.map(\.key) == ["ctl", "detail", "empty", "plain", "quote", "slash", "two_words__"])
        #expect(fields.map(\.value) == ["a\u{1B}b\nc\\d", "x=1 admin=true", "", "r-1", #"a"b"#, #"C:\" end"#, "k"])
    }

    /// The `key=value` fields after the label, as a logfmt reader takes them (a quoted value
    /// runs to its unescaped closing quote, and its escapes — `\\`, `\"`, `\n`, `\r`, `\t`,
    /// `\uXXXX` — stand for their characters), until the first word that is not a field: the
    /// message.
    static func logfmtFields(of line: String) throws -> [(key: String, value: String)] {
        var rest = Substring(try #require(line.range(of: "pushprov: ").map { line[$0.upperBound...] }))
        var fields: [(key: String, value: String)] = []
        while let equals = rest.firstIndex(of: "="), !rest[..<equals].contains(" ") {
            let key = String(rest[..<equals])
            rest = rest[rest.index(after: equals)...]
            var value = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                while let character = rest.first, character != "\"" {
                    guard character == "\\", let next = rest.dropFirst().first else {
                        value.append(character)
                        rest = rest.dropFirst()
                        continue
                    }
                    switch next {
                    case "n": value.append("\n")
                    case "r": value.append("\r")
                    case "t": value.append("\t")
                    case "u":
                        let hex = rest.dropFirst(2).prefix(4)
                        value.unicodeScalars.append(try #require(UInt32(hex, radix: 16).flatMap(Unicode.Scalar.init)))
                        rest = rest.dropFirst(4)
                    default: value.append(next)
                    }
                    rest = rest.dropFirst(2)
                }
                rest = rest.dropFirst()
            } else {
                value = String(rest.prefix { $0 != " " })
                rest = rest.dropFirst(value.count)
            }
            fields.append((key, value))
            rest = rest.drop { $0 == " " }
        }
        return fields
    }

    @Test func plainLinesAreWrittenAsTheyAre() {
        let (logger, lines) = Self.logger()
        logger.notice("card sealed", metadata: ["name": "ünïcode ✓"])
        #expect(lines.current.first?.hasSuffix(#" notice pushprov: name="ünïcode ✓" card sealed\#n"#) == true)
    }

    @Test func logLevelIsReadInAnyCaseAndAnUnknownOneIsSaid() {
        #expect(ServerLogHandler.level(fromEnvironment: "INFO") == (.info, nil))
        #expect(ServerLogHandler.level(fromEnvironment: "warning") == (.warning, nil))
        #expect(ServerLogHandler.level(fromEnvironment: nil) == (.notice, nil))
        #expect(ServerLogHandler.level(fromEnvironment: "") == (.notice, nil))
        let unknown = ServerLogHandler.level(fromEnvironment: "verbose")
        #expect(unknown.0 == .notice)
        #expect(unknown.notice == #"LOG_LEVEL "verbose" is not a level (trace, debug, info, notice, warning, error, critical); logging at notice"#)
    }

    @Test func theTimestampIsTheCurrentSecondFormattedOnceASecond() {
        let base = Date(timeIntervalSince1970: 1_790_000_000)  // 2026-09-21T14:13:20Z
        #expect(ServerLogHandler.timestamp(now: base) == "2026-09-21T14:13:20Z")
        #expect(ServerLogHandler.timestamp(now: base.addingTimeInterval(0.999)) == "2026-09-21T14:13:20Z")
        #expect(ServerLogHandler.timestamp(now: base.addingTimeInterval(1)) == "2026-09-21T14:13:21Z")
        // Back in time (another thread's older clock reading) is formatted too, not the cached second.
        #expect(ServerLogHandler.timestamp(now: base.addingTimeInterval(-1.5)) == "2026-09-21T14:13:18Z")
        #expect(ServerLogHandler.timestamp(now: Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59Z")
    }
}
