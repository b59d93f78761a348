import Foundation
import RoomKitProtocol
import XCTest

/// Issue 27 §3: the recovery buffer is bounded by bytes per room and in
/// total (it was 1,000 events whatever their size, up to ~1 GiB a room), a
/// resume whose events were evicted from memory is still recovered whole
/// from the store, and a restart reloads only what the bounds hold.
final class RecoveryBytesTests: ServerTestCase {
    private let perRoom = 300_000
    private let total = 400_000
    private let eventBytes = 50_000

    private func metric(_ child: RoomdProcess, _ name: String) throws -> Double? {
        let text = try httpRequest(port: child.port, method: "GET", path: "/metrics").text
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last ?? "")
        }
        return nil
    }

    private func startBounded(_ data: String) throws -> RoomdProcess {
        try startRoomd(dataDirectory: data, extra: ["--recovery-bytes-per-room", "\(perRoom)",
                                                    "--recovery-bytes-total", "\(total)"])
    }

    /// `count` magix events of ~`eventBytes` each; returns their seqs.
    private func flood(_ client: RawClient, room: String, count: Int, tag: String) throws -> [Int64] {
        try (0..<count).map { index in
            let reply = try client.ok("magix", room: room, [
                "event": "blob", "payload": ["i": .int(Int64(index)), "tag": .string(tag),
                                             "fill": .string(String(repeating: "x", count: eventBytes))],
            ])
            return try XCTUnwrap(reply.int("seq"))
        }
    }

    func testRecoveryBytes_boundedPerRoomAndInTotal_evictedEventsAreRecoveredFromTheStore_alsoAfterARestart() throws {
        let data = try temporaryDirectory()
        var child = try startBounded(data)
        let side = try makeClientSide()
        let writer = try side.connect(port: child.port)
        XCTAssertEqual(try writer.login("r1", token: makeToken(user: "w"), user: "w")["ok"], true)
        XCTAssertEqual(try writer.login("r2", token: makeToken(user: "w"), user: "w")["ok"], true)
        let away = try side.connect(port: child.port)
        let login = try away.login("r1", token: makeToken(user: "u1"), user: "u1")
        let session = try XCTUnwrap(login.string("session"))
        let resumeFrom = try XCTUnwrap(login.int("seq"))
        try away.close()
        _ = try away.waitForClose()

        // 30 events of 50 KB in r1 (1.5 MB), then as much in r2.
        let seqs = try flood(writer, room: "r1", count: 30, tag: "r1")
        var held = try XCTUnwrap(try metric(child, "roomd_recovery_bytes"))
        XCTAssertGreaterThan(held, Double(eventBytes))
        XCTAssertLessThanOrEqual(held, Double(perRoom), "one room holds at most --recovery-bytes-per-room")
        _ = try flood(writer, room: "r2", count: 30, tag: "r2")
        held = try XCTUnwrap(try metric(child, "roomd_recovery_bytes"))
        XCTAssertLessThanOrEqual(held, Double(total), "all rooms hold at most --recovery-bytes-total")

        // A resume from before the flood: most of its events left memory, none is lost.
        func assertResumeRecoversEverything(_ label: String) throws {
            let back = try side.connect(port: child.port)
            let resumed = try back.login("r1", token: makeToken(user: "u1"), user: "u1", resume: (session, resumeFrom))
            XCTAssertEqual(resumed["ok"], true, label)
            XCTAssertEqual(resumed["recovered"], true, "\(label): still within the last 1,000 events")
            let pushes = try back.waitForPushes(seqs.count, room: "r1")
            XCTAssertEqual(pushes.map { $0.int("seq") }, seqs, "\(label): every event, in order")
            XCTAssertEqual(pushes.map { $0["payload"]?["i"]?.int64Value }, (0..<30).map { Int64($0) }, label)
            XCTAssertTrue(pushes.allSatisfy { $0["payload"]?["fill"]?.stringValue?.utf8.count == eventBytes }, label)
            try back.close()
            _ = try back.waitForClose()
        }
        try assertResumeRecoversEverything("running")

        // A restart reloads only what the bounds hold, and the resume still recovers everything.
        try writer.close()
        XCTAssertEqual(child.stop(), 0)
        child = try startBounded(data)
        held = try XCTUnwrap(try metric(child, "roomd_recovery_bytes"))
        XCTAssertGreaterThan(held, 0)
        XCTAssertLessThanOrEqual(held, Double(total), "a restart reads no more pushes than the bounds hold")
        try assertResumeRecoversEverything("after a restart")
    }
}
