import Foundation
import Logging
import NIOConcurrencyHelpers

/// The server's log handler: one line per event on standard error, formatted only when an
/// event is actually written.
///
/// Hummingbird gives every request its own logger with a request id in the metadata. swift-log's
/// `StreamLogHandler` formats its metadata into text each time a value is set, so every request
/// paid for sorting and formatting metadata that, at the default `notice` level, no line ever
/// used. This handler keeps the metadata as values and formats it only in ``log(event:)``.
///
/// Lines read `2026-11-22T02:24:14Z notice pushprov: key=value key="a value" … message`: keys
/// sorted, the handler's metadata, then the metadata provider's, then the event's (later ones
/// win); a value in double quotes when it is empty or holds a space, `=` or `"` (see
/// ``value(_:)``).
public struct ServerLogHandler: LogHandler {
    /// Where finished lines go; standard error unless a test captures them.
    public typealias Sink = @Sendable (String) -> Void

    /// Writes a line to standard error, whole, even when several threads log at once.
    public static let standardError: Sink = { line in
        let bytes = Array(line.utf8)
        lock.withLock {
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                    if written > 0 { offset += written } else if written < 0, errno == EINTR { continue } else { return }
                }
            }
        }
    }
    private static let lock = NIOLock()

    /// The level `LOG_LEVEL`'s `text` names, in any case (`INFO`, `info`), and a notice when it
    /// names none: then `notice`, the default.
    public static func level(fromEnvironment text: String?) -> (Logger.Level, notice: String?) {
        guard let text, !text.isEmpty else { return (.notice, nil) }
        if let level = Logger.Level(rawValue: text.lowercased()) { return (level, nil) }
        let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
        return (.notice, "LOG_LEVEL \(text.debugDescription) is not a level (\(names)); logging at notice")
    }

    /// The logger's label.
    public let label: String
    /// The least severe level written.
    public var logLevel: Logger.Level = .info
    /// The logger's own metadata.
    public var metadata: Logger.Metadata = [:]
    /// Adds metadata to every event when it is written.
    public var metadataProvider: Logger.MetadataProvider?
    private let sink: Sink

    /// A handler writing to `sink` (standard error by default).
    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil, sink: @escaping Sink = ServerLogHandler.standardError) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.sink = sink
    }

    /// One metadata value.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Formats and writes one event.
    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let extra = event.metadata { all.merge(extra) { $1 } }
        var line = Self.timestamp() + " \(event.level) \(label):"
        for (key, value) in all.sorted(by: { $0.key < $1.key }) {
            line += " " + Self.key(key) + "=" + Self.value("\(value)")
        }
        line += " " + Self.escapingControlCharacters("\(event.message)")
        if let error = event.error { line += " error=" + Self.value("\(error)") }
        sink(line + "\n")
    }

    /// A key as written: control characters escaped, and a space, `=` or `"` written `_`, so a
    /// key stays one word of its line (the server's own keys have none: `failed_probes`).
    static func key(_ text: String) -> String {
        let escaped = escapingControlCharacters(text)
        guard escaped.isEmpty || escaped.utf8.contains(where: { $0 == 0x20 || $0 == 0x3D || $0 == 0x22 }) else { return escaped }
        return escaped.isEmpty ? "_" : String(escaped.map { $0 == " " || $0 == "=" || $0 == "\"" ? "_" : $0 })
    }

    /// A value as it follows its `key=`: control characters escaped (see
    /// ``escapingControlCharacters(_:)``), and in double quotes when it is empty or holds a
    /// space, a `=`, a `"` (then written `\"`) or an escape, so text from outside (an error's,
    /// a header's) cannot read as more keys of the same line —
    /// `error="upstream said: decision=APPROVED"` — and a logfmt reader (which reads escapes
    /// only inside quotes) gets the text back as it was.
    static func value(_ text: String) -> String {
        let escaped = escapingControlCharacters(text)
        guard escaped.isEmpty || escaped.utf8.contains(where: { $0 == 0x20 || $0 == 0x3D || $0 == 0x22 || $0 == 0x5C }) else { return escaped }
        return "\"" + escaped.replacing("\"", with: "\\\"") + "\""
    }

    /// The current second as ISO 8601 (`2026-11-22T02:24:14Z`), formatted once per second:
    /// Foundation's formatting costs microseconds, which every line at `info` paid.
    static func timestamp(now: Date = Date()) -> String {
        let second = Int64(now.timeIntervalSince1970.rounded(.down))
        if let cached = lastTimestamp.withLockedValue({ $0.second == second ? $0.text : nil }) { return cached }
        let text = Date(timeIntervalSince1970: Double(second)).formatted(.iso8601)
        lastTimestamp.withLockedValue { $0 = (second, text) }
        return text
    }
    private static let lastTimestamp = NIOLockedValueBox<(second: Int64, text: String)>((.min, ""))

    /// `line` with every control character written as an escape (`\n`, `\r`, `\t`, `\\`,
    /// `\u001B`…, JSON's and logfmt's forms), so a value that reached a log line from outside (an error's text, a header)
    /// cannot end the line early and forge the next one, nor send terminal escapes to whoever
    /// reads the log. A backslash is doubled, so an escape in the log always stands for the
    /// character it names.
    static func escapingControlCharacters(_ line: String) -> String {
        guard line.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0x5C }) || line.unicodeScalars.contains(where: isInvisibleControl) else { return line }
        var escaped = ""
        escaped.reserveCapacity(line.utf8.count + 16)
        for scalar in line.unicodeScalars {
            switch scalar {
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            case "\\": escaped += "\\\\"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || isInvisibleControl(scalar):
                let hex = String(scalar.value, radix: 16, uppercase: true)
                escaped += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// C1 controls, the Unicode line and paragraph separators (which some log viewers also take
    /// as the end of a line), and the bidirectional-text controls (which make a viewer show a
    /// line's parts in another order than they were written).
    private static func isInvisibleControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x80...0x9F, 0x2028, 0x2029, 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
