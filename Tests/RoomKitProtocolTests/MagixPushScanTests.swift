import RoomKitTestSupport
import XCTest

@testable import RoomKitProtocol

/// `ServerPush.scanMagix`, the client's byte-level read of magix pushes: it
/// must agree with the full path (`JSON.parse`, then `ServerPush.decode`)
/// whenever it answers, and decline (nil) whatever that path rejects, so
/// bad input keeps the full decoder's error codes.
final class MagixPushScanTests: XCTestCase {
    /// What the full path makes of `bytes`: the magix fields, or its error code.
    private func full(_ bytes: [UInt8]) -> Result<(room: String, seq: Int64, from: Int64, event: String, payload: JSON), ProtocolError> {
        let json: JSON
        do {
            json = try JSON.parse(bytes)
        } catch {
            return .failure(ProtocolError(code: .malformed, message: "\(error)"))
        }
        switch ServerPush.decode(json) {
        case .failure(let error):
            return .failure(error)
        case .success(.room(let push)):
            guard case .magix(let from, let event, let payload) = push.body else {
                return .failure(ProtocolError(code: .unknownOp, message: "not magix: \(push)"))
            }
            return .success((push.room, push.seq, from, event, payload))
        case .success(let other):
            return .failure(ProtocolError(code: .unknownOp, message: "not magix: \(other)"))
        }
    }

    /// The differential check: if the scanner answers, the full path agrees
    /// field for field; a canonical payload text serializes to itself.
    @discardableResult
    private func assertAgrees(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> MagixPushFields? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let fast = ServerPush.scanMagix(bytes) else { return nil }
        switch full(bytes) {
        case .failure(let error):
            XCTFail("scanned, but the full path fails with \(error.code): \(text)", file: file, line: line)
        case .success(let expected):
            XCTAssertEqual(fast.room, expected.room, text, file: file, line: line)
            XCTAssertEqual(fast.seq, expected.seq, text, file: file, line: line)
            XCTAssertEqual(fast.from, expected.from, text, file: file, line: line)
            XCTAssertEqual(fast.event, expected.event, text, file: file, line: line)
            XCTAssertEqual(fast.payload.value, expected.payload, text, file: file, line: line)
            var written: [UInt8] = []
            fast.payload.serialize(into: &written)
            XCTAssertEqual(try? JSON.parse(written), expected.payload, "written payload of \(text)", file: file, line: line)
            if case .text(let payloadText) = fast.payload, !hasObjectWithSeveralKeys(expected.payload) {
                XCTAssertEqual(Array(payloadText.bytes), expected.payload.serialized(), "canonical text of \(text)", file: file, line: line)
            }
        }
        return fast
    }

    private func hasObjectWithSeveralKeys(_ value: JSON) -> Bool {
        switch value {
        case .object(let members): return members.count > 1 || members.values.contains(where: hasObjectWithSeveralKeys)
        case .array(let elements): return elements.contains(where: hasObjectWithSeveralKeys)
        default: return false
        }
    }

