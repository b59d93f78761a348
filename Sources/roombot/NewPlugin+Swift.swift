import Foundation
import RoomKitCLI

extension Scaffold {
    /// The RoomKit package this roombot belongs to: the checkout whose
    /// `.build` holds the executable (a `Package.swift` naming "RoomKit" in
    /// an ancestor directory), or `PREFIX/share/roomkit/package`, which
    /// `make install` writes beside `PREFIX/bin/roombot`. nil: neither.
    static func installedRoomKit(executable: String = Scaffold.executablePath) -> String? {
        var directory = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
        let installed = directory.deletingLastPathComponent().appendingPathComponent("share/roomkit/package")
        if isRoomKitPackage(installed) { return installed.path }
        for _ in 0..<6 {
            if isRoomKitPackage(directory) { return directory.path }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    /// The roombot writing the project (an absolute path), for the C Makefile.
    var roombotPath: String {
        URL(fileURLWithPath: Scaffold.executablePath).resolvingSymlinksInPath().path
    }

    /// The PREFIX that roombot was installed into (its directory's parent).
    var roombotPrefix: String {
        URL(fileURLWithPath: roombotPath).deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// This process's executable (`/proc/self/exe`, else argv[0]).
    static var executablePath: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    private static func isRoomKitPackage(_ directory: URL) -> Bool {
        guard let manifest = try? String(contentsOf: directory.appendingPathComponent("Package.swift"), encoding: .utf8) else { return false }
        return manifest.contains("name: \"RoomKit\"")
    }

    /// A Swift plugin: a package with a dynamic library product depending on
    /// RoomKitPluginSDK by local path (nothing to fetch but RoomKit's own
    /// dependencies, which SwiftPM's cache has once RoomKit was built), and a
    /// test of its logic. It must be built with the host's Swift toolchain.
    func swift(roomkitPath: String) -> [String: String] {
        let dependency = ".package(name: \"RoomKit\", path: \"\(roomkitPath)\")"
        return [
            "Package.swift": """
                // swift-tools-version:6.0
                // Build with the same Swift toolchain as the roombot that loads it.
                import PackageDescription

                let package = Package(
                    name: "\(name)",
                    products: [.library(name: "\(name)", type: .dynamic, targets: ["\(typeName)"])],
                    dependencies: [\(dependency)],
                    targets: [
                        .target(name: "\(typeName)", dependencies: [.product(name: "RoomKitPluginSDK", package: "RoomKit")]),
                        .testTarget(name: "\(typeName)Tests", dependencies: ["\(typeName)"]),
                    ]
                )

                """,
            "Sources/\(typeName)/\(typeName).swift": """
                import RoomKitPluginSDK
                import RoomKitProtocol

                /// \(name): answers the magix event "ping" with "pong"
                /// {"greeting": <config greeting for the room>, "to": <sender>}.
                /// `host`, `config` and `log` are injected by the SDK.
                public final class \(typeName): RoomKitPlugin {
                    public init() {}

                    public func load(host: PluginHost, config: JSON) throws {
                        log.info("\(name) loaded")
                    }

                    public func magix(_ message: MagixMessage) {
                        let config = host.config(for: message.room) ?? self.config
                        guard let (event, payload) = Self.reply(to: message, config: config) else { return }
                        host.dispatchMagix(room: message.room, event: event, payload: payload)
                    }

                    /// The reply to a magix event, if any (pure, so it is easy to test).
                    public static func reply(to message: MagixMessage, config: JSON) -> (String, JSON)? {
                        guard message.event == "ping" else { return nil }
                        return ("pong", ["greeting": config["greeting"] ?? "hello", "to": .int(message.from)])
                    }
                }

                @_cdecl("roomkit_plugin_entry")
                public func roomkitPluginEntry(_ major: UInt16, _ minor: UInt16) -> UnsafeRawPointer? {
                    exportPlugin(\(typeName).self, major, minor)
                }

                """,
            "Tests/\(typeName)Tests/\(typeName)Tests.swift": """
                import Foundation
                import RoomKitPluginSDK
                import RoomKitProtocol
                import XCTest
                @testable import \(typeName)

                final class \(typeName)Tests: XCTestCase {
                    func testPingIsAnsweredWithTheRoomsGreeting() {
                        let ping = MagixMessage(room: "lobby", from: 7, event: "ping", payload: .null)
                        let reply = \(typeName).reply(to: ping, config: ["greeting": "hi"])
                        XCTAssertEqual(reply?.0, "pong")
                        XCTAssertEqual(reply?.1, ["greeting": "hi", "to": 7])
                        XCTAssertNil(\(typeName).reply(to: MagixMessage(room: "lobby", from: 7, event: "other", payload: .null), config: .null))
                    }

                    /// scenario.json in roombot's simulator: the built library, loaded as
                    /// the bot loads it, against scripted rooms in virtual time.
                    func testScenarioHoldsInTheSimulator() throws {
                        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                            .deletingLastPathComponent().deletingLastPathComponent()
                        let process = Process()
                        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                        process.arguments = [ProcessInfo.processInfo.environment["ROOMBOT"] ?? "roombot",
                                             "simulate", "--manifest", "plugins.json", "--script", "scenario.json"]
                        process.currentDirectoryURL = root
                        let errors = Pipe()
                        process.standardError = errors
                        try process.run()
                        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                        process.waitUntilExit()
                        XCTAssertEqual(process.terminationStatus, 0, text)
                    }
                }

                """,
            "plugins.json": manifest(library: ".build/debug/lib\(name).so"),
            "scenario.json": scenario,
            "README.md": """
                # \(name)

                A RoomKit plugin in Swift, made by `roombot new-plugin \(name) --lang swift`.

                ## Build, test and load (two commands)

                    swift build && swift test               # .build/debug/lib\(name).so, then its test
                    roombot check --manifest plugins.json   # loads it as the bot would

                **Use the same Swift toolchain as the roombot that loads it.** A Swift
                plugin links the Swift runtime and Foundation dynamically; inside the
                bot it shares the copies already loaded by the bot (same library
                names), and Swift on Linux has no stable ABI between toolchain
                versions, so a plugin built by another toolchain can crash on load or
                misbehave later. C and Rust plugins have no such constraint.

                \(runSection)
                """,
            ".gitignore": ".build/\nPackage.resolved\n",
        ]
    }
}
