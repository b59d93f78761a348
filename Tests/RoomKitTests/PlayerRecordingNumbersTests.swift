import RoomKit
import RoomKitProtocol
import XCTest

/// Issue #27 §1 on the client side: a recording's numbers come from a
/// server, so a hostile one must get an error or a bad frame, never a trap
/// (`end - begin + 1` and the player's clock overflowed at Int64's edges).
final class PlayerRecordingNumbersTests: XCTestCase {
    private func slice(_ header: String, _ frames: [String] = []) throws(PlayerError) -> RecordingSlice {
        try RecordingSlice(ndjson: Array(([header] + frames).joined(separator: "\n").utf8))
    }

    func testHeaderNumbersOutsideTheirRanges_areAMalformedRecording() {
        for header in [
            #"{"beginTimestamp":0,"endTimestamp":9223372036854775807}"#,
            #"{"beginTimestamp":-9223372036854775808,"endTimestamp":0}"#,
            #"{"beginTimestamp":5,"endTimestamp":4}"#,
            #"{"beginTimestamp":0,"endTimestamp":10,"sliceEnd":9223372036854775807}"#,
            #"{"beginTimestamp":0,"endTimestamp":10,"sliceStart":-1}"#,
            #"{"beginTimestamp":1e300,"endTimestamp":1e300}"#,
        ] {
            XCTAssertThrowsError(try slice(header), header) { error in
                XCTAssertEqual((error as? PlayerError)?.kind, .malformedRecording, "\(header): \(error)")
            }
        }
    }

    func testAFrameTimeOutsideTheRecording_isABadFrame() throws {
        let parsed = try slice(#"{"beginTimestamp":1000,"endTimestamp":2000}"#, [
            #"{"t":5,"seq":1,"op":"magix","room":"r","from":1,"event":"e","payload":null}"#,
            #"{"t":9223372036854775807,"seq":2,"op":"magix","room":"r","from":1,"event":"e","payload":null}"#,
            #"{"t":-1,"seq":3,"op":"magix","room":"r","from":1,"event":"e","payload":null}"#,
        ])
        XCTAssertEqual(parsed.frames.map(\.t), [5, 5, 5])
        XCTAssertEqual(parsed.frames.map(\.seq), [1, 0, 0])
        XCTAssertEqual(parsed.frames[1].push, .null)
        XCTAssertEqual(parsed.end, 1001)
    }
}
