#if !canImport(PassKit)
import Foundation
import ProvisioningModels
import ProvisioningPassKit
import ProvisioningSDK
import SDKTestSupport
import Testing
@testable import WalletSimulator

/// A device's Wallet as a ``PassLibrary`` reads it: the passes on this iPhone and on the paired
/// Watch, whether a Watch is paired, whether there is a pass library at all.
struct PassWorld: Sendable {
    var phone: [WalletPass] = []
    var watch: [WalletPass] = []
    var watchPaired = true
    var available = true

    static func pass(_ account: String, _ state: WalletPass.ActivationState, on device: DeviceType, serial: String? = nil) -> WalletPass {
        let serial = serial ?? "S-\(device.rawValue)-\(account)-\(state.rawValue)"
        return WalletPass(serialNumber: serial, deviceAccountIdentifier: "DA-\(serial)", primaryAccountIdentifier: account, primaryAccountNumberSuffix: "1111", activationState: state, device: device)
    }
}

/// One ``PassLibrary`` to put under contract, made to show a ``PassWorld``.
struct PassLibraryFactory: CustomTestStringConvertible, Sendable {
    let name: String
    let withLibrary: @Sendable (PassWorld, @Sendable (any PassLibrary) async -> Void) async -> Void

    var testDescription: String { name }

    /// The SDK's PassKit adapter over the simulated Wallet (the components the demo and the
    /// end-to-end tests run), and the memory double the SDK's tests use in its place.
    static let all = [
        PassLibraryFactory(name: "PassKitPassLibrary on the simulated Wallet") { world, body in
            let wallet = SimulatedWallet(configuration: .init(hasPairedWatch: world.watchPaired, passLibraryAvailable: world.available))
            for pass in world.phone + world.watch {
                _ = wallet.add(SimulatedPass(
                    serialNumber: pass.serialNumber, deviceAccountIdentifier: pass.deviceAccountIdentifier, primaryAccountIdentifier: pass.primaryAccountIdentifier,
                    primaryAccountNumberSuffix: pass.primaryAccountNumberSuffix, deviceAccountNumberSuffix: "9876", activationState: SimulatedPass.ActivationState(pass.activationState),
                    device: pass.device
                ))
            }
            await wallet.withInstalled { await body(PassKitPassLibrary()) }
        },
        PassLibraryFactory(name: "FakePassLibrary") { world, body in
            await body(FakePassLibrary(passes: world.phone + world.watch, available: world.available, watchPaired: world.watchPaired))
        },
    ]
}

extension SimulatedPass.ActivationState {
    /// The simulated Wallet's state for a state both know (it has no `activating`).
    init(_ state: WalletPass.ActivationState) {
        switch state {
        case .activated: self = .activated
        case .requiresActivation, .activating: self = .requiresActivation
        case .suspended: self = .suspended
        case .deactivated: self = .deactivated
        }
    }
}

/// What every ``PassLibrary`` answers for the same Wallet, run against each implementation
/// (``PassLibraryFactory/all``), so the double the SDK's tests use cannot drift from what the
/// adapter reads from Wallet.
@Suite("PassLibrary contract")
struct PassLibraryContractTests {
    @Test(arguments: PassLibraryFactory.all)
    func passesAreThisIPhonesThenTheWatchsEachMarkedWithItsDevice(factory: PassLibraryFactory) async {
        let world = PassWorld(
            phone: [PassWorld.pass("PAI-1", .activated, on: .phone), PassWorld.pass("PAI-2", .suspended, on: .phone)],
            watch: [PassWorld.pass("PAI-1", .requiresActivation, on: .watch)]
        )
        await factory.withLibrary(world) { library in
            #expect(await library.isPassLibraryAvailable())
            #expect(await library.secureElementPasses() == world.phone + world.watch)
        }
    }

    @Test(arguments: PassLibraryFactory.all)
    func aCardCanBeAddedWhileSomeDeviceHasNoLivePassOfIt(factory: PassLibraryFactory) async {
        let world = PassWorld(
            phone: [PassWorld.pass("BOTH", .activated, on: .phone), PassWorld.pass("PHONE", .suspended, on: .phone), PassWorld.pass("GONE", .deactivated, on: .phone)],
            watch: [PassWorld.pass("BOTH", .requiresActivation, on: .watch), PassWorld.pass("WATCH", .activated, on: .watch), PassWorld.pass("GONE", .deactivated, on: .watch)]
        )
        await factory.withLibrary(world) { library in
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "BOTH") == false)
            // On one device only: the other can take it. A suspended pass is live.
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "PHONE"))
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "WATCH"))
            // A deactivated pass counts as none.
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "GONE"))
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "NEW"))
        }
    }

    @Test(arguments: PassLibraryFactory.all)
    func withoutAPairedWatchOnlyThisIPhoneCounts(factory: PassLibraryFactory) async {
        let world = PassWorld(phone: [PassWorld.pass("PHONE", .activated, on: .phone), PassWorld.pass("GONE", .deactivated, on: .phone)], watchPaired: false)
        await factory.withLibrary(world) { library in
            #expect(await library.secureElementPasses() == world.phone)
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "PHONE") == false)
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "GONE"))
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "NEW"))
        }
    }

    @Test(arguments: PassLibraryFactory.all)
    func withoutAPassLibraryNothingCanBeAdded(factory: PassLibraryFactory) async {
        let world = PassWorld(available: false)
        await factory.withLibrary(world) { library in
            #expect(await library.isPassLibraryAvailable() == false)
            #expect(await library.secureElementPasses().isEmpty)
            #expect(await library.canAddSecureElementPass(primaryAccountIdentifier: "NEW") == false)
        }
    }

    @Test(arguments: PassLibraryFactory.all)
    func theWatchPairingIsUnknownUnlessTheAppSaysIt(factory: PassLibraryFactory) async {
        for paired in [true, false] {
            await factory.withLibrary(PassWorld(watchPaired: paired)) { library in
                #expect(await library.isWatchPaired() == nil)
            }
        }
    }
}
#endif
