import RoomKitTestSupport
import XCTest

@testable import RoomKitProtocol

/// `LoginReply.scan`, the client's byte-level read of login replies: it must
/// agree with the full path (`JSON.parse`, `ServerPush.decode`, then
/// `LoginReply(fields:)`) whenever it answers, and decline (nil) whatever
/// that path rejects or is not a successful login reply.
final class LoginReplyScanTests: XCTestCase {
    /// What the full path makes of `bytes`: the request id and reply, or nil.
    private func full(_ bytes: [UInt8]) -> (id: Int64, reply: LoginReply)? {
        guard let json = try? JSON.parse(bytes), case .success(.reply(let id, .success(let fields))) = ServerPush.decode(json),
              let reply = try? LoginReply(fields: fields) else { return nil }
        return (id, reply)
    }

    private func scan(_ text: String) -> (id: Int64, reply: LoginReply)? {
        let bytes = Array(text.utf8)
        return LoginReply.scan(bytes[...])
    }

    /// The differential check: the scanner answers exactly when the full
    /// path does (`declines`: it may also decline what the full path takes),
    /// and then with the same id and reply.
    private func assertAgrees(_ text: String, declines: Bool = false, file: StaticString = #filePath, line: UInt = #line) {
        let expected = full(Array(text.utf8))
        let scanned = scan(text)
        if let scanned {
            guard let expected else { return XCTFail("scanned, but the full path refuses: \(text)", file: file, line: line) }
            XCTAssertEqual(scanned.id, expected.id, text, file: file, line: line)
            XCTAssertEqual(scanned.reply, expected.reply, text, file: file, line: line)
        } else if !declines {
            XCTAssertNil(expected, "declined what the full path reads: \(text)", file: file, line: line)
        }
    }

    private let member = Member(memberId: 7, userId: "bot", name: "Bot \"B\"", payload: ["k": [1, 2.5, "é"]],
                                memberState: ["x": true])

    func testRepliesRoomdWrites_areScannedAsTheFullPathReadsThem() throws {
        var state = RoomState.initial
        state.globalState = ["topic": "line\nbreak", "n": 3, "nested": ["a": ["b": nil]]]
        let snapshot = RoomSnapshot(state: state, members: [member, Member(memberId: 8, userId: "u2")],
                                    streams: [MediaStream(id: "s1", userId: "u2", extraInfo: "cam")],
                                    extraInfo: ["k": "v", "ü": "\u{1F600}"])
        for reply in [
            LoginReply(session: "s-abc", memberId: 7, seq: 42, recovered: false, writable: true, expiresAt: 1_900_000_000_000,
                       snapshot: snapshot),
            LoginReply(session: "s-abc", memberId: 7, seq: 0, recovered: false, writable: false, expiresAt: 1,
                       snapshot: RoomSnapshot(state: .initial, members: [member])),
            LoginReply(session: "s-abc", memberId: 7, seq: 42, recovered: true, writable: true, expiresAt: 5, snapshot: nil),
        ] {
            let bytes = reply.replyJSON(id: 913)
            let scanned = try XCTUnwrap(LoginReply.scan(bytes[...]), String(decoding: bytes, as: UTF8.self))
            XCTAssertEqual(scanned.id, 913)
            XCTAssertEqual(scanned.reply, reply)
            assertAgrees(String(decoding: bytes, as: UTF8.self))
            // The tree's own serialization (sorted keys) reads the same.
            let tree = ServerMessage.reply(id: 913, reply.fields).serialized(sortedKeys: true)
            XCTAssertEqual(LoginReply.scan(tree[...])?.reply, reply)
        }
    }

