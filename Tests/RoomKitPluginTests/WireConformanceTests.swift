import CRoomKitPluginWire
import Foundation
@testable import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// The wire conformance suite (docs/PLUGIN-WIRE.md): the test plays the
/// bot's side over a real socketpair against every child implementation.
/// Each child runs the *conformance plugin*, whose behaviour is fixed:
///
/// - load(config): LOG(1, "loaded " + the config as compact JSON); returns 3
///   when the config has a key "failLoad", else 0.
/// - urlInterrupter(url): a failure when url contains "fail"; else url + "?via=conformance".
/// - room event, kind 8 (magix): CALL dispatch_magix(room, "echo", payload, null);
///   when the magix payload is "fail", the handler fails instead: no CALL, and
///   a child that can report it sends FAILED(seq) before the DONE covering it
///   (the Python SDK: an exception); a C-ABI hook returns nothing and cannot
///   fail, so roomkit-plugin-host sends only the DONE.
/// - room event, other kinds: LOG(1, "room <kind> <room>").
/// - player event: CALL kv_get(room) and wait for its REPLY, then LOG(1, "kv=" + text, or "kv=null").
/// - throwError: LOG(2, "error <domain> <code> <message>").
/// - configChanged: LOG(1, "config <room, or null> " + the config as compact JSON).
/// - exportState: the last imported state, or null; importState(state): 5 when
///   state is "refuse", else keeps it and returns 0.
/// - unload: LOG(1, "unloading").
///
/// Adding a child implementation is one line in `children`.
final class WireConformanceTests: XCTestCase {
    static let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Every child implementation: a name and how to start it (argv) in `directory`.
    static let children: [(name: String, reportsFailures: Bool, command: @Sendable (String) throws -> [String])] = [
        ("roomkit-plugin-host (C ABI)", false, { directory in
            let library = try compilePlugin("conformance", source: conformancePluginC, in: directory)
            return [try builtProduct("roomkit-plugin-host"), library, "roomkit_plugin_entry", "\(getpid())"]
        }),
        ("Python SDK", true, { _ in
            let script = repo + "/sdk/python/tests/conformance_plugin.py"
            guard FileManager.default.fileExists(atPath: script) else { throw XCTSkip("no Python SDK conformance plugin at \(script)") }
            return ["/usr/bin/env", "PYTHONPATH=\(repo)/sdk/python", "python3", script]
        }),
    ]

    /// Runs `body` once per child implementation.
    func forEachChild(versions: String = ROOMKIT_WIRE_VERSIONS_OFFERED, _ body: (String, WireTestChild) throws -> Void) throws {
        var ran = 0
        for child in Self.children {
            let directory = NSTemporaryDirectory() + "wire-conformance-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let command: [String]
            do { command = try child.command(directory) } catch is XCTSkip { continue }
            try body(child.name, try WireTestChild(command, versions: versions))
            ran += 1
        }
        XCTAssertGreaterThan(ran, 0, "no child implementation ran")
    }

    /// HELLO, then LOAD -> LOADED; returns the HELLO's (version, flags, hooks, major, minor, stage, message).
    @discardableResult
    func handshake(_ child: WireTestChild, _ name: String, config: String = #"{"a":1}"#) -> [(Int32, String)] {
        var logs: [(Int32, String)] = []
        guard let hello = child.expect(ROOMKIT_WIRE_HELLO, logs: &logs) else { return logs }
        let fields = hello.parse { ($0.u32(), $0.u32(), $0.u32(), $0.u16(), $0.u16(), $0.i32(), $0.string() ?? "?") }
        XCTAssertEqual(fields.0, ROOMKIT_WIRE_VERSION, name)
        XCTAssertEqual(fields.5, 0, "\(name): stage \(fields.5): \(fields.6)")
        XCTAssertEqual(fields.3, 1, "\(name): contract major")
        let all = ROOMKIT_WIRE_HOOK_URL | ROOMKIT_WIRE_HOOK_THROW_ERROR | ROOMKIT_WIRE_HOOK_ROOM | ROOMKIT_WIRE_HOOK_PLAYER
            | ROOMKIT_WIRE_HOOK_CONFIG_CHANGED | ROOMKIT_WIRE_HOOK_EXPORT_STATE | ROOMKIT_WIRE_HOOK_IMPORT_STATE
        XCTAssertEqual(fields.2 & all, all, "\(name): the conformance plugin implements every hook")
        child.send(BotFrames.load(config))
        guard let loaded = child.expect(ROOMKIT_WIRE_LOADED, logs: &logs) else { return logs }
        XCTAssertEqual(loaded.parse { $0.i32() }, config.contains("failLoad") ? 3 : 0, name)
        return logs
    }

