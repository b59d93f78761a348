// swift-tools-version:6.0
//
// RoomKit benchmarks: a separate package so that `swift test` at the root
// (and CI) never builds them, and HdrHistogram stays out of the main graph.
// Build: `swift build -c release --package-path Benchmarks`; run: `make bench`.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "RoomKitBenchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "roomkit-bench", targets: ["RoomKitBench"]),
        .executable(name: "plugin-bench", targets: ["PluginBench"]),
        .executable(name: "isolation-bench", targets: ["IsolationBench"]),
        // A no-op plugin written with the Swift SDK, loaded at run time.
        .library(name: "bench-noop-swift", type: .dynamic, targets: ["BenchNoopSwift"]),
    ],
    dependencies: [
        .package(name: "RoomKit", path: ".."),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
    ],
    targets: [
        .target(
            name: "BenchSupport",
            dependencies: [
                .product(name: "RoomKitProtocol", package: "RoomKit"),
                .product(name: "RoomKitTokens", package: "RoomKit"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "RoomKitBench",
            dependencies: [
                "BenchSupport",
                .product(name: "RoomKit", package: "RoomKit"),
                .product(name: "RoomKitBot", package: "RoomKit"),
                .product(name: "RoomKitPluginHost", package: "RoomKit"),
                .product(name: "RoomKitLoop", package: "RoomKit"),
                .product(name: "RoomKitProtocol", package: "RoomKit"),
                .product(name: "RoomKitRedis", package: "RoomKit"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "PluginBench",
            dependencies: [
                "BenchSupport",
                .product(name: "RoomKit", package: "RoomKit"),
                .product(name: "RoomKitPluginHost", package: "RoomKit"),
                .product(name: "RoomKitPluginSDK", package: "RoomKit"),
                .product(name: "RoomKitLoop", package: "RoomKit"),
                .product(name: "RoomKitProtocol", package: "RoomKit"),
            ],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "IsolationBench",
            dependencies: [
                "BenchSupport",
                .product(name: "RoomKit", package: "RoomKit"),
                .product(name: "RoomKitPluginHost", package: "RoomKit"),
                .product(name: "RoomKitLoop", package: "RoomKit"),
                .product(name: "RoomKitProtocol", package: "RoomKit"),
            ],
            swiftSettings: swiftSettings),
        .target(
            name: "BenchNoopSwift",
            dependencies: [.product(name: "RoomKitPluginSDK", package: "RoomKit")],
            swiftSettings: swiftSettings),
    ],
    swiftLanguageModes: [.v6]
)
