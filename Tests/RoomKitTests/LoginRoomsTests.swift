import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import RoomKitTokens
import XCTest

/// `RoomHost.loginRooms`, the batch form of `loginRoom` roombot joins with:
/// each room's outcome in order (an invalid ID, a token the provider could
/// not give, a room already logged in, a login the server refuses), and
/// each room's events exactly as `loginRoom` raises them.
final class LoginRoomsTests: XCTestCase {
    func testEachRoomHasItsOwnOutcome_inOrder_withLoginRoomsEvents() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let secret = harness.secret
        let provider = ClosureTokenProvider { room, user in
            struct Refused: Error {}
            if room == "no-token" { throw Refused() }
            let now = Int64(Date().timeIntervalSince1970)
            // "readonly" gets a token for another room: the server refuses it.
            return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: room == "wrong-room" ? "elsewhere" : room,
                                                                role: .writer, exp: now + 3600, iat: now))
        }
        let host = try harness.host(recorder: events, tokenProvider: provider)
        try await host.loginRoom("already", user: harness.user("a"), token: harness.token("a"))

        let rooms = ["r1", "bad room", "no-token", "already", "wrong-room", "r2"]
        let outcomes = await host.loginRooms(rooms, user: harness.user("a"))
        XCTAssertEqual(outcomes.count, rooms.count)
        XCTAssertNil(outcomes[0])
        XCTAssertEqual(outcomes[1]?.code, .invalidArgument)
        XCTAssertEqual(outcomes[2]?.code, .tokenInvalid)
        XCTAssertEqual(outcomes[3]?.code, .alreadyLoggedIn)
        XCTAssertEqual(outcomes[4]?.code, .tokenInvalid, "the server's refusal: \(String(describing: outcomes[4]))")
        XCTAssertNil(outcomes[5])

        for room in ["r1", "r2"] {
            XCTAssertEqual(events.reasons(room), ["LOGINING 0", "LOGINED 0"], room)
            XCTAssertEqual(host.room(room)?.reason, .logined)
        }
        XCTAssertEqual(events.reasons("no-token"), ["LOGINING 0", "LOGIN_FAILED 1002033"], "as loginRoom reports a provider failure")
        XCTAssertEqual(events.reasons("wrong-room"), ["LOGINING 0", "LOGIN_FAILED 1002033"])
        XCTAssertEqual(events.reasons("already"), ["LOGINING 0", "LOGINED 0"], "the session in place is untouched")
        XCTAssertTrue(events.reasons("bad room").isEmpty)
        XCTAssertNil(host.room("bad room"))

        // An empty batch answers at once.
        let none = await host.loginRooms([], user: harness.user("a"))
        XCTAssertTrue(none.isEmpty)
        try await harness.close()
    }
}
