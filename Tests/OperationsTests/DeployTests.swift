import Foundation
import RoomKitTestSupport
import XCTest

/// The systemd units of deploy/systemd: sandboxed, Type=notify, and valid
/// for `systemd-analyze verify` (skipped when the tool is absent). The
/// installed tree is checked by `make check-install`.
final class DeployTests: XCTestCase {
    func testSystemdUnits_areSandboxedNotifyServices_andPassSystemdAnalyzeVerify() throws {
        let directory = try temporaryDirectory("units")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var checked: [String] = []
        for name in ["roomd", "roombot"] {
            let unit = try String(contentsOfFile: repositoryRoot + "/deploy/systemd/\(name).service", encoding: .utf8)
            let lines = Set(unit.split(separator: "\n").map(String.init))
            for required in ["Type=notify", "DynamicUser=yes", "ProtectSystem=strict", "StateDirectory=\(name)", "NoNewPrivileges=yes"] {
                XCTAssertTrue(lines.contains(required), "\(name).service lacks \(required)")
            }
            let exec = try XCTUnwrap(lines.first { $0.hasPrefix("ExecStart=/usr/local/bin/\(name) ") })
            XCTAssertFalse(exec.contains("--secret ") || exec.contains("--token "), "no secret on the command line: \(exec)")
            // verify needs the ExecStart binary to exist: point it at the built one.
            let path = directory + "/\(name).service"
            try unit.replacingOccurrences(of: "/usr/local/bin/\(name)", with: try builtProduct(name))
                .write(toFile: path, atomically: true, encoding: .utf8)
            checked.append(path)
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            throw XCTSkip("systemd-analyze is not installed; the units' text was checked")
        }
        // --man=no: the man pages are installed by `make install`, not here.
        let verify = try XCTUnwrap(runTool(["systemd-analyze", "verify", "--man=no"] + checked))
        XCTAssertEqual(verify.status, 0, verify.stdout + verify.stderr)
        XCTAssertEqual(verify.stderr.trimmingCharacters(in: .whitespacesAndNewlines), "", "no warnings")
    }
}
