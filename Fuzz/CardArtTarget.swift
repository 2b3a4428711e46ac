import Foundation

// libFuzzer target `card-art`: Apple's card-art rules on hostile files.
//
// Compiled into the ProvisioningModels module with its sources (scripts/fuzz.sh). For any
// bytes the validator must answer without trapping, name the format it detected, and describe
// accepted art as what Apple requires: a PNG of 1536×969 pixels that ends with an empty IEND
// chunk, or a PDF page that is landscape, 1536:969 within the tolerance and 3 to 14,400 points
// a side. scripts/fuzz.sh also bounds each input's time and memory for this target.

/// The last 12 bytes of every acceptable PNG: an empty IEND chunk with its CRC.
private let emptyIEND: [UInt8] = [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCardArt(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: bytes, count: count)
    let detected = CardArtValidator.detectFormat(of: data)
    switch CardArtValidator.validate(data) {
    case .success(let info):
        guard info.format == detected, info.byteCount == count, count < CardArtValidator.maximumSize else {
            fatalError("accepted art misdescribed: \(info) for \(count) bytes detected as \(String(describing: detected))")
        }
        switch info.dimensions {
        case .pixels(let width, let height):
            guard info.format == .png, width == CardArtValidator.requiredWidth, height == CardArtValidator.requiredHeight else {
                fatalError("accepted a \(info.format) of \(width)×\(height) pixels")
            }
            guard data.suffix(emptyIEND.count).elementsEqual(emptyIEND) else {
                fatalError("accepted a PNG that does not end with an empty IEND chunk")
            }
        case .points(let width, let height):
            let sides = CardArtValidator.minimumPageSide...CardArtValidator.maximumPageSide
            guard info.format == .pdf, width > height, sides.contains(width), sides.contains(height) else {
                fatalError("accepted a \(info.format) page of \(width)×\(height) points")
            }
            let deviation = abs(width / height / CardArtValidator.requiredAspectRatio - 1)
            guard deviation <= CardArtValidator.aspectRatioTolerance else {
                fatalError("accepted a PDF page of \(width)×\(height) points, \(deviation) off the aspect ratio")
            }
        }
    case .failure(let error):
        guard !error.message.isEmpty else { fatalError("refusal \(error.code) without a message") }
    }
    // The declared type is checked against the detected format, never the other way round.
    if case .success = CardArtValidator.validate(data, declaredContentType: "text/plain") {
        fatalError("accepted art declared as text/plain")
    }
    return 0
}
