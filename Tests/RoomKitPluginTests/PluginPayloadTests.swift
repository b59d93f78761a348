import Foundation
import RoomKitLoop
import XCTest

@testable import RoomKit
@testable import RoomKitPluginHost
import RoomKitProtocol

/// The hot path's seams in plugin dispatch: the payload text written once
/// per event, and the watchdog's batched bookkeeping. Pure logic.
final class PluginPayloadTests: XCTestCase {
    /// Before, plugins got `JSON.object(event.logFields).jsonString`; the
    /// payload is now written by `appendLogFieldsJSON`. It must be the same
    /// JSON value for every kind a plugin can receive, NUL-terminated.
    func testRoomEventPayload_isTheLogFieldsObject_forEveryKind() throws {
        let member = Member(memberId: 7, userId: "u\"7", name: "Zoë", payload: ["a": 1])
        let events: [RoomEvent] = [
            .roomStateChanged(room: "r", reason: .reconnected, errorCode: .success, extendedData: ["recovered": true]),
            .phaseChanged(room: "r", phase: .connected),
            .roomStateModified(room: "r", from: 3, diff: RoomStateDiff()),
            .beingAbleToCommitChange(room: "r", writable: true),
            .disconnectWithError(room: "r", error: "gone\n"),
            .kickedWithReason(room: "r", code: .success, reason: "bye"),
            .catchErrorWhenAppendFrame(room: "r", memberId: 2, error: "bad"),
            .magix(MagixEvent(room: "room-1", seq: 42, from: 2, event: "bench", payload: ["t": .int(1_000_000_000_000)])),
            .magix(MagixEvent(room: "r:x", seq: 0, from: -1, event: "q\"uote\\ \u{1}é",
                              payload: ["nested": ["a": [1, 2.5, "x", nil, true]], "s": "ü\t"], replayed: true)),
            .magix(MagixEvent(room: "r", seq: Int64.max, from: Int64.min, event: "e", payload: .null)),
            .magix(MagixEvent(room: "r", seq: 1, from: 1, event: "e", payload: "text")),
            .userUpdate(room: "r", type: .add, users: [member]),
            .streamUpdate(room: "r", type: .delete, streams: [MediaStream(id: "s1", userId: "u")]),
            .extraInfoUpdate(room: "r", key: "k", value: "v"),
            .tokenWillExpire(room: "r", remaining: 30),
            .resync(ResyncEvent(room: "r", reason: .notRecovered, lastAppliedSeq: 4, resumedAtSeq: 9)),
        ]
        var buffer: [UInt8] = []
        for event in events {
            let kind = try XCTUnwrap(PluginManager.kind(of: event), "\(event)")
            let call = PluginManager.roomEventCall(event, kind: kind, room: try XCTUnwrap(event.room), buffer: &buffer)
            XCTAssertEqual(call.kind, Int32(kind.rawValue))
            XCTAssertEqual(call.room, event.room)
            XCTAssertEqual(call.payload.last, 0, "NUL-terminated for C")
            XCTAssertEqual(call.payload.dropLast().filter { $0 == 0 }.count, 0)
            let before = JSON.object(event.logFields).jsonString
            XCTAssertEqual(try JSON.parse(call.payloadText), try JSON.parse(before), "\(event)")
        }
    }

