#if !canImport(PassKit)
import Foundation

/// The root of PassKit's object classes.
open class PKObject: NSObject {}

/// The kinds of pass.
public enum PKPassType: UInt, Sendable {
    /// A barcode pass.
    case barcode = 0
    /// A secure-element (payment, access, …) pass.
    case secureElement = 1
    /// Any pass.
    case any = 18_446_744_073_709_551_615

    /// A payment pass (the same as ``secureElement``).
    @available(*, deprecated, message: "Use PKPassTypeSecureElement instead")
    public static var payment: PKPassType { .secureElement }
}

/// A pass in Wallet.
open class PKPass: PKObject {
    /// The pass's type.
    open var passType: PKPassType { values.passType }
    /// The pass as a secure-element pass, if it is one.
    open var secureElementPass: PKSecureElementPass? { self as? PKSecureElementPass }
    /// The serial number.
    open var serialNumber: String { values.serialNumber }
    /// The pass type identifier.
    open var passTypeIdentifier: String { values.passTypeIdentifier }
    /// The pass's name.
    open var localizedName: String { values.localizedName }
    /// The pass's description.
    open var localizedDescription: String { values.localizedDescription }
    /// The organization that issued the pass.
    open var organizationName: String { values.organizationName }
    /// Whether the pass lives on a paired device.
    open var isRemotePass: Bool { values.isRemotePass }
    /// The name of the device the pass lives on.
    open var deviceName: String { values.deviceName }

    private let values: Values

    /// NOT PART OF APPLE'S PASSKIT: the values a pass holds, for the Linux shim's constructors.
    package struct Values: Sendable, Hashable {
        /// The pass's `passType`.
        package var passType: PKPassType
        /// The pass's `serialNumber`.
        package var serialNumber: String
        /// The pass's `passTypeIdentifier`.
        package var passTypeIdentifier: String
        /// The pass's `localizedName`.
        package var localizedName: String
        /// The pass's `localizedDescription`.
        package var localizedDescription: String
        /// The pass's `organizationName`.
        package var organizationName: String
        /// The pass's `isRemotePass`.
        package var isRemotePass: Bool
        /// The pass's `deviceName`.
        package var deviceName: String

        /// Values for a pass.
        package init(passType: PKPassType, serialNumber: String, passTypeIdentifier: String, localizedName: String = "", localizedDescription: String = "", organizationName: String = "", isRemotePass: Bool = false, deviceName: String = "iPhone") {
            self.passType = passType
            self.serialNumber = serialNumber
            self.passTypeIdentifier = passTypeIdentifier
            self.localizedName = localizedName
            self.localizedDescription = localizedDescription
            self.organizationName = organizationName
            self.isRemotePass = isRemotePass
            self.deviceName = deviceName
        }
    }

    /// NOT PART OF APPLE'S PASSKIT: a pass holding `values` (Linux only, package-internal).
    package init(passKitShimValues values: Values) {
        self.values = values
        super.init()
    }
}
#endif
