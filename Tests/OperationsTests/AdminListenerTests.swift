import Foundation
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// `roomd serve --admin-listen`: `/metrics` and the admin API on a port of
/// their own, no longer on the public one.
final class AdminListenerTests: XCTestCase {
    func testAdminListener_servesMetricsAndAdmin_andThePublicPortNoLonger() throws {
        let data = try temporaryDirectory("admin")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let roomd = try startProduct("roomd", ["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data", data],
                                     environment: ["ROOMD_SECRET": "admin-secret"])
        defer {
            roomd.signal(SIGTERM)
            _ = roomd.finish()
        }
        XCTAssertTrue(roomd.waitFor("admin listening on"), roomd.stdout + roomd.stderr)
        let lines = roomd.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, roomd.stdout)
        XCTAssertTrue(lines.first?.hasPrefix("listening on 127.0.0.1:") ?? false, roomd.stdout)
        let ports = lines.compactMap { $0.split(separator: ":").last.flatMap { Int($0) } }
        XCTAssertEqual(ports.count, 2)
        let (publicPort, adminPort) = (ports[0], ports[1])
        XCTAssertNotEqual(publicPort, adminPort)
        let now = Int64(Date().timeIntervalSince1970)
        let admin = TokenSigner(secret: "admin-secret").sign(TokenClaims(sub: "ops", room: "*", role: .admin, exp: now + 60, iat: now))

        let metrics = http(adminPort, "GET", "/metrics")
        XCTAssertEqual(metrics.0, 200)
        XCTAssertTrue(metrics.1.contains("# TYPE roomd_connections gauge"), metrics.1)
        XCTAssertTrue(httpRequest(port: adminPort, "GET", "/v1/admin/rooms", token: admin).hasPrefix("HTTP/1.1 200"))
        XCTAssertEqual(http(adminPort, "GET", "/healthz").0, 200)
        XCTAssertEqual(http(adminPort, "GET", "/v1/rooms/lobby/recording").0, 404, "recordings stay on the public port")

        let publicMetrics = http(publicPort, "GET", "/metrics")
        XCTAssertEqual(publicMetrics.0, 404)
        XCTAssertTrue(publicMetrics.1.contains("served on the admin listener only"), publicMetrics.1)
        XCTAssertTrue(httpRequest(port: publicPort, "GET", "/v1/admin/rooms", token: admin).hasPrefix("HTTP/1.1 404"))
        XCTAssertEqual(http(publicPort, "GET", "/healthz").0, 200)
    }

    func testAdminListen_badValue_isAOneLineErrorNamingTheFlag() throws {
        let run = try runProduct("roomd", ["serve", "--listen", "127.0.0.1:0", "--admin-listen", "nope", "--data",
                                           NSTemporaryDirectory() + "admin-\(UUID())"], environment: ["ROOMD_SECRET": "s"])
        XCTAssertEqual(run.status, 2)
        XCTAssertEqual(run.stderr, "roomd: --admin-listen: expected HOST:PORT, got 'nope'\n")
    }
}
