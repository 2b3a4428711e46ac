import Foundation

/// The issuer's activation deep link as configured at the card network, e.g.
/// `bankapp://wallet-activation?serialNumber=…` or
/// `https://bank.example/wallet/activate?serialNumber=…`.
public struct ActivationLinkRoute: Sendable, Hashable {
    /// The longest link accepted, in characters.
    public static let maximumLinkLength = 2048
    /// The longest serial number accepted, in characters.
    public static let maximumSerialNumberLength = 128
    /// The query item carrying the pass's serial number.
    public static let serialNumberItem = "serialNumber"

    /// The URL scheme, compared without regard to case.
    public var scheme: String
    /// The host, compared without regard to case; nil accepts any.
    public var host: String?
    /// The path, compared exactly, as it is written in the link (a path spelled with
    /// percent-escapes, `/wallet%2Factivate`, is another path); nil accepts only an empty path
    /// or `/` (`bankapp://wallet-activation?…`), never further segments.
    public var path: String?

    /// Creates a route.
    public init(scheme: String, host: String?, path: String? = nil) {
        self.scheme = scheme
        self.host = host
        self.path = path
    }

    /// The serial number of the pass to activate, or why `url` is not a valid activation link.
    public func serialNumber(in url: URL) throws(ActivationError) -> String {
        let text = url.absoluteString
        guard text.count <= Self.maximumLinkLength else {
            throw ActivationError(.malformedLink, "the link has \(text.count) characters; at most \(Self.maximumLinkLength) are accepted")
        }
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw ActivationError(.malformedLink, "the link is not a valid URL")
        }
        guard components.scheme?.lowercased() == scheme.lowercased() else {
            throw ActivationError(.malformedLink, "the link's scheme is not \(scheme)")
        }
        if let host, components.host?.lowercased() != host.lowercased() {
            throw ActivationError(.malformedLink, "the link's host is not \(host)")
        }
        // The network's link has none of these; a link with them is not the one configured.
        guard components.user == nil, components.password == nil, components.port == nil, components.fragment == nil else {
            throw ActivationError(.malformedLink, "the link has a user, password, port or fragment")
        }
        if let path {
            guard components.percentEncodedPath == path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) else {
                throw ActivationError(.malformedLink, "the link's path is not \(path)")
            }
        } else if !(components.percentEncodedPath.isEmpty || components.percentEncodedPath == "/") {
            throw ActivationError(.malformedLink, "the link's path is not empty")
        }
        let values = (components.queryItems ?? []).filter { $0.name == Self.serialNumberItem }.map { $0.value ?? "" }
        guard values.count == 1, let serialNumber = values.first else {
            throw ActivationError(
                .malformedLink,
                values.isEmpty ? "the link has no \(Self.serialNumberItem)" : "the link has \(values.count) \(Self.serialNumberItem) items; exactly one is accepted"
            )
        }
        guard !serialNumber.isEmpty else {
            throw ActivationError(.malformedLink, "\(Self.serialNumberItem) is empty")
        }
        guard serialNumber.count <= Self.maximumSerialNumberLength else {
            throw ActivationError(.malformedLink, "\(Self.serialNumberItem) has \(serialNumber.count) characters; at most \(Self.maximumSerialNumberLength) are accepted")
        }
        guard !serialNumber.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ActivationError(.malformedLink, "\(Self.serialNumberItem) contains control characters")
        }
        return serialNumber
    }
}
