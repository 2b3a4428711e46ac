import Foundation

extension Data {
    /// The bytes as lowercase hexadecimal.
    public var lowercaseHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses hexadecimal of either case; nil for odd length or a non-hex character.
    public init?(hex: String) {
        self.init(hex: hex, allowUppercase: true)
    }

    /// Parses lowercase hexadecimal only; nil for anything else.
    public init?(lowercaseHex: String) {
        self.init(hex: lowercaseHex, allowUppercase: false)
    }

    private init?(hex: String, allowUppercase: Bool) {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F") where allowUppercase: c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = value(chars[index]), let low = value(chars[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.init(bytes)
    }
}