    /// The magix payload keeps a fixed key order and no whitespace: the
    /// bench probe (and simple C plugins) look for `"t":` with `strstr`.
    /// The order is the event log's (`event` first, then sorted keys): the
    /// payload and the log line are cut from one encoding.
    func testMagixPayload_isCompactWithAFixedOrder() {
        let event = RoomEvent.magix(MagixEvent(room: "room-1", seq: 42, from: 2, event: "bench", payload: ["t": 5]))
        var buffer: [UInt8] = []
        event.appendLogFieldsJSON(to: &buffer)
        XCTAssertEqual(String(decoding: buffer, as: UTF8.self),
                       #"{"event":"bench","from":2,"payload":{"t":5},"room":"room-1","seq":42}"#)
    }

    /// A magix push read straight from its bytes (`ServerPush.scanMagix`)
    /// hands plugins its received payload text: the same JSON, field for
    /// field, as the decoded push's payload serialized (byte for byte when
    /// no object has two keys, whose order was the dictionary's before).
    func testMagixPayload_fromReceivedBytes_isTheDecodedPayload() throws {
        let texts = [
            #"{"event":"bench","from":2,"op":"magix","payload":{"t":1000000000000},"room":"room-1","seq":42}"#,
            #"{"op":"magix","room":"r:x","seq":0,"from":-1,"event":"q","payload":{"nested":{"a":[1,2.5,"x",null,true]},"s":"ü\t"}}"#,
            #"{"op":"magix","room":"r","seq":9223372036854775807,"from":-9223372036854775808,"event":"é","payload":null}"#,
            #"{"op":"magix","room":"r","seq":1,"from":1,"event":"e","payload":"te\"xt\u0001 😀"}"#,
            #"{"op":"magix","room":"r","seq":1,"from":1,"event":"e","payload":[ 1 , {"a" : "\/"} ]}"#,
            #"{"op":"magix","room":"r","seq":1,"from":1,"event":"e","payload":[[[{"k":[]}]],{},-0,1e2]}"#,
            #"{"op":"magix","room":"r","seq":1,"from":1,"event":"e"}"#,
        ]
        var buffer: [UInt8] = []
        for text in texts {
            let bytes = Array(text.utf8)
            let fields = try XCTUnwrap(ServerPush.scanMagix(bytes), text)
            guard case .room(let push) = try ServerPush.decode(JSON.parse(bytes)).get(),
                  case .magix(let from, let event, let payload) = push.body else { return XCTFail(text) }
            for replayed in [false, true] {
                let fast = MagixEvent(room: fields.room, seq: fields.seq, from: fields.from, event: fields.event,
                                      payload: fields.payload, replayed: replayed)
                let decoded = MagixEvent(room: push.room, seq: push.seq, from: from, event: event, payload: payload, replayed: replayed)
                XCTAssertEqual(fast, decoded, text)
                XCTAssertEqual(fast.hashValue, decoded.hashValue, text)
                XCTAssertEqual(fast.payload, payload, text)
                XCTAssertEqual(RoomEvent.magix(fast).logFields, RoomEvent.magix(decoded).logFields, text)
                let fastCall = PluginManager.roomEventCall(.magix(fast), kind: try XCTUnwrap(PluginManager.kind(of: .magix(fast))), room: fast.room, buffer: &buffer)
                let decodedCall = PluginManager.roomEventCall(.magix(decoded), kind: try XCTUnwrap(PluginManager.kind(of: .magix(decoded))), room: decoded.room, buffer: &buffer)
                XCTAssertEqual(try JSON.parse(fastCall.payloadText), try JSON.parse(decodedCall.payloadText), text)
                XCTAssertEqual(fastCall.payload.last, 0)
                if !text.contains("nested") {
                    XCTAssertEqual(fastCall.payloadText, decodedCall.payloadText, text)
                }
            }
        }
        // The bench's push: exactly the text plugins saw before.
        let bench = try XCTUnwrap(ServerPush.scanMagix(Array(texts[0].utf8)))
        let event = RoomEvent.magix(MagixEvent(room: bench.room, seq: bench.seq, from: bench.from, event: bench.event, payload: bench.payload))
        buffer.removeAll()
        event.appendLogFieldsJSON(to: &buffer)
        XCTAssertEqual(String(decoding: buffer, as: UTF8.self),
                       #"{"event":"bench","from":2,"payload":{"t":1000000000000},"room":"room-1","seq":42}"#)
    }

    /// A payload kept as received text is parsed on first read, once, and
    /// the same value is seen from every thread that reads it.
    func testMagixPayload_keptAsText_readsTheSameValueFromEveryThread() throws {
        let text = #"{"op":"magix","room":"r","seq":1,"from":1,"event":"e","payload":{"a":[1,"x",{"b":null}]}}"#
        let fields = try XCTUnwrap(ServerPush.scanMagix(Array(text.utf8)))
        let expected: JSON = ["a": [1, "x", ["b": nil]]]
        for _ in 0..<50 {
            let event = MagixEvent(room: fields.room, seq: fields.seq, from: fields.from, event: fields.event, payload: fields.payload)
            let seen = LockedValue<[JSON]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                let value = event.payload
                seen.withLock { $0.append(value) }
            }
            XCTAssertEqual(seen.withLock { $0 }, Array(repeating: expected, count: 8))
            XCTAssertEqual(event.payload, expected)
        }
    }

    /// `add(count:)` numbers a batch's calls like that many `add`s: each
    /// finishes on its own, in order, and the first add arms the watchdog.
    func testOutstandingCalls_batchAddMatchesSingleAdds() {
        var calls = OutstandingCalls()
        let (first, arm) = calls.add(count: 3, now: 100)
        XCTAssertTrue(arm)
        XCTAssertEqual(calls.add(now: 150).arm, false)
        XCTAssertFalse(calls.finish(first + 1, now: 200), "only the head can finish")
        XCTAssertTrue(calls.finish(first, now: 200))
        XCTAssertTrue(calls.finish(first + 1, now: 210))
        // The third call became the head at 210: it is not overdue at 250 with a 50 ns budget...
        XCTAssertEqual(calls.expire(now: 250, timeout: 50).overdue, 0)
        // ...but is at 260, and then so is the fourth (head since 260, due at 310).
        XCTAssertEqual(calls.expire(now: 260, timeout: 50).overdue, 1)
        XCTAssertFalse(calls.finish(first + 2, now: 261), "already counted as overrun")
        XCTAssertTrue(calls.finish(first + 3, now: 262))
        let (overdue, next) = calls.expire(now: 1000, timeout: 50)
        XCTAssertEqual(overdue, 0)
        XCTAssertNil(next, "nothing left: disarmed")
    }
}
