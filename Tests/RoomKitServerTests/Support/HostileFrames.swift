import Foundation
import RoomKitProtocol
import RoomKitTestSupport

/// How a hostile frame was derived from a valid request.
enum Mutation: String, CaseIterable, Sendable {
    case none, flip, truncate, splice, insert, delete, wrongType, hugeNumber, deepNesting, duplicateKey
    case unicode, notObject, controlCharacter, empty
}

/// What the server must answer to one text frame sent after `hello`
/// (PROTOCOL.md §2, docs/PROTOCOL.md "Connection and envelope"): every such
/// frame gets exactly one answer, and the connection stays open.
enum Expectation: Equatable {
    /// Not JSON, or not an object: an `error` push 1009001 (no `id`).
    case malformed
    /// An object with a valid `id` (a positive integer) and an op other than
    /// `ping`: a `reply` with that `id`, whatever else is wrong with it.
    case reply(Int64)
    /// Anything else: one `error` push, `pong` or `reply`.
    case oneAnswer

    /// The expectation for `bytes`, judged with the protocol's JSON parser.
    init(for bytes: [UInt8]) {
        guard let json = try? JSON.parse(bytes), case .object(let fields) = json else {
            self = .malformed
            return
        }
        if case .int(let id)? = fields["id"], id > 0, fields["op"] != .string("ping") {
            self = .reply(id)
        } else {
            self = .oneAnswer
        }
    }
}

/// Error codes a hostile frame may be answered with (PROTOCOL.md §3). Never
/// 1009500: malformed input must not reach an internal error.
let documentedRequestCodes: Set<Int> = [1_002_002, 1_002_033, 1_009_001, 1_009_002, 1_009_003, 1_009_004,
                                        1_009_005, 1_009_006, 1_009_007]

/// Makes hostile text frames for one connection logged in to `room` as
/// `user`: a valid request of a random kind, then one random mutation of it.
/// Every frame is valid UTF-8 (invalid UTF-8 is a separate offender: lws
/// closes 1007 before the server reads it).
struct HostileFrameMaker {
    let room: String
    let user: String
    let token: String
    private var nextID: Int64 = 100

    init(room: String, user: String, token: String) {
        self.room = room
        self.user = user
        self.token = token
    }

    /// A valid request (or ping) of a random kind.
    mutating func template(using rng: inout SeededGenerator) -> JSON {
        let id = JSON.int(nextID)
        nextID += 1
        let room = JSON.string(self.room)
        switch Int.random(in: 0..<13, using: &rng) {
        case 0: return ["op": "magix", "id": id, "room": room, "event": "chat", "payload": ["text": "hi", "n": [1, 2, 3]]]
        case 1: return ["op": "setState", "id": id, "room": room, "patch": ["globalState": ["k": 1, "s": "v"]]]
        case 2: return ["op": "setMemberState", "id": id, "room": room, "memberState": ["cursor": ["x": 1, "y": 2]]]
        case 3: return ["op": "ping", "t": 12345]
        case 4:
            return ["op": "putScenes", "id": id, "room": room, "dir": "/deck",
                    "scenes": [["name": "s1"], ["name": "s2", "ppt": ["src": "https://x/1.png", "width": 800, "height": 600]]]]
        case 5: return ["op": "setScenePath", "id": id, "room": room, "path": "/init"]
        case 6:
            return ["op": "insertImage", "id": id, "room": room,
                    "image": ["uuid": "u1", "url": "https://x/i.png", "x": 1, "y": 2, "width": 3, "height": 4]]
        case 7: return ["op": "setViewMode", "id": id, "room": room, "mode": "broadcaster"]
        case 8: return ["op": "publishStream", "id": id, "room": room, "stream": ["id": "st1", "extraInfo": "e"]]
        case 9: return ["op": "setExtraInfo", "id": id, "room": room, "key": "k", "value": "v"]
        case 10: return ["op": "renewToken", "id": id, "room": room, "token": .string(token)]
        case 11: return ["op": "setWritable", "id": id, "room": room, "writable": true]
        default: return ["op": "login", "id": id, "room": room, "token": .string(token), "user": ["id": .string(user)]]
        }
    }

