import Foundation
import RoomKitProtocol
@testable import RoomKitServer
import XCTest

/// docs/PROTOCOL.md "Service connections": a `hello` carrying a valid
/// `service` token gives the connection the service request bucket, which
/// the hello reply advertises; every other connection keeps §1's bucket,
/// which still refuses a flood with 1009004.
final class ServiceConnectionTests: ServerTestCase {
    /// Sends `count` cheap requests back to back; returns how many were refused 1009004.
    private func refusals(_ client: RawClient, _ count: Int) throws -> Int {
        let ids = try (0..<count).map { _ in try client.sendRequest("logout", room: "nowhere") }
        return try ids.filter { try client.reply(to: $0).code == 1_009_004 }.count
    }

    func testHelloReply_advertisesTheConnectionsBucket() throws {
        let server = try startServer()
        let ordinary = try server.connect()
        let plain = try ordinary.history().first { $0.op == "reply" } ?? [:]
        XCTAssertEqual(plain["requestBurst"]?.doubleValue, 200)
        XCTAssertEqual(plain["requestsPerSecond"]?.doubleValue, 200)

        let service = try server.connect(hello: false)
        let reply = try service.ok("hello", ["client": "bot", "token": .string(makeToken(user: "bot", role: .service))])
        XCTAssertEqual(reply["requestBurst"]?.doubleValue, 100_000)
        XCTAssertEqual(reply["requestsPerSecond"]?.doubleValue, 100_000)
    }

    func testOrdinaryConnection_isRefused1009004PastItsBucket_aServiceConnectionIsNotAtTheSameRate() throws {
        let server = try startServer()  // default limits: 200 burst, 200/s
        let ordinary = try server.connect()
        XCTAssertGreaterThan(try refusals(ordinary, 1_000), 500, "an ordinary connection is still limited")

        let service = try server.connect(hello: false)
        try service.ok("hello", ["token": .string(makeToken(user: "bot", role: .service))])
        XCTAssertEqual(try refusals(service, 1_000), 0, "the service bucket admits the same burst")
        XCTAssertTrue(try service.isOpen())
    }

    func testHelloWithATokenThatIsNotAService_isRefused1002033_andTheConnectionMayGreetAgain() throws {
        let server = try startServer()
        let client = try server.connect(hello: false)
        XCTAssertEqual(try client.failure("hello", ["token": .string(makeToken(user: "u1", role: .writer))]), 1_002_033)
        XCTAssertEqual(try client.failure("hello", ["token": "not-a-jwt"]), 1_002_033)
        let reply = try client.ok("hello", ["client": "plain"])
        XCTAssertEqual(reply["requestBurst"]?.doubleValue, 200, "a refused token leaves the ordinary bucket")
        XCTAssertEqual(try refusals(client, 400) > 0, true)
    }

    func testServiceToken_logsInToRoomsLikeAWriter() throws {
        let server = try startServer()
        let client = try server.connect(hello: false)
        let token = makeToken(user: "bot", role: .service)
        try client.ok("hello", ["token": .string(token)])
        let reply = try client.login("r1", token: token, user: "bot")
        XCTAssertEqual(reply["ok"], true, "\(reply)")
        XCTAssertEqual(reply["writable"], true)
        try client.ok("setState", room: "r1", ["patch": ["globalState": ["n": 1]]])
    }
}
