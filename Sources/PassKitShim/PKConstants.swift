#if !canImport(PassKit)
/// The encryption scheme of the card data handed to Wallet (`PKEncryptionScheme`).
public struct PKEncryptionScheme: Hashable, Equatable, RawRepresentable, Sendable {
    /// The scheme's name.
    public let rawValue: String

    /// Wraps a scheme name.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }
}

extension PKEncryptionScheme {
    /// Elliptic-curve encryption, version 2.
    public static let ECC_V2 = PKEncryptionScheme(rawValue: "ECC_V2")
    /// RSA encryption, version 2.
    public static let RSA_V2 = PKEncryptionScheme(rawValue: "RSA_V2")
}

/// A payment network (`PKPaymentNetwork`).
public struct PKPaymentNetwork: Hashable, Equatable, RawRepresentable, Sendable {
    /// The network's name.
    public let rawValue: String

    /// Wraps a network name.
    public init(_ rawValue: String) {
        self.rawValue = rawValue
    }

    /// Wraps a network name.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }
}

extension PKPaymentNetwork {
    /// American Express.
    public static let amex = PKPaymentNetwork(rawValue: "AmEx")
    /// Cartes Bancaires.
    public static let cartesBancaires = PKPaymentNetwork(rawValue: "CartesBancaires")
    /// China UnionPay.
    public static let chinaUnionPay = PKPaymentNetwork(rawValue: "ChinaUnionPay")
    /// Discover.
    public static let discover = PKPaymentNetwork(rawValue: "Discover")
    /// eftpos.
    public static let eftpos = PKPaymentNetwork(rawValue: "Eftpos")
    /// Interac.
    public static let interac = PKPaymentNetwork(rawValue: "Interac")
    /// JCB.
    public static let JCB = PKPaymentNetwork(rawValue: "JCB")
    /// Maestro.
    public static let maestro = PKPaymentNetwork(rawValue: "Maestro")
    /// Mastercard.
    public static let masterCard = PKPaymentNetwork(rawValue: "MasterCard")
    /// Visa.
    public static let visa = PKPaymentNetwork(rawValue: "Visa")
}
#endif
