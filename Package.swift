// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "PushProvisioning",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "ProvisioningModels", targets: ["ProvisioningModels"]),
        .library(name: "ProvisioningCrypto", targets: ["ProvisioningCrypto"]),
        .executable(name: "pushprov", targets: ["pushprov"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        // Wire types shared by the SDK, the server and the simulators: Foundation only.
        .target(name: "ProvisioningModels"),
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
        .executableTarget(
            name: "pushprov",
            dependencies: [
                "ProvisioningModels",
                "ProvisioningCrypto",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(name: "ProvisioningModelsTests", dependencies: ["ProvisioningModels"]),
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
        .testTarget(name: "pushprovTests", dependencies: ["pushprov"]),
    ],
    swiftLanguageModes: [.v6]
)
