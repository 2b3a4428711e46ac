import Foundation

/// How the token service builds the link that opens the issuer app to activate a yellow-path
/// pass: the issuer's scheme, host and path, with the pass's serial number as a query item.
///
/// The default, `pushprov-issuer://wallet/activate?serialNumber=…`, is a custom URL scheme;
/// a universal link is `ActivationLinkFormat(scheme: "https", host: "bank.example", path: "/wallet/activate")`.
public struct ActivationLinkFormat: Sendable, Hashable {
    /// The URL scheme, e.g. `pushprov-issuer` or `https`.
    public var scheme: String
    /// The host.
    public var host: String
    /// The path, empty or starting with `/`.
    public var path: String
    /// The name of the query item carrying the serial number.
    public var serialNumberQueryItem: String

    /// Creates a format.
    public init(scheme: String = "pushprov-issuer", host: String = "wallet", path: String = "/activate", serialNumberQueryItem: String = "serialNumber") {
        self.scheme = scheme
        self.host = host
        self.path = path
        self.serialNumberQueryItem = serialNumberQueryItem
    }

    /// The link for the pass with `serialNumber` (percent-encoded as a query value).
    ///
    /// - Precondition: scheme, host and path form a valid URL.
    public func link(serialNumber: String) -> URL {
        var components = URLComponents()
        components.scheme = scheme
        components.host = host
        components.path = path
        // `queryItems` would leave `&`, `=` and `+` as they are, and a serial number holding
        // one would come back cut or changed.
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+")
        components.percentEncodedQueryItems = [
            URLQueryItem(
                name: serialNumberQueryItem.addingPercentEncoding(withAllowedCharacters: allowed) ?? serialNumberQueryItem,
                value: serialNumber.addingPercentEncoding(withAllowedCharacters: allowed)
            )
        ]
        guard let url = components.url else {
            preconditionFailure("activation link format \(scheme)://\(host)\(path) is not a valid URL")
        }
        return url
    }

    /// The serial number `url` carries, or nil when it is not a link of this format.
    public func serialNumber(in url: URL) -> String? {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            components.scheme?.lowercased() == scheme.lowercased(),
            components.host?.lowercased() == host.lowercased(),
            components.path == path
        else { return nil }
        return components.queryItems?.first { $0.name == serialNumberQueryItem }?.value.flatMap { $0.isEmpty ? nil : $0 }
    }
}
