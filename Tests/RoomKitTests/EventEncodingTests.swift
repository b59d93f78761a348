import RoomKitLoop
import RoomKitProtocol
import XCTest
@testable import RoomKit

/// One encoding per event (issue 29): every encoded observer of one raise
/// shares one `EventEncoding`, which is written only when a sink reads it,
/// and the event log's line and plugins' payload are cut from the same bytes.
final class EventEncodingTests: XCTestCase {
    private let magix = RoomEvent.magix(MagixEvent(room: "lobby", seq: 7, from: 3, event: "chat", payload: ["text": "hi"]))

    func testYield_givesEveryEncodedObserverTheSameEncoding_andWritesItOnlyWhenASinkReadsIt() {
        let broadcaster = EventBroadcaster<RoomEvent>()
        let seen = LockedValue<[EventEncoding]>([])
        let made = LockedValue(0)
        _ = broadcaster.addEncodedObserver { _, encoding in seen.withLock { $0.append(encoding) } }
        _ = broadcaster.addObserver { _ in }
        _ = broadcaster.addEncodedObserver { _, encoding in seen.withLock { $0.append(encoding) } }
        broadcaster.yield(magix) {
            made.withLock { $0 += 1 }
            return .room(magix, replayed: false)
        }
        let encodings = seen.withLock { $0 }
        XCTAssertEqual(made.withLock { $0 }, 1, "one encoding per raise")
        XCTAssertEqual(encodings.count, 2)
        XCTAssertTrue(encodings[0] === encodings[1], "both sinks share it")
        XCTAssertFalse(encodings[0].isWritten, "no sink read it: nothing was serialized")
        _ = encodings[0].logLine(ts: 1)
        XCTAssertTrue(encodings[1].isWritten, "the first reader wrote it for the others")
    }

    /// With one encoded observer the payload is written straight into that
    /// sink's buffer (nothing kept); with two it is kept for the second. The
    /// bytes are the same either way, and so is a second read by the sole sink.
    func testSoleEncodedObserver_writesIntoItsBuffer_sameBytesAsShared() {
        func payloads(observers: Int) -> [[UInt8]] {
            let broadcaster = EventBroadcaster<RoomEvent>()
            let seen = LockedValue<[[UInt8]]>([])
            for _ in 0..<observers {
                _ = broadcaster.addEncodedObserver { _, encoding in
                    var buffer: [UInt8] = Array("prefix".utf8)
                    encoding.appendObject(to: &buffer)
                    encoding.appendObject(to: &buffer)
                    XCTAssertEqual(encoding.isWritten, observers > 1, "kept only when another sink may read it")
                    seen.withLock { $0.append(buffer) }
                }
            }
            broadcaster.yield(magix) { .room(magix, replayed: false) }
            return seen.withLock { $0 }
        }
        let object = #"{"event":"chat","from":3,"payload":{"text":"hi"},"room":"lobby","seq":7}"#
        let expected = Array(("prefix" + object + object).utf8)
        XCTAssertEqual(payloads(observers: 1), [expected])
        XCTAssertEqual(payloads(observers: 2), [expected, expected])
    }

    func testYield_withoutEncodedObservers_makesNoEncoding() {
        let broadcaster = EventBroadcaster<RoomEvent>()
        _ = broadcaster.addObserver { _ in }
        let made = LockedValue(0)
        broadcaster.yield(magix) {
            made.withLock { $0 += 1 }
            return .room(magix, replayed: false)
        }
        XCTAssertEqual(made.withLock { $0 }, 0)
    }

    func testLogLineAndPluginPayload_areCutFromTheSameMembers() throws {
        let encoding = EventEncoding.room(magix, replayed: true)
        let line = String(decoding: encoding.logLine(ts: 1700), as: UTF8.self)
        XCTAssertEqual(line, #"{"ts":1700,"event":"magix","magixEvent":"chat","from":3,"payload":{"text":"hi"},"replayed":true,"room":"lobby","seq":7}"# + "\n")
        var payload: [UInt8] = []
        encoding.appendObject(to: &payload)
        let text = String(decoding: payload, as: UTF8.self)
        XCTAssertEqual(text, #"{"event":"chat","from":3,"payload":{"text":"hi"},"replayed":true,"room":"lobby","seq":7}"#)
        XCTAssertEqual(try JSON.parse(text), .object(RoomEvent.magix(MagixEvent(room: "lobby", seq: 7, from: 3, event: "chat",
                                                                                  payload: ["text": "hi"], replayed: true)).logFields))
    }

    func testOtherEvents_keepSortedKeys_andSayReplayed_inTheLogAndThePayloadAlike() {
        let event = RoomEvent.roomStateChanged(room: "lobby", reason: .logined, errorCode: .success)
        let encoding = EventEncoding.room(event, replayed: true)
        XCTAssertEqual(String(decoding: encoding.logLine(ts: 5), as: UTF8.self),
                       #"{"ts":5,"event":"roomStateChanged","errorCode":0,"reason":"LOGINED","replayed":true,"room":"lobby"}"# + "\n")
        XCTAssertEqual(EventLogFormat.line(ts: 5, name: event.logName, fields: event.logFields.merging(["replayed": true]) { $1 }),
                       encoding.logLine(ts: 5), "the dictionary form writes the same line")
        let player = EventEncoding.player(.sliceChanged("0-1000"))
        XCTAssertEqual(String(decoding: player.logLine(ts: 9), as: UTF8.self), #"{"ts":9,"event":"sliceChanged","slice":"0-1000"}"# + "\n")
    }

    /// The events a login raises are written without a dictionary
    /// (`appendLogMembers`); their bytes must be the dictionary form's, with
    /// and without `replayed`, whatever the room's name needs escaped.
    func testLoginEvents_writtenDirectly_matchTheDictionaryForm() {
        var events: [RoomEvent] = []
        for room in ["lobby", #"a"b\c"#] {
            for reason in RoomReason.allCases {
                events.append(.roomStateChanged(room: room, reason: reason, errorCode: .timedOut))
            }
            for extendedData: [String: JSON] in [["cause": 1_002_033], ["recovered": true], ["cause": 1_002_033, "recovered": false],
                                                 ["recovered": 1], ["cause": "x"], ["other": 1], ["cause": 1, "zeta": true]] {
                events.append(.roomStateChanged(room: room, reason: .reconnectFailed, errorCode: .timedOut, extendedData: extendedData))
            }
            for phase in RoomPhase.allCases { events.append(.phaseChanged(room: room, phase: phase)) }
            events.append(.beingAbleToCommitChange(room: room, writable: true))
            events.append(.beingAbleToCommitChange(room: room, writable: false))
        }
        for event in events {
            for replayed in [false, true] {
                var direct: [UInt8] = []
                event.appendLogMembers(replayed: replayed, to: &direct)
                var fields = event.logFields
                if replayed { fields["replayed"] = true }
                var dictionary: [UInt8] = []
                EventMembers.append(fields, to: &dictionary)
                XCTAssertEqual(String(decoding: direct, as: UTF8.self), String(decoding: dictionary, as: UTF8.self), "\(event)")
            }
        }
    }
}
