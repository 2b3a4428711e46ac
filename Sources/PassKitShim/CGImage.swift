#if !canImport(PassKit)
import Foundation

/// Stand-in for CoreGraphics' `CGImage` (absent on Linux): the card art of a pass entry.
public final class CGImage {
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// NOT PART OF CoreGraphics: the encoded image (PNG or PDF), for the simulator.
    package let passKitShimData: Data

    /// NOT PART OF CoreGraphics: an image of the given size and encoded bytes (Linux only,
    /// package-internal).
    package init(passKitShimWidth width: Int, height: Int, data: Data) {
        self.width = width
        self.height = height
        self.passKitShimData = data
    }
}
#endif
