import Foundation
import XCTest

/// The repository stands alone: a clone holds every document it refers to,
/// and the references in docs/ cover what the code accepts.
final class RepositoryTests: XCTestCase {
    /// The repository's root: three levels above this file (Tests/ExampleTests/).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    func testTrackedFiles_neverReferToTheSharedFolderOutsideTheRepository() throws {
        // Built from pieces so this file does not match itself.
        let needles = ["../" + "shared/", "shared/" + "spec", "/work" + "/"]
        let files = try Self.trackedFiles()
        XCTAssertGreaterThan(files.count, 50, "too few files found under \(Self.root): \(files.prefix(5))")
        XCTAssertTrue(files.contains("docs/CLI.md") && files.contains("docs/PROTOCOL.md"), "the references must be in the repository")
        var offenders: [String] = []
        for file in files {
            guard let data = FileManager.default.contents(atPath: Self.root + "/" + file),
                  let text = String(data: data, encoding: .utf8) else { continue }  // binary files
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where needles.contains(where: { line.contains($0) }) {
                offenders.append("\(file):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        XCTAssertEqual(offenders, [], "paths outside the repository:\n" + offenders.joined(separator: "\n"))
    }

    func testCLIReference_documentsEveryBotConfigAndManifestField() throws {
        let reference = try String(contentsOfFile: Self.root + "/docs/CLI.md", encoding: .utf8)
        let config = try Self.knownFields(in: "Sources/RoomKitBot/BotConfig.swift")
        XCTAssertTrue(config.contains("controlToken") && config.contains("state"), "\(config)")
        for field in config {
            XCTAssertTrue(reference.contains("| `\(field)` |"), "docs/CLI.md has no bot.json row for `\(field)`")
        }
        let manifest = try Self.knownFields(in: "Sources/RoomKitPlugins/PluginManifest.swift", after: "let known = Set([")
            + Self.knownFields(in: "Sources/RoomKitPlugins/PluginManifest+Isolation.swift", after: "static let isolationFields = [")
        XCTAssertTrue(manifest.contains("timeoutMs"), "\(manifest)")
        for field in manifest {
            XCTAssertTrue(reference.contains("| `plugins[i].\(field)` |"), "docs/CLI.md has no manifest row for `\(field)`")
        }
    }

    // MARK: Support

    /// `git ls-files`, or every file outside build folders when this is not a
    /// git checkout (a source tarball).
    static func trackedFiles() throws -> [String] {
        let git = Process()
        git.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        git.arguments = ["git", "-C", root, "ls-files", "-z"]
        let out = Pipe()
        git.standardOutput = out
        git.standardError = FileHandle.nullDevice
        if (try? git.run()) != nil {
            let data = out.fileHandleForReading.readDataToEndOfFile()
            git.waitUntilExit()
            if git.terminationStatus == 0 {
                return String(decoding: data, as: UTF8.self).split(separator: "\0").map(String.init)
            }
        }
        var files: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let path = enumerator?.nextObject() as? String {
            let top = path.split(separator: "/").first.map(String.init) ?? path
            if top.hasPrefix(".build") || top == ".git" || top == ".swiftpm" { enumerator?.skipDescendants(); continue }
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                files.append(path)
            }
        }
        return files
    }

    /// The strings of the first list literal after `marker` (by default
    /// `let known: Set<String> = [`) in a source file.
    static func knownFields(in file: String, after marker: String = "let known: Set<String> = [") throws -> [String] {
        let source = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
        let start = try XCTUnwrap(source.range(of: marker), "no known-field list in \(file)")
        let end = try XCTUnwrap(source[start.upperBound...].firstIndex(of: "]"))
        let list = source[start.upperBound..<end]
        let regex = try NSRegularExpression(pattern: #""([A-Za-z]+)""#)
        let text = String(list)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }
}
