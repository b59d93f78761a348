import XCTest
@testable import RoomKitProtocol

/// The login reply and the bot's stored snapshot are written straight as
/// text (`RoomState+Write.swift`), not through a tree of `JSON` values: the
/// text must parse to exactly the tree the `json` forms build, for every
/// optional part present and absent, and with strings that need escaping.
final class RoomStateWriteTests: XCTestCase {
    private let snapshots: [RoomSnapshot] = {
        let plain = RoomSnapshot(state: .initial, members: [Member(memberId: 1, userId: "bot")])
        let full = RoomSnapshot(
            state: RoomState(
                globalState: ["score": 3, "nested": ["a": [1, 2.5, "x\"y"]], "none": .null],
                sceneState: SceneState(
                    scenePath: "/deck/p2",
                    scenes: [Scene(name: "p1"),
                             Scene(name: "p2", ppt: PPT(src: "https://example.test/p2.png", width: 1024, height: 768.5),
                                   images: [Image(uuid: "i-1", url: "https://example.test/i.png", x: -1.5, y: 2, width: 10, height: 20)])],
                    index: 1),
                broadcastState: BroadcastState(mode: .broadcaster, broadcasterId: 7)),
            members: [Member(memberId: 1, userId: "bot"),
                      Member(memberId: 7, userId: "ann", name: "Ann \"A\" \\ Lee\n", payload: ["role": "host"],
                             memberState: ["cursor": [1, 2]]),
                      Member(memberId: 9, userId: "bob")],
            streams: [MediaStream(id: "cam", userId: "ann"), MediaStream(id: "mic", userId: "ann", extraInfo: "{\"codec\":\"opus\"}")],
            extraInfo: ["topic": "tab\there", "empty": ""])
        return [plain, full, RoomSnapshot(state: .initial)]
    }()

    func testSnapshotText_parsesToReplyFields() throws {
        for snapshot in snapshots {
            let text = snapshot.replyFieldsJSON()
            XCTAssertEqual(try JSON.parse(text), .object(snapshot.replyFields), String(decoding: text, as: UTF8.self))
            XCTAssertEqual(try RoomSnapshot(replyFields: try XCTUnwrap(JSON.parse(text).objectValue)), snapshot)
        }
    }

    func testLoginReplyText_parsesToTheReplyMessage() throws {
        for snapshot in snapshots + [nil] {
            for (recovered, writable) in [(false, true), (true, false)] {
                let reply = LoginReply(session: "s-1\"2", memberId: 42, seq: 9_007_199_254_740_993, recovered: recovered,
                                       writable: writable, expiresAt: 1_795_780_889_631, snapshot: snapshot)
                let text = reply.replyJSON(id: -3)
                XCTAssertEqual(try JSON.parse(text), ServerMessage.reply(id: -3, login: reply), String(decoding: text, as: UTF8.self))
            }
        }
    }

    func testLoginRequestText_parsesToTheEnvelopeJSON() throws {
        let users = [LoginUser(id: "bot"), LoginUser(id: "ann", name: "Ann \"A\"", payload: ["role": ["host", 1]])]
        for user in users {
            for resume in [nil, ResumePoint(session: "s-9", seq: 41)] {
                for fence: Int64? in [nil, 7] {
                    for room: String? in [nil, "lobby"] {
                        let login = LoginRequest(token: "a.b.c", user: user, writable: fence == nil, resume: resume, fence: fence)
                        let envelope = ClientEnvelope(id: 12, room: room, request: .login(login))
                        let text = envelope.serialized()
                        XCTAssertEqual(try JSON.parse(text), envelope.json, String(decoding: text, as: UTF8.self))
                    }
                }
            }
        }
        let other = ClientEnvelope(id: 3, room: "lobby", request: .logout)
        XCTAssertEqual(try JSON.parse(other.serialized()), other.json)
    }
}
