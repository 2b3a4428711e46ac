// iOS and visionOS PassKit (Mac Catalyst included), or the Linux shim: macOS's PassKit lacks the add sheet and
// the Watch's passes, and watchOS and tvOS have no issuer provisioning API (and no shim is linked there).
#if os(iOS) || os(visionOS) || os(Linux)
import Foundation
import ProvisioningModels
import ProvisioningSDK

#if canImport(CoreGraphics) && canImport(ImageIO)
import CoreGraphics
import ImageIO
#else
import PassKitShim
#endif

/// Turns validated card art (``ExtensionPassEntry/Art``) into the `CGImage` a pass entry shows.
///
/// On Apple platforms a PNG is decoded with ImageIO and a PDF's page is rendered into a
/// 1536 × 969 bitmap with CoreGraphics. On Linux the shim's `CGImage` stand-in carries the
/// file and its size.
public enum CardArtImage {
    /// The width, in pixels, a PDF page is rendered at: Apple's card art width.
    public static let renderedWidth = CardArtValidator.requiredWidth
    /// The height, in pixels, a PDF page is rendered at: Apple's card art height.
    public static let renderedHeight = CardArtValidator.requiredHeight

    /// A plain card: a dark grey 1536 × 969 image with square corners and nothing on it (so
    /// within Apple's card art rules), shown for a card that has no art of its own and no
    /// fallback of the issuer's, so that every card ``WalletExtension/status()`` counts is
    /// offered. On Linux the shim's stand-in carries no bytes.
    public static func placeholder() -> CGImage? {
        plainCard.image
    }

    /// Made once: every entry without art shows the same image.
    private static let plainCard = ImmutableImage(makePlainCard())

    /// An image no one changes, shared between threads.
    ///
    /// @unchecked: `image` is a constant, and a `CGImage` is immutable.
    private final class ImmutableImage: @unchecked Sendable {
        let image: CGImage?
        init(_ image: CGImage?) { self.image = image }
    }

    private static func makePlainCard() -> CGImage? {
        #if canImport(CoreGraphics) && canImport(ImageIO)
        // One byte per pixel, no alpha: 1.5 MB, made once.
        guard let context = CGContext(
            data: nil,
            width: renderedWidth,
            height: renderedHeight,
            bitsPerComponent: 8,
            bytesPerRow: 0,
            space: CGColorSpaceCreateDeviceGray(),
            bitmapInfo: CGImageAlphaInfo.none.rawValue
        ) else { return nil }
        context.setFillColor(gray: 0.25, alpha: 1)
        context.fill(CGRect(x: 0, y: 0, width: renderedWidth, height: renderedHeight))
        return context.makeImage()
        #else
        return CGImage(passKitShimWidth: renderedWidth, height: renderedHeight, data: Data())
        #endif
    }

    /// The image of `art`, or nil if it cannot be decoded.
    public static func image(from art: ExtensionPassEntry.Art) -> CGImage? {
        switch art.info.format {
        case .png: png(art)
        case .pdf: pdf(art)
        }
    }

    #if canImport(CoreGraphics) && canImport(ImageIO)
    private static func png(_ art: ExtensionPassEntry.Art) -> CGImage? {
        guard let source = CGImageSourceCreateWithData(art.data as CFData, nil) else { return nil }
        return CGImageSourceCreateImageAtIndex(source, 0, nil)
    }

    private static func pdf(_ art: ExtensionPassEntry.Art) -> CGImage? {
        guard let provider = CGDataProvider(data: art.data as CFData),
            let document = CGPDFDocument(provider),
            let page = document.page(at: 1),
            let colorSpace = CGColorSpace(name: CGColorSpace.sRGB),
            let context = CGContext(
                data: nil,
                width: renderedWidth,
                height: renderedHeight,
                bitsPerComponent: 8,
                bytesPerRow: 0,
                space: colorSpace,
                bitmapInfo: CGImageAlphaInfo.premultipliedLast.rawValue
            )
        else { return nil }
        // The validator accepted the crop box (else the media box) as 1536:969 within 0.5%,
        // so scaling each axis to fill the bitmap keeps the art's proportions.
        let box = page.getBoxRect(.cropBox)
        guard box.width > 0, box.height > 0 else { return nil }
        context.interpolationQuality = .high
        context.scaleBy(x: CGFloat(renderedWidth) / box.width, y: CGFloat(renderedHeight) / box.height)
        context.translateBy(x: -box.minX, y: -box.minY)
        context.drawPDFPage(page)
        return context.makeImage()
    }
    #else
    private static func png(_ art: ExtensionPassEntry.Art) -> CGImage? {
        guard case .pixels(let width, let height) = art.info.dimensions else { return nil }
        return CGImage(passKitShimWidth: width, height: height, data: art.data)
    }

    private static func pdf(_ art: ExtensionPassEntry.Art) -> CGImage? {
        CGImage(passKitShimWidth: renderedWidth, height: renderedHeight, data: art.data)
    }
    #endif
}

/// How the Wallet extension gets each entry's `CGImage`: by default the art the app stored
/// in the App Group (``ExtensionPassEntry/art``), else the issuer's fallback image, else a
/// plain card (``CardArtImage/placeholder()``). An entry a loader gives no image is left out,
/// since Wallet requires art — though ``WalletExtension/status()``, which reads no art, may
/// have counted it.
public struct CardArtLoader: Sendable {
    private let load: @Sendable (ExtensionPassEntry) -> CGImage?

    /// A loader of your own.
    public init(_ load: @escaping @Sendable (ExtensionPassEntry) -> CGImage?) {
        self.load = load
    }

    /// The stored art, else `fallback()` (e.g. a generic card image from the extension's
    /// bundle), else ``CardArtImage/placeholder()``: a card TMP has no art for (or whose art
    /// has not arrived) is still offered, as ``WalletExtension/status()`` said it would be.
    public static func storedArt(fallback: @escaping @Sendable () -> CGImage? = { nil }) -> CardArtLoader {
        CardArtLoader { entry in
            entry.art.flatMap(CardArtImage.image(from:)) ?? fallback() ?? CardArtImage.placeholder()
        }
    }

    /// The image for `entry`.
    public func image(for entry: ExtensionPassEntry) -> CGImage? {
        load(entry)
    }
}
#endif
