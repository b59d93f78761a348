import XCTest

@testable import RoomKitProtocol

final class ServerMessageTests: XCTestCase {
    private func assertJSON(_ value: JSON, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(value, parsed(expected, file: file, line: line), file: file, line: line)
    }

    func testReply_ok_mergesFieldsButKeepsEnvelope() {
        assertJSON(ServerMessage.reply(id: 7), #"{"op":"reply","id":7,"ok":true}"#)
        assertJSON(ServerMessage.reply(id: 7, seq: 58), #"{"op":"reply","id":7,"ok":true,"seq":58}"#)
        assertJSON(ServerMessage.reply(id: 7, ["ok": false, "id": 1, "x": 1]), #"{"op":"reply","id":7,"ok":true,"x":1}"#)
    }

    func testReplyError_carriesCodeAndMessage() {
        let error = ProtocolError(code: .tokenInvalid, message: "token expired")
        assertJSON(
            ServerMessage.replyError(id: 7, error),
            #"{"op":"reply","id":7,"ok":false,"code":1002033,"message":"token expired"}"#)
    }

    func testHelloReply_matchesSpecExampleAndDecodes() throws {
        let hello = HelloReply(connection: "c-1", serverTime: 1_732_147_200_000)
        let message = ServerMessage.reply(id: 1, hello: hello)
        assertJSON(
            message,
            #"{"op":"reply","id":1,"ok":true,"connection":"c-1","serverTime":1732147200000,"heartbeatInterval":10000,"heartbeatTimeout":90000,"sessionRetention":1200000,"maxMessageBytes":1048576}"#
        )
        XCTAssertEqual(try HelloReply(fields: message.objectValue ?? [:]), hello)
    }

    func testLoginReply_freshIncludesSnapshotAndRecoveredOmitsIt() throws {
        let snapshot = RoomSnapshot(state: .initial, members: [Member(memberId: 12, userId: "u1")])
        let fresh = LoginReply(
            session: "s-1", memberId: 12, seq: 57, recovered: false, writable: true, expiresAt: 1_732_150_800_000,
            snapshot: snapshot)
        let message = ServerMessage.reply(id: 2, login: fresh)
        XCTAssertEqual(message["state"], RoomState.initial.json)
        XCTAssertEqual(message["members"], [["memberId": 12, "userId": "u1", "memberState": [:]]])
        XCTAssertEqual(message["streams"], [])
        XCTAssertEqual(message["extraInfo"], [:])
        XCTAssertEqual(message["recovered"], false)
        XCTAssertEqual(try LoginReply(fields: message.objectValue ?? [:]), fresh)

        let resumed = LoginReply(
            session: "s-1", memberId: 12, seq: 60, recovered: true, writable: false, expiresAt: 1, snapshot: nil)
        assertJSON(
            ServerMessage.reply(id: 3, login: resumed),
            #"{"op":"reply","id":3,"ok":true,"session":"s-1","memberId":12,"seq":60,"recovered":true,"writable":false,"expiresAt":1}"#
        )
    }

    func testOtherReplies_haveTheirResultFields() {
        assertJSON(
            ServerMessage.renewTokenReply(id: 4, expiresAt: 99, writable: false),
            #"{"op":"reply","id":4,"ok":true,"expiresAt":99,"writable":false}"#)
        assertJSON(ServerMessage.setWritableReply(id: 5, writable: true), #"{"op":"reply","id":5,"ok":true,"writable":true}"#)
    }

    func testPongAndError_connectionMessages() {
        assertJSON(ServerMessage.pong(t: 123, serverTime: 456), #"{"op":"pong","t":123,"serverTime":456}"#)
        assertJSON(ServerMessage.error(.malformed("bad")), #"{"op":"error","code":1009001,"message":"bad"}"#)
        assertJSON(
            ServerMessage.error(.malformed("bad"), room: "r"), #"{"op":"error","code":1009001,"message":"bad","room":"r"}"#)
    }

    func testRoomPushes_carryRoomSeqAndFields() {
        assertJSON(
            ServerMessage.state(room: "r", seq: 8, from: 12, patch: ["globalState": ["a": 1]]),
            #"{"op":"state","room":"r","seq":8,"from":12,"patch":{"globalState":{"a":1}}}"#)
        assertJSON(
            ServerMessage.memberState(room: "r", seq: 9, memberId: 12, memberState: ["tool": "pen"]),
            #"{"op":"memberState","room":"r","seq":9,"memberId":12,"memberState":{"tool":"pen"}}"#)
        assertJSON(
            ServerMessage.userUpdate(room: "r", seq: 10, type: .add, users: [Member(memberId: 3, userId: "u3", name: "C")]),
            #"{"op":"userUpdate","room":"r","seq":10,"type":"add","users":[{"memberId":3,"userId":"u3","name":"C","memberState":{}}]}"#
        )
        assertJSON(
            ServerMessage.streamUpdate(room: "r", seq: 11, type: .delete, streams: [MediaStream(id: "s", userId: "u")]),
            #"{"op":"streamUpdate","room":"r","seq":11,"type":"delete","streams":[{"id":"s","userId":"u"}]}"#)
        assertJSON(
            ServerMessage.extraInfo(room: "r", seq: 12, from: 3, key: "k", value: "v"),
            #"{"op":"extraInfo","room":"r","seq":12,"from":3,"key":"k","value":"v"}"#)
        assertJSON(
            ServerMessage.magix(room: "r", seq: 13, from: 3, event: "e", payload: ["x": nil]),
            #"{"op":"magix","room":"r","seq":13,"from":3,"event":"e","payload":{"x":null}}"#)
    }

    func testSessionPushes_haveNoSeq() {
        assertJSON(
            ServerMessage.kicked(room: "r", code: .kickedDuplicateLogin, reason: "logged in elsewhere"),
            #"{"op":"kicked","room":"r","code":1002050,"reason":"logged in elsewhere"}"#)
        assertJSON(
            ServerMessage.tokenWillExpire(room: "r", remaining: 30), #"{"op":"tokenWillExpire","room":"r","remaining":30}"#)
    }

    func testServerOps_coverEveryBuilder() {
        XCTAssertEqual(ServerOp.allCases.count, 11)
        XCTAssertEqual(UpdateType.add.rawValue, "add")
        XCTAssertEqual(UpdateType.delete.rawValue, "delete")
    }
}
