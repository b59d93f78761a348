import XCTest

@testable import RoomKitProtocol

/// `ServerPush.decode` (the mirror of `ClientEnvelope.decode`) and the one
/// shared apply, `RoomContentModel.apply`.
final class ServerPushTests: XCTestCase {
    private func decode(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> Result<ServerPush, ProtocolError> {
        ServerPush.decode(parsed(text, file: file, line: line))
    }

    private func assertFailure(_ text: String, _ code: ErrorCode, file: StaticString = #filePath, line: UInt = #line) {
        switch decode(text, file: file, line: line) {
        case .success(let push): XCTFail("decoded \(push)", file: file, line: line)
        case .failure(let error): XCTAssertEqual(error.code, code, "\(text): \(error.message)", file: file, line: line)
        }
    }

    // MARK: Decode: every op the server sends, as ServerMessage encodes it

    func testDecode_roundTripsEveryPushServerMessageEncodes() throws {
        let member = Member(memberId: 2, userId: "u2", name: "b", payload: [:], memberState: ["pen": "red"])
        let stream = MediaStream(id: "cam", userId: "u2", extraInfo: "hd")
        let cases: [(JSON, ServerPush)] = [
            (ServerMessage.state(room: "r1", seq: 3, from: 1, patch: ["globalState": ["a": 1]]),
             .room(RoomPush(room: "r1", seq: 3, body: .state(from: 1, patch: ["globalState": ["a": 1]])))),
            (ServerMessage.memberState(room: "r1", seq: 4, memberId: 2, memberState: ["pen": "red"]),
             .room(RoomPush(room: "r1", seq: 4, body: .memberState(memberId: 2, memberState: ["pen": "red"])))),
            (ServerMessage.userUpdate(room: "r1", seq: 5, type: .add, users: [member]),
             .room(RoomPush(room: "r1", seq: 5, body: .userUpdate(.add, users: [member])))),
            (ServerMessage.streamUpdate(room: "r1", seq: 6, type: .delete, streams: [stream]),
             .room(RoomPush(room: "r1", seq: 6, body: .streamUpdate(.delete, streams: [stream])))),
            (ServerMessage.extraInfo(room: "r1", seq: 7, from: 2, key: "k", value: "v"),
             .room(RoomPush(room: "r1", seq: 7, body: .extraInfo(from: 2, key: "k", value: "v")))),
            (ServerMessage.magix(room: "r1", seq: 8, from: 2, event: "chat", payload: ["t": "hi"]),
             .room(RoomPush(room: "r1", seq: 8, body: .magix(from: 2, event: "chat", payload: ["t": "hi"])))),
            (ServerMessage.kicked(room: "r1", code: .kickedDuplicateLogin, reason: "elsewhere"),
             .kicked(room: "r1", code: .kickedDuplicateLogin, reason: "elsewhere")),
            (ServerMessage.tokenWillExpire(room: "r1", remaining: 30), .tokenWillExpire(room: "r1", remaining: 30)),
            (ServerMessage.error(ProtocolError(code: .malformed, message: "bad"), room: "r1"),
             .error(ProtocolError(code: .malformed, message: "bad"), room: "r1")),
            (ServerMessage.pong(t: 5, serverTime: 9), .pong(t: 5, serverTime: 9)),
            (ServerMessage.replyError(id: 7, ProtocolError(code: .tokenInvalid, message: "expired")),
             .reply(id: 7, .failure(ProtocolError(code: .tokenInvalid, message: "expired")))),
        ]
        for (json, expected) in cases {
            XCTAssertEqual(try ServerPush.decode(json).get(), expected, "\(json.jsonString)")
        }
        let ok = try ServerPush.decode(ServerMessage.reply(id: 9, seq: 58)).get()
        guard case .reply(9, .success(let fields)) = ok else { return XCTFail("\(ok)") }
        XCTAssertEqual(fields["seq"], 58)
    }

    func testDecode_usesTheClientDecodersCodes() {
        assertFailure(#"[1]"#, .malformed)
        assertFailure(#"{"room":"r1"}"#, .malformed)
        assertFailure(#"{"op":7}"#, .malformed)
        assertFailure(#"{"op":"teleport"}"#, .unknownOp)
        assertFailure(#"{"op":"magix","room":"r1","seq":1,"event":"e"}"#, .malformed)          // no from
        assertFailure(#"{"op":"magix","room":"r1","seq":"1","from":1,"event":"e"}"#, .malformed)
        assertFailure(#"{"op":"state","room":"r1","seq":1,"from":1}"#, .malformed)              // no patch
        assertFailure(#"{"op":"userUpdate","room":"r1","seq":1,"type":"move","users":[]}"#, .invalidArgument)
        assertFailure(#"{"op":"userUpdate","room":"r1","seq":1,"type":"add","users":[{"userId":"u"}]}"#, .malformed)
        assertFailure(#"{"op":"extraInfo","room":"bad room","seq":1,"from":1,"key":"k","value":"v"}"#, .invalidArgument)
        assertFailure(#"{"op":"extraInfo","room":"r1","seq":-1,"from":1,"key":"k","value":"v"}"#, .invalidArgument)
        assertFailure(#"{"op":"reply","id":3,"ok":false}"#, .malformed)                         // no code
        assertFailure(#"{"op":"kicked","code":1002050}"#, .malformed)                            // no room
    }

    func testDecode_ignoresUnknownFields() throws {
        let push = try decode(#"{"op":"magix","room":"r1","seq":2,"from":1,"event":"e","payload":null,"future":true}"#).get()
        XCTAssertEqual(push, .room(RoomPush(room: "r1", seq: 2, body: .magix(from: 1, event: "e", payload: .null))))
    }

    // MARK: The one apply

    private func member(_ id: Int64, _ user: String) -> Member {
        Member(memberId: id, userId: user, name: user, payload: [:], memberState: [:])
    }

    func testApply_state_mergesGlobalStateOneLevel_andReportsChangedKeys() throws {
        var snapshot = RoomSnapshot(state: .initial)
        var change = try snapshot.apply(.state(from: 1, patch: ["globalState": ["a": 1, "b": 2]]))
        XCTAssertEqual(change.stateKeys, ["globalState"])
        change = try snapshot.apply(.state(from: 1, patch: ["globalState": ["b": .null, "c": 3]]))
        XCTAssertEqual(snapshot.state.globalState, ["a": 1, "c": 3])
        XCTAssertEqual(change.stateKeys, ["globalState"])
        change = try snapshot.apply(.state(from: 1, patch: ["globalState": ["a": 1]]))
        XCTAssertTrue(change.isEmpty, "setting what is there changes nothing")
    }

    func testApply_badPatch_throws1009006_andLeavesTheContentAsItWas() throws {
        var snapshot = RoomSnapshot(state: .initial, members: [member(1, "u1")])
        let before = snapshot
        XCTAssertThrowsError(try snapshot.apply(.state(from: 1, patch: ["zoom": 2]))) { error in
            XCTAssertEqual((error as? ProtocolError)?.code, .invalidArgument)
        }
        XCTAssertEqual(snapshot, before)
    }

    func testApply_membership_addReplacesSameID_deleteRemoves_memberStateReplaces() throws {
        var snapshot = RoomSnapshot(state: .initial)
        XCTAssertTrue(try snapshot.apply(.userUpdate(.add, users: [member(1, "u1"), member(2, "u2")])).members)
        var renamed = member(1, "u1")
        renamed.name = "again"
        try snapshot.apply(.userUpdate(.add, users: [renamed]))
        XCTAssertEqual(snapshot.members.map(\.memberId), [2, 1], "a re-added member moves to the end, once")
        XCTAssertEqual(snapshot.members.last?.name, "again")
        XCTAssertTrue(try snapshot.apply(.memberState(memberId: 2, memberState: ["pen": "red"])).members)
        XCTAssertEqual(snapshot.members.first?.memberState, ["pen": "red"])
        XCTAssertFalse(try snapshot.apply(.memberState(memberId: 9, memberState: ["x": 1])).members, "unknown member")
        XCTAssertTrue(try snapshot.apply(.userUpdate(.delete, users: [member(2, "u2")])).members)
        XCTAssertFalse(try snapshot.apply(.userUpdate(.delete, users: [member(2, "u2")])).members, "already gone")
        XCTAssertEqual(snapshot.members.map(\.memberId), [1])
    }

    func testApply_streamsExtraInfoAndMagix() throws {
        var snapshot = RoomSnapshot(state: .initial)
        let cam = MediaStream(id: "cam", userId: "u1", extraInfo: "hd")
        XCTAssertTrue(try snapshot.apply(.streamUpdate(.add, streams: [cam])).streams)
        XCTAssertTrue(try snapshot.apply(.streamUpdate(.delete, streams: [cam])).streams)
        XCTAssertEqual(snapshot.streams, [])
        XCTAssertEqual(try snapshot.apply(.extraInfo(from: 1, key: "topic", value: "x")).extraInfoKey, "topic")
        XCTAssertEqual(snapshot.extraInfo, ["topic": "x"])
        let before = snapshot
        XCTAssertTrue(try snapshot.apply(.magix(from: 1, event: "e", payload: .null)).isEmpty)
        XCTAssertEqual(snapshot, before)
    }
}
