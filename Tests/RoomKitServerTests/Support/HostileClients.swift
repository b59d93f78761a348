import Foundation
import RoomKitProtocol
import RoomKitTestSupport

/// The hostile clients of `HostileClientTests`, one kind per function, each
/// run on a thread of its own against a live roomd. Each records what it
/// sent and saw in a `HostileTally`; anything that breaks the documented
/// outcome is a problem there.
enum HostileClients {
    /// Logs in to a room of its own and sends `frames` mutated requests,
    /// `window` at a time, at most `pace` frames/s (under the rate limit, so
    /// every frame is judged on its content). Each gets exactly one answer,
    /// in order, and the connection stays open.
    static func mutator(_ index: Int, target: HostileTarget, frames: Int, pace: Double, seed: UInt64,
                        tally: HostileTally) {
        var rng = SeededGenerator(seed: seed, stream: index)
        let who = "mutator-\(index)", room = "hostile-\(index)", user = "m\(index)"
        let token = makeToken(user: user, room: room)
        guard let session = HostileSession.open(target, who: who, tally: tally, rng: &rng) else { return }
        session.socket.sendText(JSON.object(["op": "login", "id": 2, "room": .string(room), "token": .string(token),
                                             "user": ["id": .string(user)]]).jsonString)
        guard let login = session.nextAnswer(), login["ok"] == true else {
            return tally.problem("\(who): login failed")
        }
        var maker = HostileFrameMaker(room: room, user: user, token: token)
        let start = Date()
        var sent = 0
        while sent < frames {
            let window = min(16, frames - sent)
            var pending: [(frame: [UInt8], expectation: Expectation)] = []
            for _ in 0..<window {
                let (bytes, mutation) = maker.next(using: &rng)
                session.socket.sendText(bytes: bytes)
                pending.append((bytes, Expectation(for: bytes)))
                tally.mutated(mutation)
            }
            sent += window
            tally.sent(window)
            for (frame, expectation) in pending {
                guard let answer = session.nextAnswer() else {
                    let state = session.socket.isClosed ? "the connection closed" : "no answer within 5 s"
                    return tally.problem("\(who): \(state) after \(String(decoding: frame.prefix(200), as: UTF8.self).debugDescription)")
                }
                tally.check(answer, against: expectation, frame: frame, who: who)
            }
            let due = start.addingTimeInterval(Double(sent) / pace)
            if due > Date() { Thread.sleep(until: due) }
        }
        session.expectStillOpen(after: "\(frames) mutated frames")
    }

