import Foundation
import RoomKitProtocol
import RoomKitTestSupport

/// What the hostile clients did and saw, filled in by their threads and
/// checked by the test thread. Counters are keyed "group:detail", e.g.
/// "close:1009", "answer:reply 1009006", "mutation:flip".
final class HostileTally: @unchecked Sendable {
    // @unchecked Sendable: every field is guarded by `lock`.
    private let lock = NSLock()
    private var counters: [String: Int] = [:]
    private var _problems: [String] = []

    func count(_ key: String, _ amount: Int = 1) { lock.withLock { counters[key, default: 0] += amount } }
    func sent(_ frames: Int = 1) { count("sent", frames) }
    func mutated(_ mutation: Mutation) { count("mutation:\(mutation.rawValue)") }
    /// A connection closed as expected: `code`, or nil when dropped without a close frame.
    func closed(_ code: UInt16?) { count("close:\(code.map(String.init) ?? "dropped")") }
    /// One answer to a hostile frame: "reply ok", "reply 1009006", "error 1009001", "pong".
    func answered(_ kind: String, _ amount: Int = 1) { count("answer:\(kind)", amount) }
    /// An upgrade refused with HTTP 503 at the connection limit.
    func refused() { count("refused:503") }
    func problem(_ text: String) { lock.withLock { _problems.append(text) } }

    var problems: [String] { lock.withLock { _problems } }
    /// A counter's value.
    subscript(key: String) -> Int { lock.withLock { counters[key, default: 0] } }
    /// The counters of `group`, keyed by their detail.
    func group(_ group: String) -> [String: Int] {
        lock.withLock {
            Dictionary(uniqueKeysWithValues: counters.compactMap { key, value in
                key.hasPrefix(group + ":") ? (String(key.dropFirst(group.count + 1)), value) : nil
            })
        }
    }
}

/// The roomd under attack and the limits it was started with.
struct HostileTarget: Sendable {
    let port: Int
    let maxMessageBytes: Int
    let rateLimitBurst: Int
    let rateLimitPerSecond: Int
    let maxConnections: Int
}

/// True when this test process runs under ThreadSanitizer or
/// AddressSanitizer (and so, in `make check-sanitizers`, do the roomd
/// processes it spawns): some rates a flood relies on are then out of reach.
let runningUnderSanitizer: Bool = dlsym(nil, "__tsan_init") != nil || dlsym(nil, "__asan_init") != nil

/// One hostile connection's life on a test thread: opens (retrying while
/// the server answers 503 at its connection limit), says hello, and reads
/// the answers. Every unexpected outcome becomes a problem in the tally.
struct HostileSession {
    let socket: WireSocket
    let who: String
    let tally: HostileTally

    /// Connects; a 503 is the documented answer at the connection limit, so
    /// a hostile client, like any client, retries it after a pause.
    static func open(_ target: HostileTarget, who: String, tally: HostileTally, hello: Bool = true,
                     rng: inout SeededGenerator) -> HostileSession? {
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            switch WireSocket.upgrade(port: target.port) {
            case .open(let socket):
                let session = HostileSession(socket: socket, who: who, tally: tally)
                if hello {
                    socket.sendText(#"{"op":"hello","id":1}"#)
                    guard let answer = session.nextAnswer(), answer.op == "reply", answer["ok"] == true else {
                        tally.problem("\(who): hello was not answered ok")
                        return nil
                    }
                }
                return session
            case .refused(503, _):
                tally.refused()
                usleep(UInt32.random(in: 10_000...40_000, using: &rng))
            case .refused(let status, let text):
                tally.problem("\(who): upgrade refused with \(status): \(text.prefix(200))")
                return nil
            case .failed(let why):
                tally.problem("\(who): upgrade failed: \(why)")
                return nil
            }
        }
        tally.problem("\(who): refused 503 for 15 s")
        return nil
    }

    /// The next text frame as JSON (nil after `timeout`, or when the connection closed).
    func nextAnswer(timeout: TimeInterval = 5) -> JSON? {
        socket.readText(timeout: timeout).map { (try? JSON.parse($0)) ?? ["op": "non-json", "text": .string($0)] }
    }

    /// Reads until the close; a problem unless it is `code` (nil: dropped
    /// without a close frame) with no text frame before it.
    func expectClose(_ code: UInt16?, after what: String) {
        let (received, texts, closed) = socket.readUntilClose(timeout: 5)
        if !closed {
            tally.problem("\(who): still open 5 s after \(what)")
        } else if received != code || !texts.isEmpty {
            tally.problem("\(who): after \(what) expected close \(code.map(String.init) ?? "(dropped)"), got "
                          + "\(received.map(String.init) ?? "(dropped)") after \(texts.map { $0.prefix(120) })")
        } else {
            tally.closed(code)
        }
    }

    /// Checks that the connection still answers a ping.
    func expectStillOpen(after what: String) {
        socket.sendText(#"{"op":"ping","t":424242}"#)
        guard let answer = nextAnswer(), answer.op == "pong", answer.int("t") == 424242 else {
            return tally.problem("\(who): no pong after \(what)")
        }
    }
}

extension HostileTally {
    /// Records `answer` to a frame expected as `expectation`; false (after
    /// noting the problem) when it breaks PROTOCOL.md §2–3.
    @discardableResult
    func check(_ answer: JSON, against expectation: Expectation, frame: [UInt8], who: String) -> Bool {
        let op = answer.op ?? "?"
        let code = answer.code
        let ok = answer["ok"] == true
        answered(op == "reply" ? (ok ? "reply ok" : "reply \(code ?? 0)") : op == "error" ? "error \(code ?? 0)" : op)
        var fine: Bool
        switch expectation {
        case .malformed:
            fine = op == "error" && code == 1_009_001 && answer["id"] == nil
        case .reply(let id):
            fine = op == "reply" && answer.int("id") == id
        case .oneAnswer:
            fine = ["reply", "error", "pong"].contains(op)
        }
        if (op == "reply" && !ok) || op == "error" {
            fine = fine && code.map { documentedRequestCodes.contains($0) } ?? false
        }
        if !fine {
            problem("\(who): expected \(expectation) for \(String(decoding: frame.prefix(200), as: UTF8.self).debugDescription), "
                    + "got \(answer.jsonString.prefix(300))")
        }
        return fine
    }
}
