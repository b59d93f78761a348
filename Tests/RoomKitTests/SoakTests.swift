import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// The soak test (`make soak`, not in CI): thousands of sessions through the
/// fault proxy to a real roomd for a long time, with random faults (cuts,
/// partitions short and long, refusals, latency, slicing, bandwidth caps and
/// kill -9 of roomd) while writers send numbered events and readers check
/// that every acknowledged one arrives exactly once, in order. The client's
/// RSS and open descriptors must stay flat.
///
/// Skipped unless SOAK_MINUTES is set. SOAK_SESSIONS (default 5000),
/// SOAK_RATE (events/s, default 100), SOAK_SEED, SOAK_REPORT (a file for the
/// report, besides stdout).
final class SoakTests: XCTestCase {
    /// Per-room bookkeeping, bounded: only events acknowledged but not yet
    /// seen (or seen before their acknowledgement) are kept.
    struct RoomLedger {
        var next: Int64 = 0
        var pendingAcked: Set<Int64> = []
        var pendingSeen: Set<Int64> = []
        var lastNumber: Int64 = 0
        var lastSeq: Int64 = 0
    }

    final class Ledger: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        let lock = NSLock()
        var rooms: [RoomLedger]
        var acked = 0
        var seen = 0
        var duplicatesOrReorders = 0
        var seqViolations = 0
        var unknownOutcome = 0
        var reconnected = 0
        var reconnectFailed = 0
        var kicked = 0

        init(rooms: Int) { self.rooms = Array(repeating: RoomLedger(), count: rooms) }

        func acknowledged(_ room: Int, _ number: Int64) {
            lock.withLock {
                acked += 1
                if rooms[room].pendingSeen.remove(number) == nil { rooms[room].pendingAcked.insert(number) }
            }
        }

        func received(_ room: Int, _ number: Int64, seq: Int64) {
            lock.withLock {
                seen += 1
                if number <= rooms[room].lastNumber { duplicatesOrReorders += 1 }
                if seq <= rooms[room].lastSeq { seqViolations += 1 }
                rooms[room].lastNumber = max(rooms[room].lastNumber, number)
                rooms[room].lastSeq = max(rooms[room].lastSeq, seq)
                if rooms[room].pendingAcked.remove(number) == nil { rooms[room].pendingSeen.insert(number) }
            }
        }

