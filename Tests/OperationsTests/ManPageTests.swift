import Foundation
import RoomKitTestSupport
import XCTest

/// The man pages `make install` writes get DESCRIPTION, ENVIRONMENT, FILES
/// and EXAMPLES from deploy/man/NAME.mdoc (scripts/man-sections.sh) on top of
/// swift-argument-parser's output. Here on a page shaped like the parser's
/// (its SYNOPSIS, OPTIONS list and EXIT STATUS), rendered by `man -l`;
/// `make check-install` checks the installed pages the same way.
final class ManPageTests: XCTestCase {
    func testEveryExecutablesExtraSections_renderInOrder() throws {
        guard runTool(["sh", "-c", "command -v man"])?.status == 0 else { throw XCTSkip("man is not installed") }
        let directory = try temporaryDirectory("man")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for name in ["roomd", "roombot", "multiroom-bot"] {
            let generated = """
                .Dd November 26, 2026
                .Dt \(name.uppercased()) 1
                .Os
                .Sh NAME
                .Nm \(name)
                .Nd what it does
                .Sh SYNOPSIS
                .Nm
                .Op Fl -version
                .Sh DESCRIPTION
                .Bl -tag -width 6n
                .It Fl -version
                Show the version.
                .El
                .Sh "EXIT STATUS"
                The \(name) utility exits 0 on success.

                """
            try generated.write(toFile: "\(directory)/\(name).in", atomically: true, encoding: .utf8)
            let merged = try XCTUnwrap(runTool([repositoryRoot + "/scripts/man-sections.sh", "\(directory)/\(name).in",
                                                repositoryRoot + "/deploy/man/\(name).mdoc"]))
            XCTAssertEqual(merged.status, 0, merged.stderr)
            try merged.stdout.write(toFile: "\(directory)/\(name).1", atomically: true, encoding: .utf8)
            let rendered = try XCTUnwrap(runTool(["man", "-l", "\(directory)/\(name).1"], environment: ["MANWIDTH": "80"]))
            let headings = rendered.stdout.split(separator: "\n").filter { $0.first?.isUppercase == true && !$0.contains("(1)") && !$0.hasPrefix("BSD ") }
                .map(String.init)
            XCTAssertEqual(headings, ["NAME", "SYNOPSIS", "DESCRIPTION", "ENVIRONMENT", "FILES", "EXAMPLES", "EXIT STATUS"],
                           rendered.stdout)
            XCTAssertTrue(rendered.stdout.contains("--version"), "the parser's own text stays")
            XCTAssertTrue(rendered.stdout.components(separatedBy: "DESCRIPTION")[1].contains(name), rendered.stdout)
        }
    }
}
