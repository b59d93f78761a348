import Foundation
import RoomKitProtocol
@testable import RoomKitServer
import RoomKitSQLite
import RoomKitTestSupport
import XCTest

/// Issue 27 §3: a recording download is streamed from the store in bounded
/// chunks off roomd's loop, paced to its reader (never dropped for being
/// slow, never holding the whole body), at most `--max-recording-downloads`
/// at once (503 past it), and each download is whole.
///
/// The room's size is `ROOMKIT_TEST_RECORDING_MB` (default 8; the issue's
/// check used 30).
final class RecordingStreamTests: ServerTestCase {
    private let reader = makeToken(user: "viewer", room: "big", role: .reader)
    private var roomMegabytes: Int {
        ProcessInfo.processInfo.environment["ROOMKIT_TEST_RECORDING_MB"].flatMap(Int.init) ?? 8
    }
    /// Concurrent downloads (`ROOMKIT_TEST_RECORDING_DOWNLOADS`, default 4).
    private var concurrentDownloads: Int {
        ProcessInfo.processInfo.environment["ROOMKIT_TEST_RECORDING_DOWNLOADS"].flatMap(Int.init) ?? 4
    }

    /// Fills room `big` with ~`roomMegabytes` MB of 100 KB magix events;
    /// returns the event count and a `to` that covers them all.
    private func fillRoom(_ child: RoomdProcess) throws -> (events: Int, to: Int64) {
        let side = try makeClientSide()
        let writer = try side.connect(port: child.port)
        XCTAssertEqual(try writer.login("big", token: makeToken(user: "w"), user: "w")["ok"], true)
        let events = roomMegabytes * 10
        for index in 0..<events {
            let filler = String(repeating: String(UnicodeScalar(UInt8(97 + index % 26))), count: 100_000)
            try writer.ok("magix", room: "big", ["event": "blob", "payload": ["i": .int(Int64(index)), "fill": .string(filler)]])
        }
        return (events, nowMilliseconds() + 1)
    }

    private func recordingPath(to: Int64) -> String { "/v1/rooms/big/recording?to=\(to)" }

    private func download(_ child: RoomdProcess, to: Int64) throws -> HTTPReply {
        try XCTUnwrap(fetchWhole(port: child.port, path: recordingPath(to: to), token: reader), "no HTTP answer")
    }

