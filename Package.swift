// swift-tools-version:6.0
//
// RoomKit: a framework for programs that sit in many real-time rooms at once.
// The module graph is a strict stack (see docs/ARCHITECTURE.md):
//   C system libraries + shims -> RoomKitLoop (I/O), RoomKitProtocol (pure
//   values; it does not depend on the loop) and RoomKitSQLite (storage) ->
//   RoomKitServerCore (the session rules, pure) -> RoomKitServer (roomd) /
//   client engine (RoomKit) -> the simulator, plugin host -> bot ->
//   executables.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "RoomKit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "RoomKitLoop", targets: ["RoomKitLoop"]),
        .library(name: "RoomKitJSON", targets: ["RoomKitJSON"]),
        .library(name: "RoomKitProtocol", targets: ["RoomKitProtocol"]),
        .library(name: "RoomKitTokens", targets: ["RoomKitTokens"]),
        .library(name: "RoomKitServer", targets: ["RoomKitServer"]),
        .library(name: "RoomKit", targets: ["RoomKit"]),
        .library(name: "RoomKitPluginHost", targets: ["RoomKitPluginHost"]),
        .library(name: "RoomKitPluginSDK", targets: ["RoomKitPluginSDK"]),
        .library(name: "RoomKitRedis", targets: ["RoomKitRedis"]),
        .library(name: "RoomKitBot", targets: ["RoomKitBot"]),
        // The simulator: a real RoomHost on a virtual clock against an in-memory server.
        .library(name: "RoomKitSimulator", targets: ["RoomKitSimulator"]),
        .executable(name: "roomd", targets: ["roomd"]),
        .executable(name: "roombot", targets: ["roombot"]),
        // Runs one "isolation": "process" plugin; shipped next to roombot.
        .executable(name: "roomkit-plugin-host", targets: ["roomkit-plugin-host"]),
        .executable(name: "multiroom-bot", targets: ["MultiRoomBot"]),
        // The plugins we ship, each a dynamic library loaded at run time.
        .library(name: "url-rewrite", type: .dynamic, targets: ["URLRewritePlugin"]),
        .library(name: "error-log", type: .dynamic, targets: ["ErrorLogPlugin"]),
        .library(name: "echo-commands", type: .dynamic, targets: ["EchoCommandsPlugin"]),
        // A Swift plugin for the SDK's tests (typed handlers, injected host/config/log).
        .library(name: "sdk-probe", type: .dynamic, targets: ["SDKProbePlugin"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        // MARK: C system libraries (installed with apt; see README)
        .systemLibrary(
            name: "CLibUV", pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(
            name: "CLibWebSockets", pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev", "libwebsockets-evlib-uv"])]),
        .systemLibrary(
            name: "CSQLite3", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(
            name: "COpenSSLCrypto", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]),
        // No pkgConfig: hiredis.pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM
        // prohibits (a warning); the headers are included as <hiredis/...>.
        .systemLibrary(
            name: "CHiredis",
            providers: [.apt(["libhiredis-dev"])]),
        // hiredis's libuv adapter is static functions in a header: attach it here.
        .target(name: "CRoomKitRedis", dependencies: ["CHiredis"]),
        // Small C helpers for what Swift cannot import (macros, varargs).
        .target(name: "CRoomKitShims", dependencies: ["CLibUV", "CLibWebSockets"],
                // The client TLS context (shims.c) is made with OpenSSL directly.
                linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),

        // MARK: The loop layer: the only Swift module that touches libuv/lws.
        .target(
            name: "RoomKitLoop",
            dependencies: [
                "CLibUV", "CLibWebSockets", "CRoomKitShims",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings),

        // MARK: JSON: the one JSON value, its parser and serialiser. No
        // dependency at all, so the plugin SDK needs neither OpenSSL nor the
        // protocol module.
        .target(name: "RoomKitJSON", swiftSettings: swiftSettings),

        // MARK: Protocol: messages, codes, token claims (re-exports RoomKitJSON). Pure Swift, no I/O.
        .target(
            name: "RoomKitProtocol",
            dependencies: ["RoomKitJSON"],
            swiftSettings: swiftSettings),
        // Token signing and verification (JWT HS256 through OpenSSL's HMAC).
        .target(
            name: "RoomKitTokens",
            dependencies: ["COpenSSLCrypto", "RoomKitProtocol"],
            swiftSettings: swiftSettings),

        // MARK: Storage: the one SQLite wrapper (connection, cached statements,
        // transactions, the WAL checkpoint thread) every store uses. No loop.
        .target(
            name: "RoomKitSQLite",
            dependencies: ["CSQLite3"],
            swiftSettings: swiftSettings),

        // MARK: What every executable shares: --version, log formats, secrets, sd_notify
        .plugin(name: "BuildRevision", capability: .buildTool(), path: "BuildTools/BuildRevision"),
        .target(
            name: "RoomKitCLI",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["BuildRevision"]),

        // MARK: Metrics: swift-metrics onto Prometheus text, with HELP, and process metrics
        .target(
            name: "RoomKitMetrics",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings),

        // MARK: The session rules both servers share (roomd and the simulator's):
        // login, resume, kicks, heartbeat/retention/token clocks. Pure, no I/O.
        .target(
            name: "RoomKitServerCore",
            dependencies: ["RoomKitProtocol"],
            swiftSettings: swiftSettings),

        // MARK: The reference room server and its CLI
        .target(
            name: "RoomKitServer",
            dependencies: [
                "RoomKitServerCore", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens", "RoomKitSQLite", "RoomKitMetrics",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "roomd",
            dependencies: [
                "RoomKitServer", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens", "RoomKitCLI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings),

        // MARK: The client engine a bot host embeds
        .target(
            name: "RoomKit",
            dependencies: [
                "RoomKitLoop", "RoomKitProtocol",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings),

        // MARK: Plugins: the C ABI, the Swift SDK, the host, and the plugins we ship
        .target(name: "CRoomKitPluginABI"),
        // The plugin wire's numbers (docs/PLUGIN-WIRE.md) and the bot side's spawn/limit/progress-page helpers.
        .target(name: "CRoomKitPluginWire"),
        // The plugin process: C only, links no engine (dlopen + the ABI + the wire).
        .executableTarget(
            name: "roomkit-plugin-host", dependencies: ["CRoomKitPluginABI", "CRoomKitPluginWire"],
            linkerSettings: [.linkedLibrary("dl"), .linkedLibrary("pthread")]),
        .target(
            name: "RoomKitPluginSDK",
            dependencies: ["CRoomKitPluginABI", "RoomKitJSON", "RoomKitProtocol"],
            swiftSettings: swiftSettings),
        .target(
            name: "RoomKitPluginHost",
            dependencies: [
                "CRoomKitPluginABI", "CRoomKitPluginWire", "RoomKit", "RoomKitLoop", "RoomKitProtocol", "RoomKitSQLite",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings),
        .target(
            name: "URLRewritePlugin", dependencies: ["RoomKitPluginSDK"], path: "Plugins/URLRewrite",
            swiftSettings: swiftSettings),
        .target(
            name: "ErrorLogPlugin", dependencies: ["RoomKitPluginSDK"], path: "Plugins/ErrorLog",
            swiftSettings: swiftSettings),
        .target(name: "EchoCommandsPlugin", dependencies: ["CRoomKitPluginABI"], path: "Plugins/EchoCommands"),
        .target(
            name: "SDKProbePlugin", dependencies: ["RoomKitPluginSDK"], path: "Tests/Plugins/SDKProbe",
            swiftSettings: swiftSettings),

        // MARK: A Redis client (hiredis) on the loop layer, for the bot fleet
        .target(
            name: "RoomKitRedis",
            dependencies: [
                "RoomKitLoop", "CHiredis", "CRoomKitRedis",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),

        // MARK: The bot host (roombot) and the example
        // MARK: The simulator (docs/PLUGINS.md): the engine on a virtual clock, no sockets.
        .target(
            name: "RoomKitSimulator",
            dependencies: [
                "RoomKit", "RoomKitLoop", "RoomKitProtocol", "RoomKitServerCore",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        // MARK: The bot fleet (docs/FLEET.md): its pure lease machine, the Redis
        // driver of it, and its Lua scripts, one file each (FleetScripts.swift).
        .target(
            name: "RoomKitFleet",
            dependencies: [
                "RoomKit", "RoomKitLoop", "RoomKitProtocol", "RoomKitRedis",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            resources: [.copy("Lua")],
            swiftSettings: swiftSettings),
        .target(
            name: "RoomKitBot",
            dependencies: [
                "RoomKit", "RoomKitPluginHost", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens", "RoomKitMetrics", "RoomKitRedis",
                "RoomKitSQLite",
                "RoomKitFleet",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            // The dashboard page, compiled into the module as bytes
            // (`PackageResources.dashboard_html`).
            resources: [.embedInCode("Resources/dashboard.html")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "roombot",
            dependencies: [
                "RoomKitSimulator",
                "RoomKitBot", "RoomKit", "RoomKitPluginHost", "RoomKitLoop", "RoomKitProtocol", "RoomKitCLI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The scaffolds' templates in their own languages (NewPlugin+Rust.swift).
            resources: [.copy("Templates")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "MultiRoomBot",
            dependencies: [
                "RoomKit", "RoomKitPluginHost", "RoomKitServer", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens", "RoomKitCLI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Examples/MultiRoomBot",
            exclude: ["plugins.json"],
            swiftSettings: swiftSettings),

        // MARK: Tests
        // Helpers every test target shares: polling, loopback sockets and raw
        // HTTP probes, spawning built binaries and roomd, compiling C plugins.
        .target(name: "RoomKitTestSupport", dependencies: ["RoomKit", "RoomKitServer", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens"],
                path: "Tests/RoomKitTestSupport", swiftSettings: swiftSettings),
        .testTarget(
            name: "RoomKitLoopTests",
            dependencies: ["RoomKitLoop", "RoomKitTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RoomKitTests",
            dependencies: ["RoomKit", "RoomKitServer", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens", "RoomKitSimulator", "RoomKitTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RoomKitPluginTests",
            dependencies: ["RoomKitPluginHost", "RoomKit", "RoomKitServer", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens", "RoomKitTestSupport",
                           .product(name: "MetricsTestKit", package: "swift-metrics")],
            // The ABI 1.0 header and a 1.0 plugin's source, compiled by the tests with cc.
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RoomKitRedisTests",
            dependencies: ["RoomKitRedis", "RoomKitLoop", "RoomKitTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RoomKitFleetTests",
            dependencies: ["RoomKitBot", "RoomKitFleet", "RoomKitRedis", "RoomKit", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens", "RoomKitTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RoomKitBotTests",
            dependencies: ["RoomKitBot", "RoomKit", "RoomKitServer", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens", "RoomKitSQLite", "RoomKitTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "ExampleTests",
            dependencies: ["RoomKitProtocol", "RoomKitTokens"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RoomKitServerTests",
            dependencies: ["RoomKitServer", "RoomKitServerCore", "RoomKitSimulator", "RoomKit", "RoomKitLoop", "RoomKitProtocol", "RoomKitTokens", "RoomKitSQLite", "RoomKitTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "OperationsTests",
            dependencies: ["RoomKitProtocol", "RoomKitTokens", "RoomKitTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RoomKitProtocolTests",
            dependencies: ["RoomKitProtocol", "RoomKitTokens", "RoomKitTestSupport"],
            swiftSettings: swiftSettings),
    ],
    swiftLanguageModes: [.v6]
)
