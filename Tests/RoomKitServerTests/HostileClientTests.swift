import Foundation
import RoomKitLoop
import RoomKitProtocol
import XCTest

/// Hostile clients against a live roomd: a bounded flood of mutated frames,
/// invalid UTF-8, binary frames, RFC 6455 violations, oversize messages,
/// request floods and connections past the limit, while honest members in
/// other rooms carry acknowledged traffic. Every offender must get the
/// documented outcome (PROTOCOL.md §1–3, docs/PROTOCOL.md), roomd must keep
/// serving, no honest connection may drop, and no acknowledged event may be
/// lost or duplicated.
///
/// `HOSTILE_FRAMES` (default 1,200 mutated frames) scales the flood;
/// `HOSTILE_SEED` replays a run (each run prints its seed).
final class HostileClientTests: ServerTestCase {
    func testHostileFlood_offendersGetTheDocumentedOutcomes_andHonestRoomsLoseNoEvent() throws {
        let environment = ProcessInfo.processInfo.environment
        let frames = max(100, environment["HOSTILE_FRAMES"].flatMap { Int($0) } ?? 1200)
        let seed = environment["HOSTILE_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        print("hostile: seed \(seed) (HOSTILE_SEED=\(seed) replays it), HOSTILE_FRAMES=\(frames)")
        let mutators = min(32, max(6, frames / 200))
        let rateLimit = 200
        let pace = Double(rateLimit) / 2  // mutated frames per second per connection: half the rate limit
        let honestRooms = 4
        let honestConnections = honestRooms * 2 + 1  // a reader and a writer each, a second writer in honest-0
        // Shrunk limits; room for every client at once plus a dozen for the limit prober.
        let (maxMessageBytes, rateLimitBurst) = (65_536, 40)
        let maxConnections = honestConnections + mutators + 8 + 12
        let child = try startRoomd(dataDirectory: try temporaryDirectory(), extra: [
            "--rate-limit", "\(rateLimit)", "--rate-limit-burst", "\(rateLimitBurst)", "--max-message-bytes", "\(maxMessageBytes)",
            "--max-connections", "\(maxConnections)",
        ])
        let target = HostileTarget(port: child.port, maxMessageBytes: maxMessageBytes, rateLimitBurst: rateLimitBurst,
                                   rateLimitPerSecond: rateLimit, maxConnections: maxConnections)

        // Honest members first: one reader and one writer per room (two in honest-0).
        let side = try makeClientSide()
        var readers: [(room: String, client: RawClient)] = []
        var writers: [HonestWriter] = []
        for index in 0..<honestRooms {
            let room = "honest-\(index)"
            let reader = try side.connect(port: child.port)
            let hello = try XCTUnwrap(reader.history().first { $0.op == "reply" })
            XCTAssertEqual(hello.int("maxMessageBytes"), Int64(maxMessageBytes), "--max-message-bytes is announced")
            XCTAssertEqual(try reader.login(room, token: makeToken(user: "r\(index)", room: room, role: .reader),
                                            user: "r\(index)")["ok"], true)
            readers.append((room, reader))
            for suffix in index == 0 ? ["a", "b"] : ["a"] {
                let user = "w\(index)\(suffix)"
                let client = try side.connect(port: child.port)
                XCTAssertEqual(try client.login(room, token: makeToken(user: user, room: room), user: user)["ok"], true)
                writers.append(HonestWriter(client: client, room: room, user: user))
            }
        }
        let stop = LockedValue(false)
        let honest = DispatchGroup()
        for writer in writers { spawn(in: honest) { writer.run(until: stop) } }

        // Then the hostile clients, all at once.
        let tally = HostileTally()
        let hostile = DispatchGroup()
        let perMutator = (frames + mutators - 1) / mutators
        for index in 0..<mutators {
            spawn(in: hostile) {
                HostileClients.mutator(index, target: target, frames: perMutator, pace: pace, seed: seed, tally: tally)
            }
        }
        spawn(in: hostile) { HostileClients.invalidUTF8(episodes: max(12, frames / 100), target: target, seed: seed, tally: tally) }
        spawn(in: hostile) { HostileClients.binary(frames: max(20, frames / 50), target: target, seed: seed, tally: tally) }
        spawn(in: hostile) { HostileClients.oversize(episodes: max(9, frames / 150), target: target, seed: seed, tally: tally) }
        spawn(in: hostile) { HostileClients.violations(episodes: max(12, frames / 100), target: target, seed: seed, tally: tally) }
        spawn(in: hostile) { HostileClients.preHello(episodes: max(8, frames / 150), target: target, seed: seed, tally: tally) }
        for index in 0..<2 {
            spawn(in: hostile) { HostileClients.flooder(index, target: target, rate: 2000, seed: seed, tally: tally) }
        }
        spawn(in: hostile) { HostileClients.briefBurst(target: target, seed: seed, tally: tally) }
        spawn(in: hostile) {
            Thread.sleep(forTimeInterval: 0.5)  // in the middle of the flood
            HostileClients.limitProber(target: target, seed: seed, tally: tally)
        }
        let budget = 60 + Double(perMutator) / pace * 2
        let finished = hostile.wait(timeout: .now() + budget)
        Thread.sleep(forTimeInterval: 0.2)
        stop.withLock { $0 = true }
        XCTAssertEqual(honest.wait(timeout: .now() + 15), .success, "the honest writers stopped")
        XCTAssertEqual(finished, .success, "the hostile clients finished within \(budget) s")

        // Every offender got its documented outcome.
        let problems = tally.problems
        XCTAssertEqual(problems.count, 0, "seed \(seed): \(problems.prefix(20).joined(separator: "\n"))")
        let closes = tally.group("close")
        let floodReachedTheLimit = !tally.group("flood").keys.contains { $0.hasPrefix("limit not sustained") }
        for code in ["1002", "1007", "1008", "1009", "dropped"] where code != "1008" || floodReachedTheLimit {
            XCTAssertGreaterThan(closes[code, default: 0], 0, "some offenders were closed \(code)")
        }
        XCTAssertGreaterThan(tally["answer:error 1009001"], 0)
        XCTAssertGreaterThan(tally["refused:503"], 0, "upgrades past the limit were refused 503")

        // roomd kept serving, and counted exactly the refusals the offenders saw.
        XCTAssertTrue(child.process.isRunning, "roomd is alive; stderr: \(child.stderr.text.suffix(2000))")
        XCTAssertEqual(try httpRequest(port: child.port, method: "GET", path: "/healthz").text, "ok")
        let metrics = try httpRequest(port: child.port, method: "GET", path: "/metrics").text
        XCTAssertTrue(metrics.contains(#"roomd_connections_refused_total{limit="process"} \#(tally["refused:503"])"#
                                       + "\n"), metrics)

        // The honest members were never disconnected and lost nothing.
        for writer in writers {
            XCTAssertNil(writer.problem, "\(writer.user)")
            XCTAssertTrue(try writer.client.isOpen(), "\(writer.user) was disconnected")
        }
        let admin = makeToken(user: "ops", role: .admin)
        let roomList = try httpRequest(port: child.port, method: "GET", path: "/v1/admin/rooms",
                                       headers: [("Authorization", "Bearer \(admin)")]).json?.arrayValue ?? []
        var checked = 0, lost = 0, duplicated = 0
        for (room, reader) in readers {
            XCTAssertTrue(try reader.isOpen(), "the reader of \(room) was disconnected")
            let acked = writers.filter { $0.room == room }.flatMap(\.acked)
            XCTAssertEqual(Set(acked).count, acked.count, "\(room): one seq per acknowledged event")
            let last = try XCTUnwrap(acked.max(), "\(room): the writers got events acknowledged")
            let deadline = Date().addingTimeInterval(10)
            var received = try reader.receivedSeqs(in: room)
            while received.last.map({ $0 < last }) ?? true, Date() < deadline {
                usleep(10_000)
                received = try reader.receivedSeqs(in: room)
            }
            let recording = try httpRequest(port: child.port, method: "GET", path: "/v1/rooms/\(room)/recording",
                                            headers: [("Authorization", "Bearer \(makeToken(user: "ops", room: room))")])
            let recorded = recording.lines.dropFirst().compactMap { $0?.int("seq") }
            for (what, seqs) in [("the reader", received), ("the recording", recorded)] {
                XCTAssertEqual(seqs, seqs.sorted(), "\(room): \(what) is in order")
                let missing = Set(acked).subtracting(seqs)
                XCTAssertEqual(missing, [], "\(room): \(what) lacks acknowledged events")
                lost += missing.count
                duplicated += seqs.count - Set(seqs).count
            }
            XCTAssertEqual(roomList.first { $0.string("room") == room }?.int("seq"), recorded.last,
                           "\(room): the admin API's seq is the recording's last")
            checked += acked.count
        }
        XCTAssertEqual(duplicated, 0)

        let answers = tally.group("answer").sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }
        let closed = closes.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }
        print("hostile: seed \(seed): \(tally["sent"]) frames sent (\(tally.group("mutation").values.reduce(0, +)) mutated, "
              + "\(mutators) mutators), offenders closed \(closed.joined(separator: ", ")), "
              + "\(tally["refused:503"]) upgrades refused 503 (\(tally["prober:held at the limit"]) held at the limit), "
              + "answers \(answers.joined(separator: ", ")); honest: \(honestConnections) connections in \(honestRooms) rooms "
              + "never dropped, \(checked) acknowledged events checked in readers and recordings, "
              + "lost: \(lost), duplicated: \(duplicated)")
    }

    /// Runs `body` on a thread of its own, inside `group`.
    private func spawn(in group: DispatchGroup, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        Thread.detachNewThread {
            body()
            group.leave()
        }
    }
}

