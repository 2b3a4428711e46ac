import Foundation

/// Card art for the demo: a 1536 × 969 PNG (Apple's size), drawn as two flat bands.
public enum DemoArt {
    /// A PNG of two flat bands, `width` × `height` pixels (at least 1 × 1). At the default size,
    /// Apple's card art size, it passes the card-art rules: a placeholder to try the art
    /// routes with (other sizes are for tests of the rules).
    public static func png(width: Int = 1536, height: Int = 969) -> Data {
        precondition((1...0x7FFF_FFFF).contains(width) && (1...0x7FFF_FFFF).contains(height), "a PNG is 1 to 2^31 - 1 pixels each way")
        var png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        // A two-colour palette at one bit per pixel: about 190 KB uncompressed.
        png += chunk("IHDR", bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [1, 3, 0, 0, 0])
        png += chunk("PLTE", [0x1D, 0x3C, 0x78, 0xE8, 0xB0, 0x3A])
        let rowBytes = (width + 7) / 8
        var scanlines = [UInt8]()
        scanlines.reserveCapacity((rowBytes + 1) * height)
        for row in 0..<height {
            scanlines.append(0)  // filter: none
            scanlines += [UInt8](repeating: row < height * 2 / 3 ? 0x00 : 0xFF, count: rowBytes)
        }
        png += chunk("IDAT", zlibStored(scanlines))
        png += chunk("IEND", [])
        return png
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    private static func chunk(_ type: String, _ payload: [UInt8]) -> Data {
        let body = Array(type.utf8) + payload
        return Data(bigEndian(UInt32(payload.count)) + body + bigEndian(crc32(body)))
    }

    /// Stored (uncompressed) deflate blocks in a zlib wrapper: valid, simple, and well under
    /// Apple's 4 MB for this size.
    private static func zlibStored(_ raw: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let length = min(65_535, raw.count - offset)
            out.append(offset + length == raw.count ? 1 : 0)
            out += [UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8 & 0xFF)]
            out += raw[offset..<(offset + length)]
            offset += length
        } while offset < raw.count
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in raw {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return out + bigEndian(b << 16 | a)
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return ~crc
    }
}
