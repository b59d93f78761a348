import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import XCTest

/// The recording endpoint's slice extension (docs/PROTOCOL.md "Recording
/// slices") that the player loads through.
final class PlayerRecordingSliceTests: XCTestCase {
    private var harness: PlayerHarness!

    override func tearDown() async throws {
        try await harness?.close()
        harness = nil
    }

    private func get(_ room: String, _ query: String) async throws(HTTPClientError) -> RecordingSlice {
        let loop = harness.clientLoop
        let client: HTTPClient
        do {
            client = try loop.runAndWait { try HTTPClient.shared(on: loop) }
        } catch {
            throw HTTPClientError(.shutdown, "\(error)")
        }
        let url = try HTTPURL("http://127.0.0.1:\(harness.port)/v1/rooms/\(room)/recording?\(query)")
        let response = try await client.get(url, headers: [("Authorization", "Bearer \(harness.token("viewer"))")])
        do {
            return try RecordingSlice(ndjson: response.body)
        } catch {
            throw HTTPClientError(.aborted, "not a recording: \(error)")
        }
    }

    func testSlice_narrowsTheFrames_movesTheSnapshotToItsStart_andKeepsTheRecordingTotals() async throws {
        // A stored snapshot every two events: a slice starts from the nearest one.
        harness = try PlayerHarness { $0.snapshotEvery = 2 }
        let (from, to) = try await Lesson.record(harness, room: "sliced", gap: .milliseconds(30), steps: 8)
        let window = "from=\(from)&to=\(to)"
        let full = try await get("sliced", window)
        XCTAssertEqual(full.frames.count, 8)
        XCTAssertEqual(full.framesCount, 8)
        XCTAssertEqual([full.start, full.end], [0, to - from + 1], "without slice parameters: the whole window")
        XCTAssertEqual(full.snapshot?.members, [], "the room before the lesson")

        let fifth = full.frames[4]
        let slice = try await get("sliced", "\(window)&sliceStart=\(fifth.t)&sliceEnd=\(full.frames[6].t)")
        XCTAssertEqual(slice.framesCount, 8, "framesCount stays the whole recording's")
        XCTAssertEqual([slice.beginTimestamp, slice.endTimestamp], [from, to])
        XCTAssertEqual([slice.start, slice.end], [fifth.t, full.frames[6].t])
        XCTAssertEqual(slice.frames, Array(full.frames[4...5]), "frames in [sliceStart, sliceEnd), t still from `from`")
        let snapshot = try XCTUnwrap(slice.snapshot)
        XCTAssertEqual(snapshot.state.globalState, ["topic": "fractions", "step": 1], "the state just before the slice")
        XCTAssertEqual(snapshot.members.map(\.userId), ["u1", "u2"])
        XCTAssertEqual(snapshot.state.sceneState.scenes.map(\.name), ["init"], "putScenes (frame 5) is not in it yet")

        let bare = try await get("sliced", "\(window)&sliceStart=\(fifth.t)&sliceEnd=\(full.frames[6].t)&snapshot=0")
        XCTAssertNil(bare.snapshot, "snapshot=0 leaves it out")
        XCTAssertEqual(bare.frames, slice.frames)

        let past = try await get("sliced", "\(window)&sliceStart=\(to - from + 5000)&sliceEnd=\(to - from + 6000)")
        XCTAssertEqual([past.start, past.end], [to - from, to - from + 1], "a slice past the end starts at the end")
        XCTAssertEqual(past.snapshot?.state.sceneState.scenePath, "/p2", "the state at the end")
    }

    func testSlice_withBadBounds_is400() async throws {
        harness = try PlayerHarness()
        _ = try await harness.member("u1", room: "bounds")
        for query in ["sliceStart=-1", "sliceStart=20&sliceEnd=10", "sliceEnd=x"] {
            do {
                _ = try await get("bounds", query)
                XCTFail("\(query) must be refused")
            } catch {
                XCTAssertEqual(error.status, 400, query)
            }
        }
    }
}