        var missing: Int { lock.withLock { rooms.reduce(0) { $0 + $1.pendingAcked.count } } }
    }

    struct Sample {
        let seconds: Int
        let rssKiB: Int
        let fds: Int
        let connected: Int
        let roomdRssKiB: Int
        let acked: Int
    }

    enum Fault: String, CaseIterable {
        case cut, shortBlackhole = "short-blackhole", longBlackhole = "long-blackhole", down, latency, slicing, bandwidth, kill9 = "kill-9"
    }

    private static func sample(started: Date, connected: Int, roomdPid: Int32?, acked: Int) -> Sample {
        let roomdRss = roomdPid.map { residentKiB(pid: $0) } ?? 0
        return Sample(seconds: Int(Date().timeIntervalSince(started)), rssKiB: residentKiB(), fds: openDescriptorCount(), connected: connected,
                      roomdRssKiB: roomdRss, acked: acked)
    }

    private static func median(_ values: [Int]) -> Int {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    func testSoak_thousandsOfSessionsUnderRandomFaults_loseNothing_andStayFlat() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let minutes = Double(environment["SOAK_MINUTES"] ?? "") else {
            throw XCTSkip("the soak test runs with `make soak` (SOAK_MINUTES)")
        }
        let sessions = Int(environment["SOAK_SESSIONS"] ?? "") ?? 5000
        let rate = Double(environment["SOAK_RATE"] ?? "") ?? 100
        let seed = UInt64(environment["SOAK_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64(Int64.max))
        var generator = SeededGenerator(seed: seed)
        var report: [String] = []
        func say(_ line: String) {
            print("soak: " + line)
            report.append(line)
        }
        say("seed \(seed), \(minutes) min, \(sessions) sessions, \(rate) events/s")

        let secret = "soak"
        let roomd = RoomdProcess(secret: secret, arguments: ["--heartbeat-interval", "2", "--heartbeat-timeout", "10"])
        try roomd.start()
        let proxy = FaultProxy(targetPort: roomd.port)
        let loop = try EventLoop(name: "soak")
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(proxy.port)/v1/rooms")
        configuration.backoffFirst = .milliseconds(200)
        configuration.backoffCap = .seconds(2)
        configuration.requestTimeout = .seconds(10)
        configuration.loginTimeout = .seconds(60)

        // Two writer hosts and two reader hosts; each pair splits the rooms.
        let roomCount = sessions / 2
        let rooms = (0..<roomCount).map { "soak-\($0)" }
        let writers = try (0..<2).map { _ in try RoomHost(loop: loop, configuration: configuration) }
        let readers = try (0..<2).map { _ in try RoomHost(loop: loop, configuration: configuration) }
        let writerOf = (0..<roomCount).map { writers[$0 * writers.count / roomCount] }
        let readerOf = (0..<roomCount).map { readers[$0 * readers.count / roomCount] }
        let ledger = Ledger(rooms: roomCount)
        for reader in readers {
            reader.addObserver { event in
                switch event {
                case .magix(let magix):
                    guard let index = Int(magix.room.dropFirst(5)), let number = magix.payload.int64Value else { return }
                    ledger.received(index, number, seq: magix.seq)
                case .roomStateChanged(_, .reconnected, _, _):
                    ledger.lock.withLock { ledger.reconnected += 1 }
                case .roomStateChanged(_, .reconnectFailed, _, _):
                    ledger.lock.withLock { ledger.reconnectFailed += 1 }
                case .roomStateChanged(_, .kickOut, _, _):
                    ledger.lock.withLock { ledger.kicked += 1 }
                default: break
                }
            }
        }
        let token = { (user: String) -> String in
            let now = Int64(Date().timeIntervalSince1970)
            return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: "*", role: .writer, exp: now + 86_400, iat: now))
        }
        let writerToken = token("writer")
        let readerToken = token("reader")
        let loginStarted = Date()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, room) in rooms.enumerated() {
                group.addTask {
                    try await writerOf[index].loginRoom(room, user: LoginUser(id: "writer"), token: writerToken)
                    try await readerOf[index].loginRoom(room, user: LoginUser(id: "reader"), token: readerToken)
                }
            }
            try await group.waitForAll()
        }
        let allHosts = writers + readers
        let connected: @Sendable () -> Int = { allHosts.reduce(0) { $0 + $1.allRooms.filter { $0.phase == .connected }.count } }
        say("\(connected()) sessions logged in in \(String(format: "%.1f", Date().timeIntervalSince(loginStarted))) s")
        let fdsSettledStart = openDescriptorCount()

        // Traffic: 8 senders, each owning every 8th room, numbered per room.
        let senders = 8
        let traffic = (0..<senders).map { sender in
            Task {
                let mine = Array(stride(from: sender, to: roomCount, by: senders))
                let pause = Duration.seconds(Double(senders) / rate)
                var cursor = 0
                while !Task.isCancelled {
                    let index = mine[cursor % mine.count]
                    cursor += 1
                    try? await Task.sleep(for: pause)
                    guard let room = writerOf[index].room(rooms[index]) else { continue }
                    let number = ledger.lock.withLock {
                        ledger.rooms[index].next += 1
                        return ledger.rooms[index].next
                    }
                    do {
                        _ = try await room.dispatchMagixEvent("soak", payload: .int(number))
                        ledger.acknowledged(index, number)
                    } catch {
                        ledger.lock.withLock { ledger.unknownOutcome += 1 }
                    }
                }
            }
        }

        // Sampling every 10 s.
        let started = Date()
        let samples = LockedValue<[Sample]>([])
        let roomdPid = LockedValue<Int32?>(roomd.pid)
        let sampler = Task { @Sendable [connected, ledger, samples, roomdPid, started] in
            while !Task.isCancelled {
                let sample = Self.sample(started: started, connected: connected(), roomdPid: roomdPid.withLock { $0 },
                                         acked: ledger.lock.withLock { ledger.acked })
                samples.withLock { $0.append(sample) }
                try? await Task.sleep(for: .seconds(10))
            }
        }

        // Faults at random moments until the deadline.
        let deadline = started.addingTimeInterval(minutes * 60)
        var injected: [Fault: Int] = [:]
        while Date() < deadline {
            try await Task.sleep(for: .seconds(Double.random(in: 10...25, using: &generator)))
            guard Date() < deadline else { break }
            let fault = Fault.allCases.randomElement(using: &generator)!
            injected[fault, default: 0] += 1
            switch fault {
            case .cut:
                proxy.cut()
            case .shortBlackhole:  // under the client's 4 s liveness limit
                proxy.setMode(.blackhole)
                try await Task.sleep(for: .milliseconds(1500))
                proxy.setMode(.pass)
            case .longBlackhole:  // detected as dead, shorter than the server's heartbeat timeout
                proxy.setMode(.blackhole)
                try await Task.sleep(for: .seconds(6))
                proxy.setMode(.pass)
                proxy.cut()
            case .down:  // longer than the server's heartbeat timeout: others see delete then add
                proxy.setMode(.down)
                proxy.cut()
                try await Task.sleep(for: .seconds(12))
                proxy.setMode(.pass)
            case .latency:
                proxy.setFaults(.init(latency: .milliseconds(150)))
                try await Task.sleep(for: .seconds(15))
                proxy.setFaults(.none)
            case .slicing:
                proxy.setFaults(.init(sliceBytes: 256, sliceGap: .milliseconds(1)))
                try await Task.sleep(for: .seconds(15))
                proxy.setFaults(.none)
            case .bandwidth:
                proxy.setFaults(.init(bytesPerSecond: 200_000))
                try await Task.sleep(for: .seconds(15))
                proxy.setFaults(.none)
            case .kill9:
                roomd.kill9()
                try await Task.sleep(for: .milliseconds(Int.random(in: 200...3000, using: &generator)))
                try roomd.start()
                roomdPid.withLock { $0 = roomd.pid }
            }
        }
        proxy.setMode(.pass)
        proxy.setFaults(.none)
        say("faults injected: " + Fault.allCases.map { "\($0.rawValue) \(injected[$0, default: 0])" }.joined(separator: ", "))

        await eventually(180, "every session connected again") { connected() == sessions }
        for task in traffic { task.cancel() }
        for task in traffic { _ = await task.value }
        await eventually(120, "every acknowledged event delivered") { ledger.missing == 0 }
        sampler.cancel()
        _ = await sampler.value
        let fdsSettledEnd = openDescriptorCount()

        let recorded = samples.withLock { $0 }
        let warm = recorded.filter { Double($0.seconds) >= minutes * 60 * 0.2 }
        let third = max(1, warm.count / 3)
        let rssEarly = Self.median(warm.prefix(third).map(\.rssKiB))
        let rssLate = Self.median(warm.suffix(third).map(\.rssKiB))
        let (acked, seen, duplicates, seqViolations, unknown, reconnected, reconnectFailed, kicked, missing) = ledger.lock.withLock {
            (ledger.acked, ledger.seen, ledger.duplicatesOrReorders, ledger.seqViolations, ledger.unknownOutcome,
             ledger.reconnected, ledger.reconnectFailed, ledger.kicked, ledger.rooms.reduce(0) { $0 + $1.pendingAcked.count })
        }
        say("events: \(acked) acknowledged, \(seen) received, \(missing) lost, \(duplicates) duplicated or reordered, "
            + "\(seqViolations) seq violations, \(unknown) with unknown outcome (not counted)")
        say("sessions: \(connected()) of \(sessions) connected at the end; \(reconnected) RECONNECTED reports on the readers, "
            + "\(reconnectFailed) RECONNECT_FAILED, \(kicked) kicked")
        say("client RSS (median of the first and last thirds after warm-up): \(rssEarly / 1024) MiB -> \(rssLate / 1024) MiB; "
            + "max \((recorded.map(\.rssKiB).max() ?? 0) / 1024) MiB")
        say("client fds settled: \(fdsSettledStart) at start -> \(fdsSettledEnd) at end; max during faults \(recorded.map(\.fds).max() ?? 0)")
        say("roomd RSS max \((recorded.map(\.roomdRssKiB).max() ?? 0) / 1024) MiB (restarted by kill -9 \(injected[.kill9, default: 0]) times)")
        say("samples (s, client RSS MiB, fds, connected, roomd RSS MiB, acked):")
        for sample in recorded {
            say("  \(sample.seconds)\t\(sample.rssKiB / 1024)\t\(sample.fds)\t\(sample.connected)\t\(sample.roomdRssKiB / 1024)\t\(sample.acked)")
        }
        if let path = environment["SOAK_REPORT"] {
            try? report.joined(separator: "\n").appending("\n").write(toFile: path, atomically: true, encoding: .utf8)
        }

        XCTAssertEqual(missing, 0, "no acknowledged event lost")
        XCTAssertEqual(duplicates, 0, "each event received once, in order")
        XCTAssertEqual(seqViolations, 0, "each seq seen once, increasing")
        XCTAssertEqual(reconnectFailed, 0)
        XCTAssertEqual(kicked, 0)
        XCTAssertGreaterThan(acked, Int(minutes * 60 * rate * 0.3), "traffic actually flowed")
        XCTAssertLessThanOrEqual(fdsSettledEnd, fdsSettledStart + 4, "descriptors flat")
        XCTAssertLessThanOrEqual(rssLate, rssEarly + rssEarly / 10 + 8 * 1024, "client RSS flat (within 10% + 8 MiB)")

        for host in allHosts { await host.shutdown() }
        proxy.stop()
        try loop.shutdown()
        roomd.stop()
    }
}