/// An honest member writing to its room throughout the flood, one request
/// at a time (well under the rate limit), alternating `setState` and
/// `magix`, remembering the seq of every acknowledged event.
final class HonestWriter: @unchecked Sendable {
    // @unchecked Sendable: `client` is used by the writer's thread, then by
    // the test thread after it ended; the rest is guarded by `lock`.
    let client: RawClient
    let room: String
    let user: String
    private let lock = NSLock()
    private var _acked: [Int64] = []
    private var _problem: String?

    init(client: RawClient, room: String, user: String) {
        self.client = client
        self.room = room
        self.user = user
    }

    var acked: [Int64] { lock.withLock { _acked } }
    var problem: String? { lock.withLock { _problem } }

    func run(until stop: LockedValue<Bool>) {
        var count: Int64 = 0
        while !stop.withLock({ $0 }) {
            count += 1
            do {
                let reply = count % 2 == 0
                    ? try client.request("magix", room: room, ["event": "tick", "payload": .int(count)])
                    : try client.request("setState", room: room, ["patch": ["globalState": [user: .int(count)]]])
                guard reply["ok"] == true, let seq = reply.int("seq") else {
                    return lock.withLock { _problem = "request \(count) refused: \(reply)" }
                }
                lock.withLock { _acked.append(seq) }
            } catch {
                return lock.withLock { _problem = "request \(count): \(error)" }
            }
            usleep(25_000)
        }
    }
}

extension RawClient {
    /// The seqs of the room pushes received in `room`, in arrival order.
    func receivedSeqs(in room: String) throws -> [Int64] {
        try history().filter { $0.op != "reply" && $0.string("room") == room }.compactMap { $0.int("seq") }
    }
}
