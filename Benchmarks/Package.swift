// swift-tools-version: 6.1
import PackageDescription

// Benchmarks, kept in their own package so that the root package's `swift build` /
// `swift test` never resolve or build ordo-one/benchmark.
// ProvisioningCrypto: ./run.sh (or `swift package benchmark` in this folder).
// The Wallet extension's `status` from a fresh process: ./extension-status.sh.
let package = Package(
    name: "PushProvisioningBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "PushProvisioning", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
    ],
    targets: [
        .executableTarget(
            name: "CryptoBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "ProvisioningCrypto", package: "PushProvisioning"),
                .product(name: "ProvisioningModels", package: "PushProvisioning"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            path: "Benchmarks/CryptoBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // One Wallet `status` per process (spawned many times by extension-status.sh).
        .executableTarget(
            name: "ExtensionStatusProbe",
            dependencies: [
                .product(name: "ProvisioningSDK", package: "PushProvisioning"),
                .product(name: "ProvisioningModels", package: "PushProvisioning"),
            ],
            path: "Benchmarks/ExtensionStatusProbe"
        ),
    ],
    swiftLanguageModes: [.v6]
)
