import Foundation

// libFuzzer target `card-art`: Apple's card-art rules on hostile files.
//
// Compiled into the ProvisioningModels module with its sources (scripts/fuzz.sh). For any
// bytes the validator must answer without trapping, name the format it detected, and describe
// accepted art as what Apple requires.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCardArt(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: bytes, count: count)
    let detected = CardArtValidator.detectFormat(of: data)
    switch CardArtValidator.validate(data) {
    case .success(let info):
        guard info.format == detected, info.byteCount == count, count < CardArtValidator.maximumSize else {
            fatalError("accepted art misdescribed: \(info) for \(count) bytes detected as \(String(describing: detected))")
        }
        if case .pixels(let width, let height) = info.dimensions, width != CardArtValidator.requiredWidth || height != CardArtValidator.requiredHeight {
            fatalError("accepted a PNG of \(width)×\(height)")
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