    /// The next hostile frame and how it was made.
    mutating func next(using rng: inout SeededGenerator) -> (bytes: [UInt8], mutation: Mutation) {
        let template = self.template(using: &rng)
        let mutation = Mutation.allCases.randomElement(using: &rng)!
        var bytes = template.serialized()
        switch mutation {
        case .none:
            break
        case .flip:
            // Only the low seven bits of ASCII bytes: the text stays UTF-8.
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= 1 << UInt8.random(in: 0..<7, using: &rng)
            }
        case .truncate:
            bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &rng)))
        case .splice:
            let other = self.template(using: &rng).serialized()
            bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &rng)))
                + Array(other.suffix(Int.random(in: 0...other.count, using: &rng)))
        case .insert:
            let jsonish = Array(#"{}[]",:0123456789-+eE.tfnul\ "#.utf8)
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                bytes.insert(jsonish.randomElement(using: &rng)!, at: Int.random(in: 0...bytes.count, using: &rng))
            }
        case .delete:
            for _ in 0..<Int.random(in: 1...4, using: &rng) where !bytes.isEmpty {
                bytes.remove(at: Int.random(in: 0..<bytes.count, using: &rng))
            }
        case .wrongType:
            let values: [JSON] = ["text", 7, -2.5, true, false, .null, [1, "two"], ["k": "v"], [], [:]]
            bytes = replacingField(of: template, with: values.randomElement(using: &rng)!, using: &rng)
        case .hugeNumber:
            let literals = ["1e999", "-1e999", "1e-999", "123456789012345678901234567890", "9223372036854775807",
                            "9223372036854775808", "-9223372036854775809", "-0", "0", "-1", "1.5", "1E+2",
                            "0.0000001", "NaN", "Infinity", "0x10", "01", "+1", ".5", "1.", "--1"]
            bytes = replacingField(of: template, literal: literals.randomElement(using: &rng)!, using: &rng)
        case .deepNesting:
            let depth = [64, 254, 255, 256, 257, 1000, 5000].randomElement(using: &rng)!
            let nested = Bool.random(using: &rng)
                ? String(repeating: "[", count: depth) + "0" + String(repeating: "]", count: depth)
                : String(repeating: #"{"a":"#, count: depth) + "0" + String(repeating: "}", count: depth)
            bytes = replacingField(of: template, literal: nested, using: &rng)
        case .duplicateKey:
            let duplicate = [#""id":1,"#, #""op":"ping","#, #""room":"elsewhere","#].randomElement(using: &rng)!
            bytes = Array("{\(duplicate)".utf8) + bytes.dropFirst()
        case .unicode:
            bytes = replacingField(of: template, with: .string(randomUnicode(using: &rng)), using: &rng)
        case .notObject:
            let texts = ["[1,2]", #""hello""#, "42", "null", "true", #"[{"op":"ping","t":1}]"#, "{}", "[]"]
            bytes = Array(texts.randomElement(using: &rng)!.utf8)
        case .controlCharacter:
            let control: [UInt8] = [0x00, 0x01, 0x07, 0x09, 0x0A, 0x0D, 0x1B, 0x1F, 0x7F]
            bytes.insert(control.randomElement(using: &rng)!, at: Int.random(in: 0...bytes.count, using: &rng))
        case .empty:
            bytes = Array(["", " ", "\n\t "].randomElement(using: &rng)!.utf8)
        }
        precondition(String(validating: bytes, as: UTF8.self) != nil, "hostile text frames must stay UTF-8")
        return (bytes, mutation)
    }

    /// `template` serialized with one of its fields replaced by `value`.
    private func replacingField(of template: JSON, with value: JSON, using rng: inout SeededGenerator) -> [UInt8] {
        guard case .object(var fields) = template, let key = fields.keys.sorted().randomElement(using: &rng) else {
            return template.serialized()
        }
        fields[key] = value
        return JSON.object(fields).serialized()
    }

    /// `template` serialized with one of its fields replaced by the raw
    /// `literal` (which need not be valid JSON).
    private func replacingField(of template: JSON, literal: String, using rng: inout SeededGenerator) -> [UInt8] {
        let placeholder = "@@hostile@@"
        let text = String(decoding: replacingField(of: template, with: .string(placeholder), using: &rng), as: UTF8.self)
        return Array(text.replacingOccurrences(of: "\"\(placeholder)\"", with: literal).utf8)
    }

    /// A short string of awkward but valid Unicode: controls the serializer
    /// must escape, non-characters, BOM, bidi overrides, combining marks,
    /// astral-plane characters.
    private func randomUnicode(using rng: inout SeededGenerator) -> String {
        let pools: [ClosedRange<UInt32>] = [0x00...0x1F, 0x20...0x7E, 0xA0...0xFF, 0x300...0x36F, 0x4E00...0x4E20,
                                            0x200B...0x200F, 0x202A...0x202E, 0xFEFF...0xFEFF, 0xFFFE...0xFFFF,
                                            0x1F600...0x1F64F, 0x10FFFF...0x10FFFF]
        var text = ""
        for _ in 0..<Int.random(in: 1...24, using: &rng) {
            let pool = pools.randomElement(using: &rng)!
            if let scalar = Unicode.Scalar(UInt32.random(in: pool, using: &rng)) { text.unicodeScalars.append(scalar) }
        }
        return text
    }
}
