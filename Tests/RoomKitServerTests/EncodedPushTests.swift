import RoomKitProtocol
@testable import RoomKitServer
import XCTest

/// `EncodedPush`: a push is encoded once, with sorted keys, and a recording
/// frame line is those bytes with `t` spliced in. Both must be byte for
/// byte what the re-encoding path writes (parse, add `t` and `to`,
/// serialise with sorted keys), so recordings stay byte-stable.
final class EncodedPushTests: XCTestCase {
    /// The recording line as roomd wrote it before it kept the push's bytes.
    private func reencodedLine(_ push: [UInt8], t: Int64, to recipients: [String]?) throws -> [UInt8] {
        var line = try XCTUnwrap(JSON.parse(push).objectValue)
        line["t"] = .int(t)
        if let recipients { line["to"] = .array(recipients.map(JSON.string)) }
        var bytes = JSON.object(line).serialized(sortedKeys: true)
        bytes.append(10)
        return bytes
    }

    private func splicedLine(_ push: EncodedPush, t: Int64) -> [UInt8] {
        var bytes: [UInt8] = []
        EncodedPush.appendRecordingLine(push: push.bytes, timeAt: push.timeAt, t: t, to: &bytes)
        return bytes
    }

    func testEveryPushKind_isItsSortedSerialization_andItsRecordingLineIsTheReencodedOne() throws {
        let member = Member(memberId: 3, userId: "u3", name: "Zoë", payload: ["b": 1, "a": [2, 3]], memberState: ["z": true, "k": "v"])
        let pushes: [JSON] = [
            ServerMessage.state(room: "r1", seq: 4, from: 1, patch: ["globalState": ["b": 2, "a": 1]]),
            ServerMessage.memberState(room: "r1", seq: 5, memberId: 2, memberState: ["hand": "up", "at": 1.5]),
            ServerMessage.userUpdate(room: "r1", seq: 6, type: .add, users: [member]),
            ServerMessage.streamUpdate(room: "r1", seq: 7, type: .delete, streams: [MediaStream(id: "cam", userId: "u1", extraInfo: "hd")]),
            ServerMessage.extraInfo(room: "r1", seq: 8, from: 1, key: "k", value: "v\n\"quoted\""),
            ServerMessage.magix(room: "r1", seq: 9, from: 1, event: "e", payload: ["y": nil, "x": [1, "two"]]),
        ]
        for push in pushes {
            let encoded = EncodedPush(push)
            XCTAssertEqual(encoded.bytes, push.serialized(sortedKeys: true), push.jsonString)
            for t in [0, 7, 123_456_789] as [Int64] {
                XCTAssertEqual(splicedLine(encoded, t: t), try reencodedLine(encoded.bytes, t: t, to: nil), push.jsonString)
            }
        }
    }

    func testMagixTemplate_equalsTheEncodedPushOfTheSameEvent_withAndWithoutRecipients() throws {
        let payloads: [(text: String, sorted: Bool)] = [
            (#"{"a":1,"b":[true,null,"x"]}"#, true), (#"{"b":1,"a":{"d":2,"c":3}}"#, false), ("null", true), ("[]", true),
        ]
        for (text, _) in payloads {
            let request = #"{"op":"magix","id":1,"room":"r-1","event":"tick \"1\"","payload":\#(text)}"#
            let fields = try XCTUnwrap(ClientEnvelope.scanMagix(Array(request.utf8)))
            for to in [nil, [], ["u1", "ü2"]] as [[String]?] {
                let fast = EncodedPush.magix(room: "r-1", seq: 42, from: 7, event: fields.event, payload: fields.payload,
                                             payloadSorted: fields.payloadSorted, to: to)
                var tree = ServerMessage.magix(room: "r-1", seq: 42, from: 7, event: fields.event, payload: fields.payload.value)
                if let to, case .object(var members) = tree {
                    members["to"] = .array(to.map(JSON.string))
                    tree = .object(members)
                }
                let slow = EncodedPush(tree)
                XCTAssertEqual(fast.bytes, slow.bytes, "\(text) to \(String(describing: to))")
                XCTAssertEqual(fast.timeAt, slow.timeAt, "\(text) to \(String(describing: to))")
                XCTAssertEqual(splicedLine(fast, t: 5), try reencodedLine(fast.bytes, t: 5, to: to))
            }
        }
    }

    /// Joins and leaves are written from their members; the bytes and the
    /// splice point are the tree form's, and they decode to the body the
    /// server applied (`RoomModel.apply(_:)`), so a replay after a restart
    /// rebuilds the same room.
    func testUserUpdate_equalsTheEncodedPushOfTheTree_andDecodesToItsBody() throws {
        let members = [
            Member(memberId: 3, userId: "u3", name: "Zoë \"Z\"\n", payload: ["b": 1, "a": [2, ["d": nil, "c": 1.5]]],
                   memberState: ["z": true, "k": ["y": 1, "x": 2]]),
            Member(memberId: 1, userId: "bot"),
            Member(memberId: 12, userId: "u12", payload: "text"),
        ]
        for type in [UpdateType.add, .delete] {
            for users in [[members[1]], members, []] {
                let tree = ServerMessage.userUpdate(room: "room-é.1", seq: 99, type: type, users: users)
                let fast = EncodedPush.userUpdate(room: "room-é.1", seq: 99, type: type, users: users)
                let slow = EncodedPush(tree)
                XCTAssertEqual(String(decoding: fast.bytes, as: UTF8.self), String(decoding: slow.bytes, as: UTF8.self))
                XCTAssertEqual(fast.timeAt, slow.timeAt)
                let decoded = try XCTUnwrap(JSON.parse(fast.bytes).objectValue)
                XCTAssertEqual(try RoomEventBody.decode(op: "userUpdate", decoded), .userUpdate(type, users: users))
            }
        }
    }

    func testSeqReply_isTheReplyTheDecodedPathSends() throws {
        XCTAssertEqual(try JSON.parse(EncodedPush.seqReply(id: 12, seq: 345)),
                       ServerMessage.reply(id: 12, ["seq": .int(345)]))
    }
}
