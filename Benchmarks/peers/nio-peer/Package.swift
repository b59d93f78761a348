// swift-tools-version:6.0
// The second benchmark peer: a RoomKit-protocol client written the way a
// performance-minded Swift user would, on SwiftNIO with Vapor's websocket-kit.
// Lives in its own package so it is never part of RoomKit's shipped products.
import PackageDescription

let package = Package(
    name: "nio-peer",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(url: "https://github.com/vapor/websocket-kit.git", exact: "2.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.78.0"),
    ],
    targets: [
        .executableTarget(
            name: "NIOPeer",
            dependencies: [
                .product(name: "WebSocketKit", package: "websocket-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
            ]
        ),
    ]
)
