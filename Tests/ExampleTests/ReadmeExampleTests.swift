import Foundation
import XCTest

/// The README's embedding example, compiled as written: its Swift block is
/// the `main.swift` of a scratch package that depends on this repository by
/// path, the way an app would. An API change that breaks the example fails
/// here instead of in a newcomer's first build.
final class ReadmeExampleTests: XCTestCase {
    private static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The first ```swift block after the `## Embedding` heading.
    static func embeddingExample(in readme: String) -> String? {
        guard let section = readme.range(of: "\n## Embedding") else { return nil }
        let rest = readme[section.upperBound...]
        guard let open = rest.range(of: "```swift\n") else { return nil }
        guard let close = rest[open.upperBound...].range(of: "\n```") else { return nil }
        return String(rest[open.upperBound..<close.lowerBound]) + "\n"
    }

    func testReadmeEmbeddingExample_buildsAgainstThePackageAsADependency() throws {
        let readme = try String(contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let example = try XCTUnwrap(Self.embeddingExample(in: readme), "README.md has no ```swift block under ## Embedding")
        XCTAssertTrue(example.contains("ServiceGroup"), "the example shows the services way to start and stop")

        // Under the repository's own .build: ignored by git, and kept between
        // runs so a second run only rebuilds what changed.
        let scratch = Self.repository.appendingPathComponent(".build/readme-example")
        let package = scratch.appendingPathComponent("package")
        let sources = package.appendingPathComponent("Sources/ReadmeExample")
        try FileManager.default.createDirectory(at: sources, withIntermediateDirectories: true)
        // A path dependency's identity is its directory's name (a clone may be named anything).
        let identity = Self.repository.lastPathComponent.lowercased()
        let manifest = """
            // swift-tools-version:6.0
            import PackageDescription

            let package = Package(
                name: "ReadmeExample",
                platforms: [.macOS(.v15)],
                dependencies: [
                    .package(path: "\(Self.repository.path)"),
                    .package(url: "https://github.com/apple/swift-log", from: "1.5.0"),
                    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
                ],
                targets: [
                    .executableTarget(name: "ReadmeExample", dependencies: [
                        .product(name: "RoomKit", package: "\(identity)"),
                        .product(name: "RoomKitLoop", package: "\(identity)"),
                        .product(name: "RoomKitPluginHost", package: "\(identity)"),
                        .product(name: "RoomKitProtocol", package: "\(identity)"),
                        .product(name: "RoomKitTokens", package: "\(identity)"),
                        .product(name: "Logging", package: "swift-log"),
                        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                    ]),
                ],
                swiftLanguageModes: [.v6]
            )

            """
        try manifest.write(to: package.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        try example.write(to: sources.appendingPathComponent("main.swift"), atomically: true, encoding: .utf8)

        let build = Process()
        build.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        build.arguments = ["swift", "build", "--package-path", package.path,
                           "--scratch-path", scratch.appendingPathComponent("build").path]
        let log = scratch.appendingPathComponent("build.log")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        build.standardOutput = handle
        build.standardError = handle
        try build.run()
        build.waitUntilExit()
        try handle.close()
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        XCTAssertEqual(build.terminationStatus, 0, "the README example does not build:\n\(output.suffix(6000))")
    }
}