    /// One gauge or counter from roomd's `/metrics`.
    private func metric(_ child: RoomdProcess, _ name: String) throws -> Double? {
        let text = try httpRequest(port: child.port, method: "GET", path: "/metrics").text
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last ?? "")
        }
        return nil
    }

    /// The body built in one piece from the store (no streaming, no loop):
    /// what every streamed download must equal, byte for byte.
    private func reference(_ child: RoomdProcess, body: [UInt8]) throws -> [UInt8] {
        let header = try XCTUnwrap(try? JSON.parse(Array(body.prefix { $0 != 10 })))
        let begin = try XCTUnwrap(header.int("beginTimestamp")), end = try XCTUnwrap(header.int("endTimestamp"))
        let db = try SQLiteDatabase(path: (child.dataDirectory as NSString).appendingPathComponent("rooms.sqlite"))
        defer { db.close() }
        let request = RecordingRequest(room: "big", begin: begin, end: end, sliceStart: 0, sliceEnd: end - begin + 1,
                                       sliceFrom: begin, sliceTo: end, wantsSnapshot: true, throughSeq: Int64.max)
        return try RecordingWriter(request: request, reads: EventReads(db: db)).body()
    }

    func testDownloads_concurrent_eachWholeAndByteIdenticalToTheReference_whileOthersRoundTrip() throws {
        let child = try startRoomd(dataDirectory: try temporaryDirectory(), extra: ["--max-recording-downloads", "\(concurrentDownloads)"])
        let (events, to) = try fillRoom(child)
        let side = try makeClientSide()
        let other = try side.connect(port: child.port)
        XCTAssertEqual(try other.login("elsewhere", token: makeToken(user: "o"), user: "o")["ok"], true)

        let replies = LockedBox<[Int: HTTPReply]>([:])
        let finished = DispatchGroup()
        let (port, path, token) = (child.port, recordingPath(to: to), reader)
        for index in 0..<concurrentDownloads {
            finished.enter()
            Thread.detachNewThread {
                defer { finished.leave() }
                if let reply = fetchWhole(port: port, path: path, token: token) {
                    replies.update { $0[index] = reply }
                }
            }
        }
        // Round trips of another client while the downloads run.
        var slowest: TimeInterval = 0
        var trips = 0
        repeat {
            let start = Date()
            try other.ok("setExtraInfo", room: "elsewhere", ["key": "k", "value": .string("\(trips)")])
            slowest = max(slowest, Date().timeIntervalSince(start))
            trips += 1
        } while finished.wait(timeout: .now() + .milliseconds(20)) == .timedOut
        print("RecordingStreamTests: \(trips) round trips during \(concurrentDownloads) downloads of \(roomMegabytes) MB, slowest \(Int(slowest * 1000)) ms")
        XCTAssertLessThan(slowest, 2, "a failure guard only: the loop must not stall behind downloads")

        let all = replies.value
        XCTAssertEqual(all.count, concurrentDownloads, "every download answered")
        let expected = try reference(child, body: try XCTUnwrap(all[0]).body)
        XCTAssertGreaterThan(expected.count, roomMegabytes * 1_000_000)
        for (index, reply) in all.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(reply.status, 200, "download \(index)")
            XCTAssertEqual(reply.headers["content-length"], "\(expected.count)", "download \(index) announces its length")
            XCTAssertEqual(reply.body.count, expected.count, "download \(index) is whole")
            XCTAssertTrue(reply.body == expected, "download \(index) is byte-identical to the reference")
            XCTAssertEqual(reply.lines.count, events + 2, "download \(index): the header, the writer's login and every event")
        }
        XCTAssertEqual(try metric(child, "roomd_recording_downloads"), 0, "every slot is free again")
    }

    func testDownload_slowReader_isPacedNotBuffered_andThe503PastTheLimit() throws {
        let window = 65536
        let child = try startRoomd(dataDirectory: try temporaryDirectory(),
                                   extra: ["--max-recording-downloads", "1", "--recording-buffer-bytes", "\(window)"])
        let (_, to) = try fillRoom(child)
        let expected = try download(child, to: to).body

        // A client that reads a little, then stops reading.
        let slow = try XCTUnwrap(SlowReader(port: child.port, request: "GET \(recordingPath(to: to)) HTTP/1.1\r\n"
            + "Host: 127.0.0.1\r\nAuthorization: Bearer \(reader)\r\nConnection: close\r\n\r\n"))
        defer { slow.close() }
        var received = try slow.read(atLeast: 4096)
        // Let roomd fill every buffer it may: the socket's, then its own.
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(try metric(child, "roomd_recording_downloads"), 1, "the download is paused, not finished")
        let peak = try XCTUnwrap(try metric(child, "roomd_recording_buffered_bytes_peak"))
        // The window, plus one chunk (64 KiB, or one 100 KB event more).
        XCTAssertGreaterThan(peak, 0)
        XCTAssertLessThanOrEqual(peak, Double(window + 64 * 1024 + 110_000),
                                 "roomd holds a window and a chunk, not the \(expected.count) bytes")

        // The slot is taken: one more download is refused with the documented error.
        let refused = try download(child, to: to)
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.json?.int("code"), 1_009_004, refused.text)
        XCTAssertTrue(refused.json?.string("message")?.contains("--max-recording-downloads") == true, refused.text)
        XCTAssertEqual(try metric(child, "roomd_recording_downloads_refused_total"), 1)

        // The slow reader is never dropped: it gets the whole body at its own pace.
        received += try slow.readToEnd()
        let reply = try XCTUnwrap(parseHTTPReply(received))
        XCTAssertEqual(reply.status, 200)
        let differs = zip(reply.body, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        XCTAssertNil(differs, "the slow download is whole and right (\(reply.body.count) of \(expected.count) bytes); "
            + "first difference at \(differs ?? -1): \(String(decoding: reply.body.dropFirst(max(0, (differs ?? 0) - 100)).prefix(200), as: UTF8.self))"
            + " vs \(String(decoding: expected.dropFirst(max(0, (differs ?? 0) - 100)).prefix(200), as: UTF8.self))")
        XCTAssertEqual(try download(child, to: to).status, 200, "the slot is free again")
    }
}

/// GET `path` over a fresh connection and read to EOF (roomd closes after a
/// recording), parsing once at the end: `httpRequest` re-parses after every
/// read, which is quadratic on a 30 MB body. A test-side probe only.
private func fetchWhole(port: Int, path: String, token: String) -> HTTPReply? {
    guard let fd = connectLoopback(port: port, receiveTimeout: 30) else { return nil }
    defer { close(fd) }
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nConnection: close\r\n\r\n".utf8)
    guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        response.append(contentsOf: buffer[0..<n])
    }
    return parseHTTPReply(response)
}

/// A raw TCP client with a small receive buffer that reads only when told.
private final class SlowReader {
    private let fd: Int32

    init?(port: Int, request: String) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var size: Int32 = 16384
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var tv = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var address = loopbackAddress(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else { return nil }
    }

    func read(atLeast count: Int) throws -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while result.count < count {
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else { throw TestTimeout(description: "the download ended after \(result.count) bytes") }
            result.append(contentsOf: buffer[0..<n])
        }
        return result
    }

    func readToEnd() throws -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 { return result }
            guard n > 0 else { throw TestTimeout(description: "recv failed after \(result.count) bytes: errno \(errno)") }
            result.append(contentsOf: buffer[0..<n])
        }
    }

    func close() { Glibc.close(fd) }
}

/// A value shared between test threads, behind a lock.
final class LockedBox<Value>: @unchecked Sendable {
    // @unchecked Sendable: `stored` is only touched under `lock`.
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.withLock { stored } }
    func update(_ body: (inout Value) -> Void) { lock.withLock { body(&stored) } }
}