    /// Text frames that are not UTF-8: libwebsockets closes 1007 before the
    /// server reads them. Every fourth episode instead splits valid UTF-8
    /// inside a character across two fragments, which must be answered.
    static func invalidUTF8(episodes: Int, target: HostileTarget, seed: UInt64, tally: HostileTally) {
        var rng = SeededGenerator(seed: seed, stream: 1001)
        let invalid: [[UInt8]] = [[0x80], [0xC3, 0x28], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
                                  [0xFF], [0xFE], [0xE2, 0x82]]
        for episode in 0..<episodes {
            let who = "utf8-\(episode)"
            guard let session = HostileSession.open(target, who: who, tally: tally, rng: &rng) else { return }
            if episode % 4 == 3 {
                let text = Array(#"{"op":"ping","t":"é€😀"}"#.utf8)
                let cut = text.firstIndex(of: 0x82)!  // inside "€" (E2 82 AC)
                session.socket.sendFrame(opcode: 0x1, Array(text[..<cut]), fin: false)
                session.socket.sendFrame(opcode: 0x0, Array(text[cut...]))
                tally.sent(2)
                let answer = session.nextAnswer()
                if answer?.op != "pong" || answer?.string("t") != "é€😀" {
                    tally.problem("\(who): valid UTF-8 split across fragments got \(String(describing: answer))")
                }
                session.socket.sendClose()
                continue
            }
            var bytes = Array(#"{"op":"ping","t":"abc"#.utf8)
            bytes.insert(contentsOf: invalid.randomElement(using: &rng)!, at: Int.random(in: 0...bytes.count, using: &rng))
            bytes += Array(#""}"#.utf8)
            if Bool.random(using: &rng) {
                session.socket.sendText(bytes: bytes)
                tally.sent()
            } else {
                // The bad bytes in the second fragment of a message.
                let cut = bytes.count / 3
                session.socket.sendFrame(opcode: 0x1, Array(bytes[..<cut]), fin: false)
                session.socket.sendFrame(opcode: 0x0, Array(bytes[cut...]))
                tally.sent(2)
            }
            session.expectClose(1007, after: "invalid UTF-8")
        }
    }

    /// Binary frames (§1: one message = one text frame): each gets an
    /// `error` push 1009001 and is not executed; the connection stays open.
    static func binary(frames: Int, target: HostileTarget, seed: UInt64, tally: HostileTally) {
        var rng = SeededGenerator(seed: seed, stream: 1002)
        var maker = HostileFrameMaker(room: "hostile-binary", user: "b", token: makeToken(user: "b", room: "hostile-binary"))
        guard let session = HostileSession.open(target, who: "binary", tally: tally, rng: &rng) else { return }
        for _ in 0..<frames {
            let bytes = Bool.random(using: &rng)
                ? maker.template(using: &rng).serialized()
                : (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            session.socket.sendBinary(bytes)
            tally.sent()
            guard let answer = session.nextAnswer() else { return tally.problem("binary: no answer to a binary frame") }
            tally.check(answer, against: .malformed, frame: bytes, who: "binary")
        }
        session.expectStillOpen(after: "\(frames) binary frames")
    }

    /// Messages over `maxMessageBytes`: in one frame, in many fragments, or
    /// behind a header that claims 2^40 bytes. Each closes 1009.
    static func oversize(episodes: Int, target: HostileTarget, seed: UInt64, tally: HostileTally) {
        var rng = SeededGenerator(seed: seed, stream: 1003)
        let limit = target.maxMessageBytes
        for episode in 0..<episodes {
            let who = "oversize-\(episode)"
            guard let session = HostileSession.open(target, who: who, tally: tally, rng: &rng) else { return }
            let filler = UInt8(ascii: "x")
            switch episode % 3 {
            case 0:
                let size = limit + Int.random(in: 1...4096, using: &rng)
                session.socket.sendText(bytes: Array(#"{"op":"ping","t":""#.utf8) + Array(repeating: filler, count: size))
                tally.sent()
            case 1:
                let piece = Int.random(in: 1024...16384, using: &rng)
                var total = 0
                while total <= limit {
                    session.socket.sendFrame(opcode: total == 0 ? 0x1 : 0x0, Array(repeating: filler, count: piece), fin: false)
                    total += piece
                    tally.sent()
                }
            default:
                session.socket.sendFrame(opcode: 0x1, Array(repeating: filler, count: limit + 1), claimedLength: 1 << 40)
                tally.sent()
            }
            session.expectClose(1009, after: "an oversize message (\(["one frame", "fragments", "a lying header"][episode % 3]))")
        }
    }

    /// Frames that break RFC 6455: libwebsockets closes 1002, or drops the
    /// connection for a control frame over 125 bytes.
    static func violations(episodes: Int, target: HostileTarget, seed: UInt64, tally: HostileTally) {
        var rng = SeededGenerator(seed: seed, stream: 1004)
        let ping = Array(#"{"op":"ping","t":1}"#.utf8)
        for episode in 0..<episodes {
            let who = "violation-\(episode)"
            guard let session = HostileSession.open(target, who: who, tally: tally, rng: &rng) else { return }
            let socket = session.socket
            switch episode % 6 {
            case 0:
                let opcode = [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF].randomElement(using: &rng)!
                socket.sendFrame(opcode: UInt8(opcode), ping)
                session.expectClose(1002, after: "reserved opcode \(opcode)")
            case 1:
                socket.sendFrame(opcode: 0x1, ping, rsv: UInt8.random(in: 1...7, using: &rng))
                session.expectClose(1002, after: "reserved bits")
            case 2:
                socket.sendFrame(opcode: 0x0, ping)
                session.expectClose(1002, after: "a continuation without a start")
            case 3:
                socket.sendFrame(opcode: 0x9, [1], fin: false)
                session.expectClose(1002, after: "a fragmented ping")
            case 4:
                socket.sendFrame(opcode: 0x1, Array(ping.prefix(5)), fin: false)
                socket.sendFrame(opcode: 0x1, ping)
                session.expectClose(1002, after: "a new message inside a fragmented one")
            default:
                socket.sendFrame(opcode: 0x9, Array(repeating: 7, count: Int.random(in: 126...300, using: &rng)))
                session.expectClose(nil, after: "a ping over 125 bytes")
            }
            tally.sent()
        }
    }

    /// Anything but `hello` first (mutated requests, binary frames): close 1002.
    static func preHello(episodes: Int, target: HostileTarget, seed: UInt64, tally: HostileTally) {
        var rng = SeededGenerator(seed: seed, stream: 1005)
        var maker = HostileFrameMaker(room: "hostile-early", user: "e", token: makeToken(user: "e", room: "hostile-early"))
        for episode in 0..<episodes {
            let who = "pre-hello-\(episode)"
            guard let session = HostileSession.open(target, who: who, tally: tally, hello: false, rng: &rng) else { return }
            let (bytes, _) = maker.next(using: &rng)
            if Int.random(in: 0..<4, using: &rng) == 0 {
                session.socket.sendBinary(bytes)
            } else {
                session.socket.sendText(bytes: bytes)
            }
            tally.sent()
            session.expectClose(1002, after: "\(String(decoding: bytes.prefix(80), as: UTF8.self).debugDescription) before hello")
        }
    }

    /// Requests far past the token bucket, read as they are answered:
    /// replies 1009004, then close 1008 once over the limit for the grace period.
    static func flooder(_ index: Int, target: HostileTarget, rate: Double, seed: UInt64, tally: HostileTally) {
        var rng = SeededGenerator(seed: seed, stream: 1100 + index)
        let who = "flooder-\(index)"
        guard let session = HostileSession.open(target, who: who, tally: tally, rng: &rng) else { return }
        let start = Date()
        var sent = 0
        var rateLimited = 0
        var answers = 0
        var closeCode: UInt16?
        while !session.socket.isClosed && Date().timeIntervalSince(start) < 10 {
            let due = Int(Date().timeIntervalSince(start) * rate)
            while sent < due {
                session.socket.sendText(#"{"op":"logout","id":\#(sent + 2),"room":"nowhere"}"#)
                sent += 1
            }
            for frame in session.socket.readAvailable(waitMilliseconds: 2) {
                switch frame {
                case .text(let text):
                    answers += 1
                    if let reply = try? JSON.parse(text), reply.code == 1_009_004 { rateLimited += 1 }
                case .close(let code): closeCode = code
                default: break
                }
            }
        }
        tally.sent(sent)
        tally.answered("reply 1009004", rateLimited)
        // A token bucket admits everything that arrives no faster than it
        // refills. Under a sanitizer roomd can be too slow, or stall too
        // long between reads, for a flood to stay over 200/s for 2 s (seen
        // under ThreadSanitizer: ~180 requests/s, or 178 refusals in 10 s
        // with pauses that end each episode). There the flood only has to
        // get no wrong outcome; uninstrumented, it must be refused and closed.
        if runningUnderSanitizer && closeCode == nil {
            let answeredPerSecond = Int(Double(answers) / max(Date().timeIntervalSince(start), 0.001))
            tally.count("flood:limit not sustained (instrumented roomd answered \(answeredPerSecond)/s, \(rateLimited) refused)")
        } else if rateLimited == 0 || closeCode != 1008 {
            tally.problem("\(who): \(sent) requests: \(rateLimited) replies 1009004, close \(String(describing: closeCode))")
        } else {
            tally.closed(1008)
        }
    }

    /// One burst of three bucketfuls, then calm: some replies 1009004, and
    /// the connection stays open and is served again once the bucket refilled.
    static func briefBurst(target: HostileTarget, seed: UInt64, tally: HostileTally) {
        var rng = SeededGenerator(seed: seed, stream: 1200)
        guard let session = HostileSession.open(target, who: "burst", tally: tally, rng: &rng) else { return }
        let count = target.rateLimitBurst * 3
        // In one write, so the server reads them faster than the bucket refills.
        session.socket.write((0..<count).flatMap { id in
            WireSocket.frame(opcode: 0x1, Array(#"{"op":"logout","id":\#(id + 2),"room":"nowhere"}"#.utf8))
        })
        tally.sent(count)
        var codes: [Int] = []
        for _ in 0..<count {
            guard let reply = session.nextAnswer(), let code = reply.code else { return tally.problem("burst: a reply is missing") }
            codes.append(code)
        }
        if !codes.contains(1_009_004) || Set(codes).subtracting([1_009_004, 1_002_002]) != [] {
            tally.problem("burst: replies \(Set(codes)) to a burst of \(count)")
        }
        Thread.sleep(forTimeInterval: 0.6)
        session.socket.sendText(#"{"op":"logout","id":999999,"room":"nowhere"}"#)
        tally.sent()
        let after = session.nextAnswer()
        if after?.code != 1_002_002 { tally.problem("burst: after calm, got \(String(describing: after))") }
        session.expectStillOpen(after: "a brief burst")
    }

    /// Fills the server up to its connection limit: the next upgrade is
    /// refused 503; a freed slot takes a new connection; and every
    /// connection it held still works.
    static func limitProber(target: HostileTarget, seed: UInt64, tally: HostileTally) {
        var rng = SeededGenerator(seed: seed, stream: 1300)
        var held: [WireSocket] = []
        func attempt() -> Bool? {
            switch WireSocket.upgrade(port: target.port) {
            case .open(let socket):
                held.append(socket)
                return true
            case .refused(503, _):
                tally.refused()
                return false
            case .refused(let status, let text):
                tally.problem("prober: upgrade refused with \(status) instead of 503: \(text.prefix(200))")
            case .failed(let why):
                tally.problem("prober: upgrade failed instead of 503: \(why)")
            }
            return nil
        }
        var full = false
        for _ in 0..<(target.maxConnections + 100) {
            guard let opened = attempt() else { return }
            if !opened {
                full = true
                break
            }
        }
        guard full else { return tally.problem("prober: \(held.count) connections and never a 503") }
        tally.count("prober:held at the limit", held.count)
        // While full, upgrades keep being refused (or take the slot another
        // hostile connection just freed).
        for _ in 0..<5 {
            guard attempt() != nil else { return }
            usleep(UInt32.random(in: 5_000...20_000, using: &rng))
        }
        held.removeFirst().sendClose()
        var reopened = false
        let deadline = Date().addingTimeInterval(5)
        while !reopened && Date() < deadline {
            guard let opened = attempt() else { return }
            reopened = opened
            if !opened { usleep(10_000) }
        }
        if !reopened { tally.problem("prober: a freed slot never took a new connection") }
        for socket in held {
            socket.sendText(#"{"op":"hello","id":1}"#)
            tally.sent()
            guard let text = socket.readText(), text.contains(#""ok":true"#) else {
                return tally.problem("prober: a connection held at the limit does not work")
            }
        }
        tally.count("prober:connections checked", held.count)
    }
}
