// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "PushProvisioning",
    // The SDK uses `Duration` and `Clock` (watchOS 9, tvOS 16): every Apple platform it builds
    // for names its minimum, else SwiftPM would take the oldest the Xcode in use supports.
    platforms: [.macOS(.v14), .iOS(.v17), .watchOS(.v10), .tvOS(.v17), .visionOS(.v1)],
    products: [
        .library(name: "ProvisioningModels", targets: ["ProvisioningModels"]),
        .library(name: "ProvisioningCrypto", targets: ["ProvisioningCrypto"]),
        .library(name: "ProvisioningSDK", targets: ["ProvisioningSDK"]),
        .library(name: "ProvisioningPassKit", targets: ["ProvisioningPassKit"]),
        .executable(name: "pushprov", targets: ["pushprov"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        // Wire types shared by the SDK, the server and the simulators: Foundation only.
        .target(name: "ProvisioningModels"),
        // The issuer-app SDK core: Foundation only, so it links into an iOS app and its extensions.
        .target(name: "ProvisioningSDK", dependencies: ["ProvisioningModels"]),
        // Linux only: the PassKit subset the adapters use, spelled as Apple spells it (empty where PassKit exists).
        .target(name: "PassKitShim"),
        // Thin adapters between PassKit (or the shim) and the SDK.
        .target(
            name: "ProvisioningPassKit",
            dependencies: [
                "ProvisioningSDK",
                "ProvisioningModels",
                .target(name: "PassKitShim", condition: .when(platforms: [.linux])),
            ]
        ),
        // ECC_V2 sealing, Apple's chain policy, activation data and the PAN vault.
        .target(
            name: "ProvisioningCrypto",
            dependencies: [
                "ProvisioningModels",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            resources: [.embedInCode("Resources/AppleRootCA-G3.pem")]
        ),
        // The TMP server as a library: Hummingbird app, auth, services, storage.
        // The one system call Swift cannot reach (prctl is variadic in C).
        .target(name: "CProcessControl"),
        .target(
            name: "TokenPlatform",
            dependencies: [
                "ProvisioningModels",
                "ProvisioningCrypto",
                "CProcessControl",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            resources: [.embedInCode("Resources/openapi.yaml")]
        ),
        // Apple's side and the token service provider's side, simulated faithfully.
        .target(
            name: "WalletSimulator",
            dependencies: [
                "ProvisioningModels",
                "ProvisioningCrypto",
                "ProvisioningSDK",
                "TokenPlatform",
                .target(name: "PassKitShim", condition: .when(platforms: [.linux])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        // `pushprov demo` and the end-to-end tests: the scenario over every real component
        // and both simulators.
        .target(
            name: "ProvisioningDemo",
            dependencies: [
                "ProvisioningModels",
                "ProvisioningCrypto",
                "ProvisioningSDK",
                "ProvisioningPassKit",
                "TokenPlatform",
                "WalletSimulator",
                .target(name: "PassKitShim", condition: .when(platforms: [.linux])),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "pushprov",
            dependencies: [
                "ProvisioningDemo",
                "ProvisioningModels",
                "ProvisioningCrypto",
                "TokenPlatform",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Fixtures shared by the test targets (card-art files built byte by byte).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "ProvisioningModelsTests", dependencies: ["ProvisioningModels", "TestSupport"]),
        // Test doubles the SDK's and the adapters' tests share: manual clock, scripted transport, fake pass library.
        .target(name: "SDKTestSupport", dependencies: ["ProvisioningSDK", "ProvisioningModels"], path: "Tests/SDKTestSupport"),
        // The TMP server in process for the server's, the simulators' and the SDK's tests: secrets,
        // the simulated Apple PKI as trust anchor, the application, a loopback listener, log capture.
        .target(
            name: "TMPTestSupport",
            dependencies: [
                "TokenPlatform", "ProvisioningCrypto", "ProvisioningModels", "WalletSimulator", "SDKTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/TMPTestSupport"
        ),
        .testTarget(
            name: "ProvisioningSDKTests",
            dependencies: [
                "TMPTestSupport",
                "ProvisioningSDK",
                "ProvisioningModels",
                "SDKTestSupport",
                "TestSupport",
                "ProvisioningCrypto",
                "TokenPlatform",
                "WalletSimulator",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
        .testTarget(
            name: "ProvisioningPassKitTests",
            dependencies: [
                "ProvisioningPassKit",
                "ProvisioningSDK",
                "ProvisioningModels",
                "SDKTestSupport",
                "TestSupport",
                .target(name: "PassKitShim", condition: .when(platforms: [.linux])),
            ]
        ),
        .testTarget(
            name: "ProvisioningCryptoTests",
            dependencies: [
                "ProvisioningCrypto",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            resources: [.copy("Resources")]
        ),
        .testTarget(
            name: "TokenPlatformTests",
            dependencies: [
                "TMPTestSupport",
                "TokenPlatform",
                "ProvisioningCrypto",
                "ProvisioningModels",
                "WalletSimulator",
                "TestSupport",
                // Its manual clock, for the token service time limit.
                "SDKTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // The outage proxy of the database tests.
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(
            name: "WalletSimulatorTests",
            dependencies: [
                "TMPTestSupport",
                // Its lock box, for the fixture's clock and recorders.
                "SDKTestSupport",
                "WalletSimulator",
                "TokenPlatform",
                "ProvisioningCrypto",
                "ProvisioningModels",
                // The issuer's Wallet extensions, run by the simulated extension host.
                "ProvisioningSDK",
                "ProvisioningPassKit",
                "TestSupport",
                .target(name: "PassKitShim", condition: .when(platforms: [.linux])),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "ProvisioningDemo",
                // Its manual clock, for the extension's budgets.
                "SDKTestSupport",
                "ProvisioningSDK",
                "ProvisioningPassKit",
                "ProvisioningModels",
                "ProvisioningCrypto",
                "TokenPlatform",
                "WalletSimulator",
                .target(name: "PassKitShim", condition: .when(platforms: [.linux])),
            ]
        ),
        .testTarget(name: "pushprovTests", dependencies: ["pushprov", "TestSupport", "ProvisioningCrypto", "ProvisioningModels", "TokenPlatform", .product(name: "Crypto", package: "swift-crypto"), .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "GRDB", package: "GRDB.swift")]),
    ],
    swiftLanguageModes: [.v6]
)
