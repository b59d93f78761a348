import Foundation
import RoomKitLoop
import RoomKitProtocol
import XCTest

/// A wait that ran out of time; the test has already recorded the failure.
struct TestTimeout: Error, CustomStringConvertible {
    let description: String
}

/// A bare `room.v1` client for protocol tests: one WebSocket connection, the
/// messages it received (parsed), and helpers that block the test thread
/// while the loop runs. Deliberately not the project's client engine: it
/// sends exactly what a test tells it to.
final class RawClient: WebSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: every mutable field is touched on the loop thread
    // only; the test thread reaches them through `loop.runAndWait`.

    let loop: EventLoop
    let name: String
    private var connection: WebSocketConnection?
    private var opened = false
    private var closeEvent: WebSocketCloseEvent?
    /// Every message received, in order. Loop thread only.
    private var received: [JSON] = []
    /// Received messages no wait has taken yet. Loop thread only.
    private var unread: [JSON] = []
    private var nextID: Int64 = 1
    private var pinger: LoopTimer?
    /// Batched messages (PROTOCOL.md "Batched messages"): set by
    /// `helloBatched`; once its reply confirms, every later message is split
    /// at line feeds. Loop thread only.
    private var asksForBatches = false
    private var splitsBatches = false
    /// Every WebSocket message as received, bytes as they came. Loop thread only.
    private var rawMessages: [[UInt8]] = []

    private init(loop: EventLoop, name: String) {
        self.loop = loop
        self.name = name
    }

    /// Opens a connection to `port` offering `subprotocol`; waits until it is
    /// open. Throws (after failing the test) when it does not open.
    static func connect(loop: EventLoop, client: WebSocketClient, port: Int, name: String,
                        file: StaticString = #filePath, line: UInt = #line) throws -> RawClient {
        let raw = RawClient(loop: loop, name: name)
        let url = try WebSocketURL("ws://127.0.0.1:\(port)/v1/rooms")
        try loop.runAndWait {
            raw.connection = client.connect(to: url, subprotocol: "room.v1", delegate: raw)
        }
        let opened = try raw.poll("\(name) to open", timeout: 5, file: file, line: line) { () -> Bool? in
            if raw.opened { return true }
            if raw.closeEvent != nil { return false }
            return nil
        }
        guard opened else {
            let event = try loop.runAndWait { raw.closeEvent }
            XCTFail("\(name) did not connect: \(String(describing: event))", file: file, line: line)
            throw TestTimeout(description: "\(name) did not connect")
        }
        return raw
    }

    // MARK: WebSocketDelegate (loop thread)

    func webSocketDidOpen(_ connection: WebSocketConnection) {
        opened = true
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        rawMessages.append(message.bytes)
        guard splitsBatches else {
            let json = Self.parse(message.bytes[...])
            received.append(json)
            unread.append(json)
            if asksForBatches, json.op == "reply", json["connection"] != nil, json["batch"] == true {
                splitsBatches = true
            }
            return
        }
        MessageBatch.forEachMessage(in: message.bytes) { element in
            let json = Self.parse(element)
            received.append(json)
            unread.append(json)
        }
    }

    /// The server must only send JSON; anything else shows up as op
    /// "non-json" and fails every `expectNothing`.
    private static func parse(_ bytes: ArraySlice<UInt8>) -> JSON {
        (try? JSON.parse(bytes)) ?? ["op": "non-json", "text": .string(String(decoding: bytes, as: UTF8.self))]
    }

    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {
        closeEvent = event
        pinger?.cancel()
        pinger = nil
    }

    // MARK: Waiting

    /// Evaluates `body` on the loop every 2 ms until it returns non-nil;
    /// fails the test and throws when `timeout` passes first.
    func poll<T>(_ what: @autoclosure () -> String, timeout: TimeInterval, file: StaticString = #filePath,
                 line: UInt = #line, _ body: @escaping () -> T?) throws -> T {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let value = try loop.runAndWait(body) { return value }
            if Date() >= deadline { break }
            usleep(2_000)
        }
        let description = "waited \(timeout) s for \(what())"
        let seen = (try? loop.runAndWait { self.unread.map(\.description) }) ?? []
        XCTFail("\(name): \(description); unread: \(seen.suffix(8))", file: file, line: line)
        throw TestTimeout(description: description)
    }

    // MARK: Sending

    /// Sends one JSON object as a text frame.
    func send(_ json: JSON) throws {
        try sendText(json.jsonString)
    }

    /// Sends `text` as a text frame, as is.
    func sendText(_ text: String) throws {
        try loop.runAndWait { _ = self.connection?.send(text: text) }
    }

    /// Sends a request (a fresh `id` is added) without waiting; returns the id.
    @discardableResult
    func sendRequest(_ op: String, room: String? = nil, _ fields: [String: JSON] = [:]) throws -> Int64 {
        let id = try loop.runAndWait { () -> Int64 in
            defer { self.nextID += 1 }
            return self.nextID
        }
        var message = fields
        message["op"] = .string(op)
        message["id"] = .int(id)
        if let room { message["room"] = .string(room) }
        try send(.object(message))
        return id
    }

    /// Waits for the reply to request `id` and takes it.
    func reply(to id: Int64, timeout: TimeInterval = 5, file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        try poll("the reply to request \(id)", timeout: timeout, file: file, line: line) {
            self.take { $0.op == "reply" && $0.int("id") == id }
        }
    }

    /// Sends a request and returns its reply (ok or not).
    func request(_ op: String, room: String? = nil, _ fields: [String: JSON] = [:],
                 file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        let id = try sendRequest(op, room: room, fields)
        return try reply(to: id, file: file, line: line)
    }

    /// Sends a request whose reply must be `ok:true`; returns the reply.
    @discardableResult
    func ok(_ op: String, room: String? = nil, _ fields: [String: JSON] = [:],
            file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        let reply = try request(op, room: room, fields, file: file, line: line)
        guard reply["ok"] == true else {
            XCTFail("\(name): \(op) failed: \(reply)", file: file, line: line)
            throw TestTimeout(description: "\(op) failed")
        }
        return reply
    }

    /// Sends a request that must fail; returns the reply's code.
    func failure(_ op: String, room: String? = nil, _ fields: [String: JSON] = [:],
                 file: StaticString = #filePath, line: UInt = #line) throws -> Int? {
        let reply = try request(op, room: room, fields, file: file, line: line)
        XCTAssertEqual(reply["ok"], false, "\(op) should fail: \(reply)", file: file, line: line)
        XCTAssertNotNil(reply.string("message"), "an error reply carries a message", file: file, line: line)
        return reply.code
    }

    /// `hello`; returns the reply.
    @discardableResult
    func hello(file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        try ok("hello", ["client": "roomkit-tests/1"], file: file, line: line)
    }

    /// `hello` asking for batched messages (`"batch":true`); returns the
    /// reply. Once it confirms, later messages are split into their elements.
    @discardableResult
    func helloBatched(file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        try loop.runAndWait { self.asksForBatches = true }
        return try ok("hello", ["client": "roomkit-tests/1", "batch": true], file: file, line: line)
    }

    /// Splits messages into batches after a hello reply that confirms them,
    /// for a test that sends its own `hello` with `"batch":true`.
    func expectBatches() throws {
        try loop.runAndWait { self.asksForBatches = true }
    }

    /// Every WebSocket message received so far, as its bytes.
    func webSocketMessages() throws -> [[UInt8]] {
        try loop.runAndWait { self.rawMessages }
    }

    /// Sends each text as its own text frame, all queued in one loop task
    /// (a burst the server reads together).
    func sendBurst(_ texts: [String]) throws {
        try loop.runAndWait {
            for text in texts { _ = self.connection?.send(text: text) }
        }
    }

    /// Reserves `count` consecutive request ids; returns the first.
    func reserveIDs(_ count: Int) throws -> Int64 {
        try loop.runAndWait { () -> Int64 in
            defer { self.nextID += Int64(count) }
            return self.nextID
        }
    }

    /// The fields of a `login` request.
    static func loginFields(token: String, user: String, name: String? = nil, payload: JSON? = nil,
                            writable: Bool? = nil, resume: (session: String, seq: Int64)? = nil) -> [String: JSON] {
        var userObject: [String: JSON] = ["id": .string(user)]
        if let name { userObject["name"] = .string(name) }
        if let payload { userObject["payload"] = payload }
        var fields: [String: JSON] = ["token": .string(token), "user": .object(userObject)]
        if let writable { fields["writable"] = .bool(writable) }
        if let resume { fields["resume"] = ["session": .string(resume.session), "seq": .int(resume.seq)] }
        return fields
    }

    /// Sends `login` and returns the reply (ok or not).
    func login(_ room: String, token: String, user: String, name: String? = nil, payload: JSON? = nil,
               writable: Bool? = nil, resume: (session: String, seq: Int64)? = nil,
               file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        try request("login", room: room, Self.loginFields(token: token, user: user, name: name, payload: payload,
                                                          writable: writable, resume: resume),
                    file: file, line: line)
    }

    /// Waits for the first unread message with `op` (and `room`, and
    /// matching `predicate`) and takes it.
    @discardableResult
    func waitFor(_ op: String, room: String? = nil, timeout: TimeInterval = 5, file: StaticString = #filePath,
                 line: UInt = #line, where predicate: @escaping (JSON) -> Bool = { _ in true }) throws -> JSON {
        try poll("a \(op) push\(room.map { " in \($0)" } ?? "")", timeout: timeout, file: file, line: line) {
            self.take { $0.op == op && (room == nil || $0.string("room") == room) && predicate($0) }
        }
    }

    /// Waits until `count` room pushes (messages with a `seq`, not replies)
    /// are unread, then takes them, in the order they arrived.
    func waitForPushes(_ count: Int, room: String, timeout: TimeInterval = 5, file: StaticString = #filePath,
                       line: UInt = #line) throws -> [JSON] {
        try poll("\(count) pushes in \(room)", timeout: timeout, file: file, line: line) { () -> [JSON]? in
            let isPush = { (json: JSON) in json.op != "reply" && json.int("seq") != nil && json.string("room") == room }
            guard self.unread.filter(isPush).count >= count else { return nil }
            var taken: [JSON] = []
            while taken.count < count, let index = self.unread.firstIndex(where: isPush) {
                taken.append(self.unread.remove(at: index))
            }
            return taken
        }
    }

    /// Waits `duration`, then asserts nothing but `pong` is unread (or, with
    /// `op`, nothing with that op). Returns what it found.
    @discardableResult
    func expectNothing(_ op: String? = nil, for duration: TimeInterval, file: StaticString = #filePath,
                       line: UInt = #line) throws -> [JSON] {
        Thread.sleep(forTimeInterval: duration)
        let found = try loop.runAndWait {
            self.unread.filter { $0.op != "pong" && (op == nil || $0.op == op) }
        }
        XCTAssertEqual(found, [], "\(name) received unexpected messages", file: file, line: line)
        return found
    }

    /// Unread messages other than `pong`, taken.
    func drain() throws -> [JSON] {
        try loop.runAndWait {
            let all = self.unread.filter { $0.op != "pong" }
            self.unread.removeAll()
            return all
        }
    }

    /// Every message received so far, in order.
    func history() throws -> [JSON] {
        try loop.runAndWait { self.received }
    }

    /// Waits for the connection to close; returns the close code (1006 when
    /// it dropped without a close frame).
    func waitForClose(timeout: TimeInterval = 5, file: StaticString = #filePath, line: UInt = #line) throws -> UInt16 {
        try poll("the connection to close", timeout: timeout, file: file, line: line) { self.closeEvent?.code }
    }

    /// Whether the connection is still open.
    func isOpen() throws -> Bool {
        try loop.runAndWait { self.closeEvent == nil && self.opened }
    }

    // MARK: Connection control

    /// Sends `ping` every `interval` until the connection closes or `stopPinging`.
    func startPinging(every interval: Duration) throws {
        try loop.runAndWait {
            self.pinger?.cancel()
            self.pinger = try self.loop.scheduleTimer(after: interval, repeating: interval) { [weak self] _ in
                guard let self, let connection = self.connection else { return }
                connection.send(text: #"{"op":"ping","t":1}"#)
            }
        }
    }

    func stopPinging() throws {
        try loop.runAndWait {
            self.pinger?.cancel()
            self.pinger = nil
        }
    }

    /// Closes with a close handshake.
    func close(code: UInt16 = 1000) throws {
        try stopPinging()
        try loop.runAndWait { self.connection?.close(code: code, reason: "test") }
    }

    /// Drops the TCP connection without a close frame (a network blip).
    func abort() throws {
        try stopPinging()
        try loop.runAndWait { self.connection?.abort() }
        _ = try waitForClose()
    }

    /// Removes and returns the first unread message matching `predicate`. Loop thread only.
    private func take(_ predicate: (JSON) -> Bool) -> JSON? {
        guard let index = unread.firstIndex(where: predicate) else { return nil }
        return unread.remove(at: index)
    }
}

/// Short accessors for test assertions.
extension JSON {
    var op: String? { self["op"]?.stringValue }
    var code: Int? { self["code"]?.intValue }
    func int(_ key: String) -> Int64? { self[key]?.int64Value }
    func string(_ key: String) -> String? { self[key]?.stringValue }
    func array(_ key: String) -> [JSON] { self[key]?.arrayValue ?? [] }
    func object(_ key: String) -> [String: JSON]? { self[key]?.objectValue }
}
