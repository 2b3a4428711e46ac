import Foundation

/// The base64url alphabet (RFC 4648 §5), indexed by 6-bit value.
private let base64URLAlphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

/// The 6-bit value of each byte in the base64url alphabet; 0xFF for every other byte.
private let base64URLValues: [UInt8] = {
    var table = [UInt8](repeating: 0xFF, count: 256)
    for (value, byte) in base64URLAlphabet.enumerated() { table[Int(byte)] = UInt8(value) }
    return table
}()

extension Data {
    /// Unpadded base64url (RFC 4648 §5), as JOSE uses.
    ///
    /// Written directly from the bytes: a JWS is encoded on every `signed-cards` call, and
    /// going through padded base64 plus three string replacements cost more than the ECDSA
    /// signature it wraps.
    public var base64URLEncodedString: String {
        let count = self.count
        let length = (count / 3) * 4 + [0, 2, 3][count % 3]
        return withUnsafeBytes { (input: UnsafeRawBufferPointer) in
            String(unsafeUninitializedCapacity: length) { output in
                var o = 0
                var i = 0
                while i + 3 <= count {
                    let chunk = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                    output[o] = base64URLAlphabet[Int(chunk >> 18 & 0x3F)]
                    output[o + 1] = base64URLAlphabet[Int(chunk >> 12 & 0x3F)]
                    output[o + 2] = base64URLAlphabet[Int(chunk >> 6 & 0x3F)]
                    output[o + 3] = base64URLAlphabet[Int(chunk & 0x3F)]
                    i += 3
                    o += 4
                }
                switch count - i {
                case 1:
                    let chunk = UInt32(input[i]) << 16
                    output[o] = base64URLAlphabet[Int(chunk >> 18 & 0x3F)]
                    output[o + 1] = base64URLAlphabet[Int(chunk >> 12 & 0x3F)]
                    o += 2
                case 2:
                    let chunk = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
                    output[o] = base64URLAlphabet[Int(chunk >> 18 & 0x3F)]
                    output[o + 1] = base64URLAlphabet[Int(chunk >> 12 & 0x3F)]
                    output[o + 2] = base64URLAlphabet[Int(chunk >> 6 & 0x3F)]
                    o += 3
                default:
                    break
                }
                return o
            }
        }
    }

    /// Decodes unpadded base64url; nil for any character outside its alphabet, for padding,
    /// for an impossible length, and for non-zero bits left over in the last character
    /// (so every byte string has exactly one accepted encoding).
    public init?(base64URLEncoded text: some StringProtocol) {
        let utf8 = Array(text.utf8)
        let remainder = utf8.count % 4
        guard remainder != 1 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(utf8.count / 4 * 3 + 2)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in utf8 {
            let value = base64URLValues[Int(byte)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        guard accumulator == 0 else { return nil }
        self.init(bytes)
    }
}
