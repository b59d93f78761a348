import Foundation
import RoomKitTestSupport
import XCTest

/// The README's "Quickstart: roomd and roombot", run as written in a scratch
/// directory (its `.build/debug` is this build's, its `Examples` this
/// checkout's), only the ports 7700 and 8081 swapped for free ones.
final class QuickstartTests: XCTestCase {
    private func blocks(_ section: Substring, _ language: String) -> [String] {
        var found: [String] = []
        var rest = section[...]
        while let open = rest.range(of: "```\(language)\n"), let close = rest[open.upperBound...].range(of: "\n```") {
            found.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return found
    }

    func testReadmeQuickstart_runsAsWritten_bothRoomsLogined() throws {
        let readme = try String(contentsOfFile: repositoryRoot + "/README.md", encoding: .utf8)
        XCTAssertTrue(readme.hasPrefix("# RoomKit\n\n```\nmake run\nmake test\n```\n"), "the README opens with the two commands")
        let start = try XCTUnwrap(readme.range(of: "\n## Quickstart: roomd and roombot\n"))
        let section = Substring(readme[start.upperBound...].components(separatedBy: "\n## ").first ?? "")
        let shell = blocks(section, "sh")
        let json = try XCTUnwrap(blocks(section, "json").first)
        XCTAssertEqual(shell.count, 2, "two shell blocks")
        let roomdPort = String(freePort()), controlPort = String(freePort())
        func ports(_ text: String) -> String {
            text.replacingOccurrences(of: "7700", with: roomdPort).replacingOccurrences(of: "8081", with: controlPort)
        }

        let directory = try temporaryDirectory("quickstart")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bin = URL(fileURLWithPath: try builtProduct("roombot")).deletingLastPathComponent().path
        try FileManager.default.createDirectory(atPath: directory + "/.build", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: directory + "/.build/debug", withDestinationPath: bin)
        try FileManager.default.createSymbolicLink(atPath: directory + "/Examples", withDestinationPath: repositoryRoot + "/Examples")
        try ports(json).write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)

        var children: [Spawned] = []
        defer { for child in children { child.signal(SIGTERM); _ = child.finish() } }
        /// Runs one line; a server (`serve`, `run`) keeps running in the background.
        func line(_ command: String) throws -> Finished? {
            let text = ports(command.components(separatedBy: "#").first ?? command)
            if text.contains(" serve ") || text.contains(" run --config") {
                let child = try Spawned(path: "/bin/sh", arguments: ["-c", "cd \"$0\" && exec \(text)", directory], environment: [:])
                children.append(child)
                XCTAssertTrue(child.waitFor(text.contains(" serve ") ? "listening on" : "control on "), child.stderr)
                return nil
            }
            return runTool(["sh", "-c", text], directory: directory)
        }
        for command in shell[0].split(separator: "\n") {
            if let done = try line(String(command)) { XCTAssertEqual(done.status, 0, "\(command): \(done.stderr)") }
        }
        var rooms = ""
        for command in shell[1].split(separator: "\n") {
            if command.hasPrefix("curl") {
                let deadline = Date().addingTimeInterval(20)
                repeat {
                    rooms = try line(String(command))?.stdout ?? ""
                    if rooms.components(separatedBy: "\"LOGINED\"").count - 1 == 2 { break }
                    usleep(100_000)
                } while Date() < deadline
            } else if let done = try line(String(command)) {
                XCTAssertEqual(done.status, 0, "\(command): \(done.stderr)")
            }
        }
        XCTAssertEqual(rooms.components(separatedBy: "\"LOGINED\"").count - 1, 2, rooms)
        XCTAssertTrue(rooms.contains("lobby") && rooms.contains("support"), rooms)
        let plugins = http(Int(controlPort)!, "GET", "/v1/plugins").1
        XCTAssertTrue(plugins.contains("echo-commands") && !plugins.contains("failed"), plugins)
        XCTAssertFalse(children.last?.stderr.contains("holds a secret") ?? true, "bot.json is 0600 as the README says")
    }
}
