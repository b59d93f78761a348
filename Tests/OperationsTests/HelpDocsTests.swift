import Foundation
import RoomKitTestSupport
import XCTest

/// `--help` and docs/CLI.md cannot drift apart: every flag an executable's
/// `--help` lists is in the CLI.md section of that command, and every flag
/// in that section's table exists in `--help`. (The metric names are held to
/// CLI.md by `MetricsScrapeTests` and `DeployRulesTests`.)
final class HelpDocsTests: XCTestCase {
    /// Executable, subcommand, and the CLI.md heading of its section.
    private let commands: [(String, [String], String)] = [
        ("roomd", ["serve"], "### `roomd serve`"),
        ("roomd", ["token"], "### `roomd token`"),
        ("roombot", ["run"], "### `roombot run`"),
        ("roombot", ["replay"], "### `roombot replay`"),
        ("roombot", ["check"], "### `roombot check`"),
        ("roombot", ["simulate"], "### `roombot simulate`"),
        ("roombot", ["new-plugin"], "### `roombot new-plugin`"),
        ("multiroom-bot", [], "## multiroom-bot"),
    ]

    /// The long flags of `--help`'s OPTIONS, without `--version` and `--help`.
    private func helpFlags(_ text: String) -> Set<String> {
        let pattern = try! NSRegularExpression(pattern: #"^  (?:-[a-zA-Z], )?(--[a-z][a-z0-9-]*)"#, options: .anchorsMatchLines)
        let range = NSRange(text.startIndex..., in: text)
        return Set(pattern.matches(in: text, range: range).compactMap { Range($0.range(at: 1), in: text).map { String(text[$0]) } })
            .subtracting(["--version", "--help"])
    }

    /// The section under `heading`, up to the next heading of any level.
    private func section(_ heading: String, in document: String) -> String? {
        guard let start = document.range(of: "\n" + heading + "\n") else { return nil }
        let rest = document[start.upperBound...]
        let end = rest.range(of: "\n#")?.lowerBound ?? rest.endIndex
        return String(rest[..<end])
    }

    /// Flags in the first column of the section's table rows (`| `--flag …` | …`).
    private func tableFlags(_ section: String) -> Set<String> {
        let pattern = try! NSRegularExpression(pattern: #"--[a-z][a-z0-9-]*"#)
        var flags: Set<String> = []
        for line in section.split(separator: "\n") where line.hasPrefix("| `--") {
            let first = String(line.dropFirst().split(separator: "|").first ?? "")
            let range = NSRange(first.startIndex..., in: first)
            for match in pattern.matches(in: first, range: range) {
                if let found = Range(match.range, in: first) { flags.insert(String(first[found])) }
            }
        }
        return flags
    }

    func testEveryExecutablesHelpFlags_matchItsCLIReferenceSection() throws {
        let cli = try String(contentsOfFile: repositoryRoot + "/docs/CLI.md", encoding: .utf8)
        for (product, subcommand, heading) in commands {
            let run = try runProduct(product, subcommand + ["--help"])
            XCTAssertEqual(run.status, 0, run.stderr)
            let help = helpFlags(run.stdout)
            XCTAssertFalse(help.isEmpty, "\(product) \(subcommand) --help lists no flags:\n\(run.stdout)")
            let text = try XCTUnwrap(section(heading, in: cli), "docs/CLI.md has no section \(heading)")
            for flag in help.sorted() {
                XCTAssertTrue(text.contains("`\(flag)") || text.contains(" \(flag) ") || text.contains("[\(flag)"),
                              "\(product) \(subcommand.joined()) --help has \(flag), docs/CLI.md \(heading) does not")
            }
            for flag in tableFlags(text).sorted() {
                XCTAssertTrue(help.contains(flag), "docs/CLI.md \(heading) documents \(flag), \(product) \(subcommand.joined()) --help has no such flag")
            }
        }
    }

    func testHelpTexts_sayWhatTheCodeAccepts() throws {
        let token = try runProduct("roomd", ["token", "--help"]).stdout
        XCTAssertTrue(token.contains("service"), "--role takes service too:\n\(token)")
        let newPlugin = try runProduct("roombot", ["new-plugin", "--help"]).stdout
        XCTAssertTrue(newPlugin.contains("[a-z][a-z0-9-]{0,63}"), newPlugin)
        let example = try runProduct("multiroom-bot", ["--help"]).stdout
        XCTAssertTrue(example.contains("five rooms"), example)
    }
}