    private func push(_ payload: String, room: String = "r1", seq: String = "7", from: String = "2", event: String = #""chat""#) -> [UInt8] {
        Array(#"{"op":"magix","room":"\#(room)","seq":\#(seq),"from":\#(from),"event":\#(event),"payload":\#(payload)}"#.utf8)
    }

    private func assertScans(_ bytes: [UInt8], canonical: Bool? = nil, file: StaticString = #filePath, line: UInt = #line) {
        guard let fields = assertAgrees(bytes, file: file, line: line) else {
            return XCTFail("declined: \(String(decoding: bytes, as: UTF8.self))", file: file, line: line)
        }
        if let canonical {
            if case .text = fields.payload {
                XCTAssertTrue(canonical, "kept as text: \(String(decoding: bytes, as: UTF8.self))", file: file, line: line)
            } else {
                XCTAssertFalse(canonical, "parsed: \(String(decoding: bytes, as: UTF8.self))", file: file, line: line)
            }
        }
    }

    /// Declined by the scanner, and the full path fails with `code`.
    private func assertDeclined(_ text: String, _ code: ErrorCode, file: StaticString = #filePath, line: UInt = #line) {
        let bytes = Array(text.utf8)
        XCTAssertNil(ServerPush.scanMagix(bytes), "scanned: \(text)", file: file, line: line)
        switch full(bytes) {
        case .success: XCTFail("the full path accepts \(text)", file: file, line: line)
        case .failure(let error): XCTAssertEqual(error.code, code, "\(text): \(error.message)", file: file, line: line)
        }
    }

    // MARK: Valid pushes

    func testScan_readsWhatServerMessageEncodes() throws {
        let json = ServerMessage.magix(room: "room-1", seq: 42, from: 2, event: "bench", payload: ["t": .int(1_000_000_000_000)])
        let bytes = json.serialized(sortedKeys: true)
        let fields = try XCTUnwrap(assertAgrees(bytes))
        XCTAssertEqual(fields.room, "room-1")
        XCTAssertEqual(fields.seq, 42)
        XCTAssertEqual(fields.from, 2)
        XCTAssertEqual(fields.event, "bench")
        guard case .text(let text) = fields.payload else { return XCTFail("payload parsed: \(fields.payload)") }
        XCTAssertEqual(String(decoding: text.bytes, as: UTF8.self), #"{"t":1000000000000}"#)
        // Unsorted (dictionary order) and with whitespace everywhere it may be.
        assertScans(json.serialized())
        assertScans(Array(" {\n \"event\" : \"bench\" ,\t\"payload\" : { \"t\" : 1 } , \"from\":2,\"seq\":1,\"room\":\"r\",\"op\":\"magix\" } \r\n".utf8),
                    canonical: false)
    }

    func testScan_payloadOfEveryJSONType() {
        let canonical = [
            "null", "true", "false", "0", "-1", "42", "9223372036854775807", "-9223372036854775808",
            #""""#, #""text""#, "[]", "{}", "[1,[2,[3]],{}]", #"{"a":{"b":{"c":[null,true,false]}}}"#,
            #"{"a":1,"b":"x","c":[1,2],"d":{"e":null}}"#, #"[{"a":1},{"a":2}]"#,
        ]
        for payload in canonical { assertScans(push(payload), canonical: true) }
        let parsed = [
            "1.5", "-0.0", "1e3", "2E-2", "-0", "9223372036854775808", "-9223372036854775809", "1.0",
            "[ 1 ]", "{ }", #"{"a" :1}"#, "[1, 2]", #"{"x":[0.5]}"#,
        ]
        for payload in parsed { assertScans(push(payload), canonical: false) }
        // Absent: null, as the full decoder gives it.
        assertScans(Array(#"{"op":"magix","room":"r1","seq":1,"from":2,"event":"e"}"#.utf8))
    }

    func testScan_escapedStringsAndUnicode() {
        // The serializer's own escapes stay as text.
        for payload in [#""q\"uote\\ \n\r\t\b\f""#, #""\u0001\u001f\u0000""#, #""Zoë 日本 😀""#, #"{"ü":1}"#, "\"\u{7f}\""] {
            assertScans(push(payload), canonical: payload != #"{"ü":1}"#)
        }
        // Other escapes mean the same text but are written differently: parsed.
        for payload in [#""\/""#, #""\u0041""#, #""\u001F""#, #""\u000a""#, #""\u00e9""#, #""\ud83d\ude00""#, #"{"\u0061":1}"#] {
            assertScans(push(payload), canonical: false)
        }
        // Event names: raw UTF-8, and escapes (decoded as the parser does).
        assertScans(push("1", event: #""日本""#))
        assertScans(push("1", event: #""a\nb\"\u00e9\ud83d\ude00\/""#))
        XCTAssertEqual(ServerPush.scanMagix(push("1", event: #""a\nb\"\u00e9\ud83d\ude00\/""#))?.event, "a\nb\"é😀/")
        assertDeclined(String(decoding: push("1", event: #""\ud83d""#), as: UTF8.self), .malformed)
        // An escaped room or op is left to the full decoder (which agrees).
        XCTAssertNil(ServerPush.scanMagix(push("1", room: #"r\u0031"#)))
        XCTAssertEqual(try? full(push("1", room: #"r\u0031"#)).get().room, "r1")
    }

    func testScan_nestedPayloads_upToTheParsersDepth() {
        // The message's object is one level: a payload may nest 255 deep.
        let deepest = String(repeating: "[", count: 255) + String(repeating: "]", count: 255)
        assertScans(push(deepest), canonical: true)
        let tooDeep = String(repeating: "[", count: 256) + String(repeating: "]", count: 256)
        assertDeclined(String(decoding: push(tooDeep), as: UTF8.self), .malformed)
        let objects = String(repeating: #"{"a":"#, count: 255) + "1" + String(repeating: "}", count: 255)
        assertScans(push(objects), canonical: false)  // more keys open than the scanner remembers: parsed
        let tooDeepObjects = String(repeating: #"{"a":"#, count: 256) + "1" + String(repeating: "}", count: 256)
        assertDeclined(String(decoding: push(tooDeepObjects), as: UTF8.self), .malformed)
        // Keys past what the scanner remembers are checked by the parser.
        let wide = "{" + (0..<100).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}"
        assertScans(push(wide), canonical: false)
        let wideRepeat = "{" + (0..<100).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + #","k3":0}"#
        assertDeclined(String(decoding: push(wideRepeat), as: UTF8.self), .malformed)
    }

    func testScan_ignoresUnknownFields_asTheDecoderDoes() {
        assertScans(Array(#"{"op":"magix","room":"r1","seq":2,"from":1,"event":"e","payload":null,"future":true}"#.utf8))
        assertScans(Array(#"{"future":{"a":[1.5, "x"]},"op":"magix","room":"r1","seq":2,"from":1,"event":"e","later":"y"}"#.utf8))
        assertDeclined(#"{"op":"magix","room":"r1","seq":2,"from":1,"event":"e","x":1,"x":2}"#, .malformed)
        assertDeclined(#"{"op":"magix","room":"r1","seq":2,"from":1,"event":"e","x":{"a":1,"a":2}}"#, .malformed)
        assertDeclined(#"{"op":"magix","room":"r1","seq":2,"from":1,"event":"e","x":1e999}"#, .malformed)
    }

    // MARK: Declined: the full decoder's codes

    func testScan_declinesWhatTheDecoderRejects_withItsCodes() {
        assertDeclined(#"[1]"#, .malformed)
        assertDeclined(#"{}"#, .malformed)
        assertDeclined(#"{"room":"r1"}"#, .malformed)
        assertDeclined(#"{"op":7}"#, .malformed)
        assertDeclined(#"{"op":"teleport"}"#, .unknownOp)
        assertDeclined(#"{"op":"magix","room":"r1","seq":1,"event":"e"}"#, .malformed)             // no from
        assertDeclined(#"{"op":"magix","room":"r1","from":1,"event":"e"}"#, .malformed)            // no seq
        assertDeclined(#"{"op":"magix","seq":1,"from":1,"event":"e"}"#, .malformed)                // no room
        assertDeclined(#"{"op":"magix","room":"r1","seq":1,"from":1}"#, .malformed)                // no event
        assertDeclined(#"{"room":"r1","seq":1,"from":1,"event":"e"}"#, .malformed)                 // no op
        assertDeclined(#"{"op":"magix","room":"r1","seq":"1","from":1,"event":"e"}"#, .malformed)
        assertDeclined(#"{"op":"magix","room":"r1","seq":1,"from":"1","event":"e"}"#, .malformed)
        assertDeclined(#"{"op":"magix","room":"r1","seq":1,"from":1,"event":5}"#, .malformed)
        assertDeclined(#"{"op":"magix","room":1,"seq":1,"from":1,"event":"e"}"#, .malformed)
        assertDeclined(#"{"op":"magix","room":"r1","seq":null,"from":1,"event":"e"}"#, .malformed)
        assertDeclined(#"{"op":"magix","room":"r1","seq":1.5,"from":1,"event":"e"}"#, .invalidArgument)
        assertDeclined(#"{"op":"magix","room":"r1","seq":1,"from":1e30,"event":"e"}"#, .invalidArgument)
        assertDeclined(#"{"op":"magix","room":"r1","seq":-1,"from":1,"event":"e"}"#, .invalidArgument)
        assertDeclined(#"{"op":"magix","room":"bad room","seq":1,"from":1,"event":"e"}"#, .invalidArgument)
        assertDeclined(#"{"op":"magix","room":"","seq":1,"from":1,"event":"e"}"#, .invalidArgument)
        assertDeclined(#"{"op":"magix","room":"\#(String(repeating: "r", count: 129))","seq":1,"from":1,"event":"e"}"#, .invalidArgument)
        assertDeclined(#"{"op":"magix","op":"magix","room":"r1","seq":1,"from":1,"event":"e"}"#, .malformed)   // repeated key
        assertDeclined(#"{"op":"magix","room":"r1","seq":1,"from":1,"event":"e","payload":{"a":1,"a":2}}"#, .malformed)
        assertDeclined(#"{"op":"magix","room":"r1","seq":1,"from":1,"event":"e","payload":{"é":1,"e\#u{301}":2}}"#, .malformed)
        // Not JSON: the parse error (reported as 1009001 by the host).
        for bad in [#"{"op":"magix","room":"r1","seq":1,"from":1,"event":"e","payload":[1,}"#,
                    #"{"op":"magix","room":"r1","seq":1,"from":1,"event":"e","payload":"\ud800"}"#,
                    #"{"op":"magix","room":"r1","seq":1,"from":1,"event":"e","payload":"\x"}"#,
                    #"{"op":"magix","room":"r1","seq":1,"from":1,"event":"e","payload":01}"#,
                    #"{"op":"magix","room":"r1","seq":1,"from":1,"event":"e","payload":tru}"#,
                    #"{"op":"magix","room":"r1","seq":1,"from":1,"event":"e"} x"#,
                    #"{"op":"magix","room":"r1","seq":1,"from":1,"event":"e""#,
                    "{\"op\":\"magix\",\"room\":\"r1\",\"seq\":1,\"from\":1,\"event\":\"e\",\"payload\":\"\u{1}\"}"] {
            assertDeclined(bad, .malformed)
        }
        var invalidUTF8 = push(#""ab""#)
        invalidUTF8[invalidUTF8.count - 3] = 0xFF
        XCTAssertNil(ServerPush.scanMagix(invalidUTF8))
        XCTAssertThrowsError(try JSON.parse(invalidUTF8))
        // Other ops are left to the full decoder.
        for other in [ServerMessage.state(room: "r1", seq: 3, from: 1, patch: ["globalState": ["a": 1]]),
                      ServerMessage.pong(t: 5, serverTime: 9), ServerMessage.reply(id: 9, seq: 58)] {
            XCTAssertNil(ServerPush.scanMagix(other.serialized()))
        }
    }

    // MARK: Differential: a generated corpus, and every prefix and byte flip of it

    func testScan_agreesWithTheFullPath_onAGeneratedCorpus() {
        var generator = SeededGenerator(seed: 0x6D61_6769_78)
        var scanned = 0
        var declined = 0
        for _ in 0..<3000 {
            let payload = Self.randomValue(depth: 0, using: &generator)
            var members: [(String, JSON)] = [("op", "magix"), ("room", .string("room-\(generator.next() % 1000)")),
                                             ("seq", .int(Int64(generator.next() % 1_000_000))),
                                             ("from", .int(Int64(bitPattern: generator.next()) % 100)),
                                             ("event", .string(Self.randomString(using: &generator)))]
            if generator.next() % 8 != 0 { members.append(("payload", payload)) }
            if generator.next() % 10 == 0 { members.append(("extra", Self.randomValue(depth: 0, using: &generator))) }
            members.shuffle(using: &generator)
            let spaced = generator.next() % 4 == 0
            let bytes = Self.write(members, spaced: spaced, using: &generator)
            if let fields = assertAgrees(bytes) {
                scanned += 1
                if members.contains(where: { $0.0 == "payload" }) {
                    // Kept as text exactly when canonical.
                    var kept = false
                    if case .text = fields.payload { kept = true }
                    let text = payload.serialized()
                    XCTAssertEqual(kept, Self.isCanonical(payload) && (!spaced || Self.addSpaces(text) == text), "\(String(decoding: bytes, as: UTF8.self))")
                }
            } else {
                declined += 1
                XCTFail("declined a valid push: \(String(decoding: bytes, as: UTF8.self))")
            }
            // Mutations: the scanner may decline, but never disagree.
            for _ in 0..<4 {
                var mutated = bytes
                switch generator.next() % 3 {
                case 0: mutated = Array(mutated.prefix(Int(generator.next() % UInt64(mutated.count))))
                case 1: mutated[Int(generator.next() % UInt64(mutated.count))] = UInt8(truncatingIfNeeded: generator.next())
                default:
                    let inserts = Array(#","{}[]:\ 0-.e"#.utf8)
                    mutated.insert(inserts[Int(generator.next() % UInt64(inserts.count))], at: Int(generator.next() % UInt64(mutated.count)))
                }
                assertAgrees(mutated)
            }
        }
        XCTAssertEqual(scanned, 3000, "the fast path is taken for every valid push (declined \(declined))")
    }

    /// Whether the serializer's text of `value` is what the scanner keeps:
    /// no doubles, ASCII object keys (repeats of non-ASCII keys are left to
    /// the parser), objects of at most 64 keys.
    private static func isCanonical(_ value: JSON) -> Bool {
        switch value {
        case .double: return false
        case .array(let elements): return elements.allSatisfy(isCanonical)
        case .object(let members):
            return members.count <= 64 && members.allSatisfy { $0.key.utf8.allSatisfy { $0 < 0x80 } && isCanonical($0.value) }
        default: return true
        }
    }

    private static func randomString(using generator: inout SeededGenerator) -> String {
        let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{1f}", "é", "日", "😀", "\u{7f}", "e\u{301}"]
        return (0..<Int(generator.next() % 6)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined()
    }

    private static func randomValue(depth: Int, using generator: inout SeededGenerator) -> JSON {
        switch generator.next() % (depth > 3 ? 6 : 9) {
        case 0: return .null
        case 1: return .bool(generator.next() % 2 == 0)
        case 2: return .int(Int64(bitPattern: generator.next()) >> Int64(generator.next() % 64))
        case 3: return .double(Double(Int64(bitPattern: generator.next()) % 100_000) / 64)
        case 4, 5: return .string(randomString(using: &generator))
        case 6: return .array((0..<Int(generator.next() % 4)).map { _ in randomValue(depth: depth + 1, using: &generator) })
        default:
            var object: [String: JSON] = [:]
            for _ in 0..<Int(generator.next() % 4) { object[randomString(using: &generator)] = randomValue(depth: depth + 1, using: &generator) }
            return .object(object)
        }
    }

    /// The members as JSON text, in their order; `spaced`: whitespace
    /// between the tokens of the message (and of the values, by re-writing
    /// their compact text with spaces after `,` and `:` outside strings).
    private static func write(_ members: [(String, JSON)], spaced: Bool, using generator: inout SeededGenerator) -> [UInt8] {
        var out: [UInt8] = Array((spaced ? " { " : "{").utf8)
        for (index, (key, value)) in members.enumerated() {
            if index > 0 { out.append(contentsOf: (spaced ? " , " : ",").utf8) }
            JSON.string(key).serialize(into: &out)
            out.append(contentsOf: (spaced ? " : " : ":").utf8)
            let text = value.serialized()
            out.append(contentsOf: spaced ? addSpaces(text) : text)
        }
        out.append(contentsOf: (spaced ? " }\n" : "}").utf8)
        return out
    }

    private static func addSpaces(_ text: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var inString = false
        var escaped = false
        for byte in text {
            out.append(byte)
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: ",") || byte == UInt8(ascii: ":") {
                out.append(UInt8(ascii: " "))
            }
        }
        return out
    }
}
