import Foundation
import RoomKitTestSupport
import XCTest

/// `--version` on every executable: the version and the git revision the
/// binary was built from.
final class VersionTests: XCTestCase {
    func testVersion_onEveryExecutable_printsVersionAndRevision() throws {
        let changelog = try String(contentsOfFile: repositoryRoot + "/CHANGELOG.md", encoding: .utf8)
        XCTAssertTrue(changelog.contains("## [Unreleased]"), "CHANGELOG.md needs an Unreleased section")
        for name in ["roomd", "roombot", "multiroom-bot"] {
            let run = try runProduct(name, ["--version"], timeout: 20)
            XCTAssertEqual(run.status, 0, "\(name) --version: \(run.stderr)")
            let line = run.stdout.trimmingCharacters(in: .newlines)
            let pattern = "^\(name) [0-9]+\\.[0-9]+\\.[0-9]+ \\(revision ([0-9a-f]{12}|unknown)\\)$"
            XCTAssertNotNil(line.range(of: pattern, options: .regularExpression), "\(name) --version printed '\(line)'")
            XCTAssertFalse(line.contains("\n"), "one line")
            // In a git checkout the revision names a real commit of this repository.
            guard let revision = line.split(separator: " ").last?.dropLast(), revision != "unknown" else {
                XCTAssertNil(runTool(["git", "-C", repositoryRoot, "rev-parse", "HEAD"]).flatMap { $0.status == 0 ? $0 : nil },
                             "built in a git checkout, yet the revision is unknown")
                continue
            }
            let check = try XCTUnwrap(runTool(["git", "-C", repositoryRoot, "cat-file", "-e", "\(revision)^{commit}"]))
            XCTAssertEqual(check.status, 0, "\(name): revision \(revision) is not a commit of \(repositoryRoot)")
        }
    }
}