    func testHelloAndLoad_logsTheConfigAndAnswersLoaded() throws {
        try forEachChild { name, child in
            let logs = handshake(child, name)
            XCTAssertTrue(logs.contains { $0 == (1, #"loaded {"a":1}"#) }, "\(name): \(logs)")
        }
    }

    func testLoadFailure_isReportedAsItsResult() throws {
        try forEachChild { name, child in handshake(child, name, config: #"{"failLoad":true}"#) }
    }

    func testEvents_batchedRecordsRunInOrder_hostCallsCarryArguments_doneCoversTheBatch() throws {
        try forEachChild { name, child in
            handshake(child, name)
            let payloads = (1...3).map { #"{"room":"lobby","from":"u\#($0)","event":"chat","payload":"p\#($0)","seq":\#($0)}"# }
            child.send(BotFrames.events(payloads.enumerated().map { (ROOMKIT_WIRE_RECORD_ROOM, UInt64(10 + $0.offset), 8, "lobby", $0.element) }))
            var logs: [(Int32, String)] = []
            for payload in payloads {
                guard let call = child.expect(ROOMKIT_WIRE_CALL, logs: &logs) else { return }
                let (request, function, _, args) = call.parse { r -> (UInt64, Int32, Int32, [String?]) in
                    let request = r.u64(), function = r.i32(), number = r.i32(), n = r.u32()
                    return (request, function, number, (0..<n).map { _ in r.string() })
                }
                XCTAssertEqual(function, Int32(ROOMKIT_WIRE_DISPATCH_MAGIX.rawValue), name)
                XCTAssertEqual(args.count, 4, name)
                XCTAssertEqual(args.first ?? nil, "lobby", name)
                XCTAssertEqual(args.dropFirst().first ?? nil, "echo", name)
                XCTAssertEqual(try JSON.parse(args[2] ?? "null"), try JSON.parse(payload), name)
                XCTAssertNil(args[3], name)
                if request != 0 { child.send(BotFrames.reply(request, result: 0, text: nil)) }
            }
            var done: UInt64 = 0
            while done < 12, let frame = child.expect(ROOMKIT_WIRE_DONE, logs: &logs) { done = frame.parse { $0.u64() } }
            XCTAssertEqual(done, 12, "\(name): DONE names the last record of the batch")
        }
    }

    func testFailedHandler_isReportedAsFailedBeforeItsDone_andTheChildKeepsServing() throws {
        for child in Self.children {
            let directory = NSTemporaryDirectory() + "wire-conformance-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let command: [String]
            do { command = try child.command(directory) } catch is XCTSkip { continue }
            let name = child.name, test = try WireTestChild(command)
            handshake(test, name)
            let magix = { (seq: Int, payload: String) in #"{"room":"lobby","from":"u1","event":"chat","payload":"\#(payload)","seq":\#(seq)}"# }
            test.send(BotFrames.events([(ROOMKIT_WIRE_RECORD_ROOM, 20, 8, "lobby", magix(20, "fail")),
                                        (ROOMKIT_WIRE_RECORD_ROOM, 21, 8, "lobby", magix(21, "ok"))]))
            // Every frame up to the DONE covering both records, in order.
            var seen: [String] = []
            var failed: (seq: UInt64, reason: String)?
            var done: UInt64 = 0
            while done < 21, let frame = test.next(timeout: 10) {
                switch UInt32(frame.type) {
                case ROOMKIT_WIRE_DONE.rawValue:
                    done = frame.parse { $0.u64() }
                    seen.append("DONE \(done)")
                case ROOMKIT_WIRE_FAILED.rawValue:
                    failed = frame.parse { ($0.u64(), $0.string() ?? "") }
                    seen.append("FAILED \(failed?.seq ?? 0)")
                case ROOMKIT_WIRE_CALL.rawValue:
                    let (request, function) = frame.parse { r -> (UInt64, Int32) in
                        let request = r.u64(), function = r.i32()
                        _ = r.i32()
                        _ = (0..<r.u32()).map { _ in r.string() }
                        return (request, function)
                    }
                    XCTAssertEqual(function, Int32(ROOMKIT_WIRE_DISPATCH_MAGIX.rawValue), name)
                    if request != 0 { test.send(BotFrames.reply(request, result: 0, text: nil)) }
                    seen.append("CALL")
                case ROOMKIT_WIRE_LOG.rawValue:
                    continue
                default:
                    XCTFail("\(name): unexpected frame \(frame.type)")
                }
            }
            XCTAssertEqual(done, 21, "\(name): \(seen)")
            if child.reportsFailures {
                XCTAssertEqual(seen.first, "FAILED 20", "\(name): FAILED names the record, before any DONE: \(seen)")
                XCTAssertTrue(failed?.reason.contains("RuntimeError: conformance failure") == true, "\(name): \(failed?.reason ?? "none")")
            } else {
                XCTAssertNil(failed, "\(name): a C hook cannot fail: \(seen)")
            }
            XCTAssertEqual(seen.filter { $0 == "CALL" }.count, 1, "\(name): the next record still runs: \(seen)")
        }
    }

    func testOtherRecords_roomPlayerThrowErrorConfigChanged_andAReplyWithText() throws {
        try forEachChild { name, child in
            handshake(child, name)
            child.send(BotFrames.events([
                (ROOMKIT_WIRE_RECORD_ROOM, 1, 2, "lobby", #"{"room":"lobby","phase":"connected"}"#),
                (ROOMKIT_WIRE_RECORD_PLAYER, 2, 1, "hall", #"{"phase":"playing"}"#),
            ]))
            var logs: [(Int32, String)] = []
            guard let call = child.expect(ROOMKIT_WIRE_CALL, logs: &logs) else { return }
            let (request, function, args) = call.parse { r -> (UInt64, Int32, [String?]) in
                let request = r.u64(), function = r.i32()
                _ = r.i32()
                let n = r.u32()
                return (request, function, (0..<n).map { _ in r.string() })
            }
            XCTAssertNotEqual(request, 0, "\(name): kv_get needs an answer")
            XCTAssertEqual(function, Int32(ROOMKIT_WIRE_KV_GET.rawValue), name)
            XCTAssertEqual(args, ["hall"], name)
            child.send(BotFrames.reply(request, result: 0, text: "v1"))
            child.send(BotFrames.events([
                (ROOMKIT_WIRE_RECORD_THROW_ERROR, 3, 1009003, "dispatch_magix", "read-only session"),
                (ROOMKIT_WIRE_RECORD_CONFIG_CHANGED, 4, 0, nil, #"{"b":2}"#),
                (ROOMKIT_WIRE_RECORD_CONFIG_CHANGED, 5, 0, "lobby", #"{"b":3}"#),
            ]))
            var done: UInt64 = 0
            while done < 5, let frame = child.expect(ROOMKIT_WIRE_DONE, logs: &logs) { done = frame.parse { $0.u64() } }
            let expected: [(Int32, String)] = [(1, "room 2 lobby"), (1, "kv=v1"), (2, "error dispatch_magix 1009003 read-only session"),
                                               (1, #"config null {"b":2}"#), (1, #"config lobby {"b":3}"#)]
            XCTAssertEqual(logs.map { "\($0.0) \($0.1)" }, expected.map { "\($0.0) \($0.1)" }, name)
        }
    }

    func testURL_answeredByRequest_failureIsNonZeroWithNull() throws {
        try forEachChild { name, child in
            handshake(child, name)
            var logs: [(Int32, String)] = []
            child.send(BotFrames.url(7, "https://cdn.example/a.mp4"))
            child.send(BotFrames.url(8, "https://cdn.example/fail.mp4"))
            for (request, expected) in [(UInt64(7), Optional("https://cdn.example/a.mp4?via=conformance")), (8, nil)] {
                guard let answer = child.expect(ROOMKIT_WIRE_ANSWER, logs: &logs) else { return }
                let (id, result, text) = answer.parse { ($0.u64(), $0.i32(), $0.string()) }
                XCTAssertEqual(id, request, name)
                XCTAssertEqual(result == 0, expected != nil, name)
                XCTAssertEqual(text, expected, name)
            }
        }
    }

    func testStateExportImport_andPing() throws {
        try forEachChild { name, child in
            handshake(child, name)
            var logs: [(Int32, String)] = []
            func answer() -> (UInt64, Int32, String?)? {
                child.expect(ROOMKIT_WIRE_ANSWER, logs: &logs).map { $0.parse { ($0.u64(), $0.i32(), $0.string()) } }
            }
            child.send(BotFrames.u64(ROOMKIT_WIRE_EXPORT_STATE, 1))
            XCTAssertEqual(answer().map { "\($0.0) \($0.1) \($0.2 ?? "null")" }, "1 0 null", name)
            child.send(BotFrames.importState(2, #"{"count":12}"#))
            XCTAssertEqual(answer().map { "\($0.0) \($0.1)" }, "2 0", name)
            child.send(BotFrames.u64(ROOMKIT_WIRE_EXPORT_STATE, 3))
            XCTAssertEqual(answer().map { "\($0.0) \($0.1) \($0.2 ?? "null")" }, #"3 0 {"count":12}"#, name)
            child.send(BotFrames.importState(4, "refuse"))
            XCTAssertEqual(answer().map { "\($0.0) \($0.1)" }, "4 5", name)
            child.send(BotFrames.u64(ROOMKIT_WIRE_PING, 99))
            XCTAssertEqual(child.expect(ROOMKIT_WIRE_PONG, logs: &logs)?.parse { $0.u64() }, 99, name)
        }
    }

    func testUnload_runsTheHookSendsUnloadedAndExitsZero() throws {
        try forEachChild { name, child in
            handshake(child, name)
            var logs: [(Int32, String)] = []
            child.send(WireFrame(UInt8(ROOMKIT_WIRE_UNLOAD.rawValue)))
            XCTAssertNotNil(child.expect(ROOMKIT_WIRE_UNLOADED, logs: &logs), name)
            XCTAssertTrue(logs.contains { $0 == (1, "unloading") }, "\(name): \(logs)")
            let exit = child.waitExit()
            XCTAssertEqual(exit?.signal, 0, name)
            XCTAssertEqual(exit?.code, 0, name)
        }
    }

    func testVersionMismatch_helloSaysStage7AndTheChildExits() throws {
        try forEachChild(versions: "99,100") { name, child in
            var logs: [(Int32, String)] = []
            guard let hello = child.expect(ROOMKIT_WIRE_HELLO, logs: &logs) else { return }
            let fields = hello.parse { ($0.u32(), $0.u32(), $0.u32(), $0.u16(), $0.u16(), $0.i32(), $0.string() ?? "") }
            XCTAssertEqual(fields.0, 0, name)
            XCTAssertEqual(fields.5, Int32(ROOMKIT_WIRE_STAGE_VERSION.rawValue), name)
            XCTAssertTrue(fields.6.contains("99"), "\(name): the message names the offered versions: \(fields.6)")
            XCTAssertEqual(child.waitExit()?.code, 0, name)
        }
    }

    func testBadFrames_theChildExitsWith71() throws {
        let bad: [(String, [UInt8])] = [
            ("zero length", [0, 0, 0, 0, 2]),
            ("over the maximum", [0xff, 0xff, 0xff, 0x7f, 2]),
            ("unknown type", WireFrame(200).finished),
            ("short EVENTS body", { var f = WireFrame(UInt8(ROOMKIT_WIRE_EVENTS.rawValue)); f.u32(2); f.u8(1); return f.finished }()),
            ("trailing bytes in PING", { var f = BotFrames.u64(ROOMKIT_WIRE_PING, 1); f.u8(9); return f.finished }()),
        ]
        for (what, bytes) in bad {
            try forEachChild { name, child in
                handshake(child, name)
                child.sendBytes(bytes)
                let exit = child.waitExit()
                XCTAssertEqual(exit?.code, 71, "\(name), \(what): \(child.output())")
            }
        }
    }

    func testEndOfFile_theChildExits() throws {
        try forEachChild { name, child in
            handshake(child, name)
            shutdown(child.socket, Int32(SHUT_RDWR))
            let exit = child.waitExit()
            XCTAssertNotNil(exit, "\(name) must exit at end-of-file on fd 3")
            XCTAssertEqual(exit?.signal, 0, name)
        }
    }
}
