import RoomKitTestSupport
import XCTest

@testable import RoomKitProtocol

/// Randomized properties with a fixed seed, so any failure reproduces.
final class JSONPropertyTests: XCTestCase {
    private func randomString(_ rng: inout SeededGenerator) -> String {
        let pool: [Unicode.Scalar] = [
            "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}", "\u{7F}", "é", "中",
            "\u{2028}", "\u{FEFF}", "\u{FFFD}", "😀", "\u{10FFFF}",
        ]
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &rng) {
            scalars.append(pool.randomElement(using: &rng) ?? "a")
        }
        return String(scalars)
    }

    private func randomDouble(_ rng: inout SeededGenerator) -> Double {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0:
            return Double(bitPattern: rng.next())  // any bit pattern, including subnormals
        case 1:
            return Double(Int.random(in: -1000...1000, using: &rng)) / 8
        case 2:
            return Double.random(in: -1e6...1e6, using: &rng)
        default:
            return Double(Int64.random(in: .min ... .max, using: &rng))
        }
    }

    private func randomValue(_ rng: inout SeededGenerator, depth: Int) -> JSON {
        let kinds = depth > 4 ? 5 : 7
        switch Int.random(in: 0..<kinds, using: &rng) {
        case 0:
            return .null
        case 1:
            return .bool(Bool.random(using: &rng))
        case 2:
            return Bool.random(using: &rng)
                ? .int(Int64.random(in: .min ... .max, using: &rng))
                : .int(Int64.random(in: -100...100, using: &rng))
        case 3:
            let value = randomDouble(&rng)
            return .double(value.isFinite ? value : 0.5)
        case 4:
            return .string(randomString(&rng))
        case 5:
            return .array((0..<Int.random(in: 0...5, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
        default:
            var members: [String: JSON] = [:]
            for _ in 0..<Int.random(in: 0...5, using: &rng) {
                members[randomString(&rng)] = randomValue(&rng, depth: depth + 1)
            }
            return .object(members)
        }
    }

    func testRoundTrip_randomValues_parseBackEqual() throws {
        var rng = SeededGenerator(seed: 0x5EED_0001)
        for iteration in 0..<3000 {
            let value = randomValue(&rng, depth: 0)
            let bytes = value.serialized(sortedKeys: iteration.isMultiple(of: 2))
            let back: JSON
            do {
                back = try JSON.parse(bytes)
            } catch {
                XCTFail("iteration \(iteration): \(error) in \(String(decoding: bytes, as: UTF8.self))")
                return
            }
            XCTAssertEqual(back, value, "iteration \(iteration)")
            XCTAssertEqual(back.serialized(sortedKeys: true), value.serialized(sortedKeys: true))
        }
    }

    func testRoundTrip_randomDoubleBitPatterns_areExact() throws {
        var rng = SeededGenerator(seed: 0x5EED_0002)
        var checked = 0
        while checked < 5000 {
            let value = Double(bitPattern: rng.next())
            guard value.isFinite else { continue }
            checked += 1
            let back = try JSON.parse(JSON.double(value).serialized())
            XCTAssertEqual(back.doubleValue?.bitPattern, value.bitPattern, "\(value)")
        }
    }

    func testParse_randomDecimalText_matchesStandardLibrary() throws {
        var rng = SeededGenerator(seed: 0x5EED_0003)
        for _ in 0..<3000 {
            let digits = (0..<Int.random(in: 1...20, using: &rng)).map { _ in String(Int.random(in: 0...9, using: &rng)) }
            var text = digits.joined()
            while text.count > 1, text.hasPrefix("0") { text.removeFirst() }
            if Bool.random(using: &rng) { text += "." + String(Int.random(in: 0...99999, using: &rng)) }
            if Bool.random(using: &rng) { text += "e" + String(Int.random(in: -330...310, using: &rng)) }
            if Bool.random(using: &rng) { text = "-" + text }
            guard let expected = Double(text), expected.isFinite else { continue }
            let value = try JSON.parse(text)
            XCTAssertEqual(value.doubleValue, expected, text)
        }
    }

    func testParse_randomBytesAndMutations_neverCrash() {
        var rng = SeededGenerator(seed: 0x5EED_0004)
        let seeds = [
            #"{"op":"login","id":1,"room":"r","user":{"id":"u"},"token":"a.b.c"}"#,
            #"[1,-2.5e3,"\ud83d\ude00",{"a":[true,false,null]}]"#,
        ].map { Array($0.utf8) }
        let alphabet = Array(#"{}[]:,"\/-+.eE0123456789tfnu "#.utf8) + [0x00, 0x80, 0xC3, 0xED, 0xF4, 0xFF]
        for _ in 0..<5000 {
            var bytes = seeds.randomElement(using: &rng) ?? []
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let position = Int.random(in: 0...bytes.count, using: &rng)
                let byte = alphabet.randomElement(using: &rng) ?? 0
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: bytes.insert(byte, at: position)
                case 1 where position < bytes.count: bytes[position] = byte
                default: if position < bytes.count { bytes.remove(at: position) }
                }
            }
            if let value = try? JSON.parse(bytes) {
                // Whatever parses must re-serialize to something that parses equal.
                XCTAssertEqual(try? JSON.parse(value.serialized()), value)
            }
        }
    }
}