    func testForms_agreeWithTheFullPath() {
        let head = #""op":"reply","id":5,"ok":true,"session":"s-1","memberId":2,"seq":3,"writable":true,"expiresAt":9"#
        let snapshot = #""state":{"globalState":{},"sceneState":{"scenePath":"/init","scenes":[{"name":"init"}],"index":0},"broadcastState":{"mode":"freedom"}},"members":[],"streams":[],"extraInfo":{}"#
        // Accepted: key order, whitespace (then the snapshot is parsed by the walk), unknown members, a recovered reply's ignored snapshot.
        assertAgrees("{\(head),\"recovered\":false,\(snapshot)}")
        assertAgrees("{\(snapshot),\"recovered\":false,\(head)}")
        assertAgrees(" { \(head) , \"recovered\" : false , \(snapshot.replacingOccurrences(of: ":", with: " : ")) } ")
        assertAgrees("{\(head),\"recovered\":false,\"future\":[1,{\"a\":null}],\(snapshot)}")
        assertAgrees("{\(head),\"recovered\":true,\"members\":5}")
        XCTAssertNotNil(scan("{\(head),\"recovered\":true,\"members\":5}"))
        // Refused by both, or not a login reply: declined.
        for text in [
            "{\(head),\"recovered\":false}",                                                  // no snapshot
            "{\(head),\"recovered\":false,\(snapshot.replacingOccurrences(of: "\"members\":[]", with: "\"members\":{}"))}",
            "{\(head),\"recovered\":false,\(snapshot.replacingOccurrences(of: "\"members\":[]", with: "\"members\":[{\"memberId\":0,\"userId\":\"u\"}]"))}",
            "{\(head),\"recovered\":false,\(snapshot.replacingOccurrences(of: "\"extraInfo\":{}", with: "\"extraInfo\":{\"a\":1}"))}",
            "{\(head),\"recovered\":false,\(snapshot.replacingOccurrences(of: "/init", with: "init"))}",
            "{\(head)}",                                                                       // no recovered
            "{\(head.replacingOccurrences(of: "\"ok\":true", with: "\"ok\":false")),\"recovered\":true,\"code\":1}",
            "{\(head.replacingOccurrences(of: "reply", with: "pong")),\"recovered\":true}",
            "{\(head.replacingOccurrences(of: "\"seq\":3", with: "\"seq\":3.5")),\"recovered\":true}",
            "{\(head.replacingOccurrences(of: "\"seq\":3", with: "\"seq\":\"3\"")),\"recovered\":true}",
            "{\(head),\"recovered\":true,\"seq\":4}",                                           // a repeated key
            "{\(head),\"recovered\":true,\"x\":1,\"x\":2}",
            "{\(head),\"recovered\":true}x",
            "{\(head),\"recovered\":tru}",
            "{\(head),\"recovered\":true,}",
            #"{"op":"reply","id":5,"ok":true,"seq":3}"#,                                        // another request's reply
            #"{"op":"magix","room":"r","seq":1,"from":1,"event":"e"}"#,
        ] {
            XCTAssertNil(scan(text), text)
            assertAgrees(text)
        }
        // Taken by the full path, left to it by the scanner: escapes in the session or a key.
        assertAgrees("{\(head.replacingOccurrences(of: "s-1", with: "s-\\u0031")),\"recovered\":true}", declines: true)
        assertAgrees("{\(head),\"recov\\u0065red\":true}", declines: true)
    }

    /// A memo kept across scans gives each reply its own state and members:
    /// the same text again reads as before, other text is decoded anew.
    func testMemo_givesEachReplyItsOwnSnapshot() throws {
        var memo = SnapshotMemo()
        var other = RoomState.initial
        other.globalState = ["topic": "other"]
        let replies = [
            RoomSnapshot(state: .initial, members: [member]),
            RoomSnapshot(state: .initial, members: [member]),
            RoomSnapshot(state: other, members: [member]),
            RoomSnapshot(state: other, members: [Member(memberId: 9, userId: "u9")]),
            RoomSnapshot(state: .initial, members: [member], streams: [MediaStream(id: "s", userId: "u")], extraInfo: ["a": "b"]),
        ].enumerated().map { index, snapshot in
            LoginReply(session: "s-\(index)", memberId: Int64(index + 1), seq: Int64(index), recovered: false, writable: true,
                       expiresAt: 9, snapshot: snapshot)
        }
        for reply in replies {
            let bytes = reply.replyJSON(id: 1)
            XCTAssertEqual(LoginReply.scan(bytes[...], memo: &memo)?.reply, reply)
        }
        // A reply the walk parses (not canonical) neither uses nor fills the memo.
        let spaced = Array(String(decoding: replies[2].replyJSON(id: 1), as: UTF8.self)
            .replacingOccurrences(of: "\"globalState\":", with: "\"globalState\" : ").utf8)
        XCTAssertEqual(LoginReply.scan(spaced[...], memo: &memo)?.reply, replies[2])
        XCTAssertEqual(LoginReply.scan(replies[0].replyJSON(id: 1)[...], memo: &memo)?.reply, replies[0])
    }
}
