import Foundation

/// Minimal valid PNG files of any size, for card-art uploads.
enum TestImages {
    /// A grayscale PNG: signature, IHDR, one stored-deflate IDAT of a single zero row repeated, IEND.
    static func png(width: Int, height: Int) -> Data {
        var data = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        var header = Data()
        header.append(bigEndian: UInt32(width))
        header.append(bigEndian: UInt32(height))
        header.append(contentsOf: [8, 0, 0, 0, 0])  // 8-bit grayscale, no interlace
        data.append(chunk: "IHDR", header)
        // Raw scanlines: filter byte 0 plus `width` zero bytes, compressed with zlib "stored" blocks.
        let raw = Data(count: (width + 1) * height)
        var zlib = Data([0x78, 0x01])
        var offset = 0
        while offset < raw.count {
            let length = min(65_535, raw.count - offset)
            zlib.append(offset + length == raw.count ? 1 : 0)
            zlib.append(contentsOf: [UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)])
            zlib.append(raw[offset..<(offset + length)])
            offset += length
        }
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in raw {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        zlib.append(bigEndian: b << 16 | a)
        data.append(chunk: "IDAT", zlib)
        data.append(chunk: "IEND", Data())
        return data
    }
}

extension Data {
    mutating func append(bigEndian value: UInt32) {
        append(contentsOf: [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)])
    }

    mutating func append(chunk type: String, _ payload: Data) {
        append(bigEndian: UInt32(payload.count))
        let typed = Data(type.utf8) + payload
        append(typed)
        append(bigEndian: crc32(typed))
    }

    private func crc32(_ bytes: Data) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (crc & 1 == 1 ? 0xEDB8_8320 : 0) }
        }
        return ~crc
    }
}
