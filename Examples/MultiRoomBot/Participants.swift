import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import Synchronization

/// The simulated people: each is one `RoomHost` (one connection) with
/// sessions in a few rooms, on a loop of their own, so the bot sees them as
/// ordinary remote members. Safe from any thread.
final class Crowd: Sendable {
    /// Who sits where at the start (every room has three people).
    static let seating: [String: [String]] = [
        "lobby": ["alice", "bob", "dave"],
        "design": ["alice", "carol", "erin"],
        "support": ["bob", "carol", "frank"],
        "ops": ["bob", "dave", "erin"],
        "games": ["alice", "dave", "frank"],
    ]
    static let rooms = ["lobby", "design", "support", "ops", "games"]

    let loop: EventLoop
    let people: [String: Participant]
    private let seats = LockedValue<[String: [String]]>(Crowd.seating)
    private let serverURL: String
    private let minter: TokenMinter
    private let logger: Logger

    init(serverURL: String, minter: TokenMinter, pace: Duration, outage: Outage, logger: Logger) throws {
        self.serverURL = serverURL
        self.minter = minter
        self.logger = logger
        loop = try EventLoop(name: "participants", logger: logger)
        var people: [String: Participant] = [:]
        for name in Set(Self.seating.values.joined()) {
            let user = LoginUser(id: name, name: name.capitalized)
            people[name] = Participant(user: user, host: try Self.host(loop: loop, url: serverURL, minter: minter, logger: logger),
                                       pace: pace, outage: outage)
        }
        self.people = people
    }

    private static func host(loop: EventLoop, url: String, minter: TokenMinter, logger: Logger) throws -> RoomHost {
        var configuration = RoomHostConfiguration(serverURL: url)
        configuration.backoffFirst = .milliseconds(200)
        configuration.loginTimeout = .seconds(10)
        return try RoomHost(loop: loop, configuration: configuration, logger: logger, tokenProvider: minter.provider)
    }

    /// One more host on the participants' loop (the tour's impostor).
    func extraHost() throws -> RoomHost {
        try Self.host(loop: loop, url: serverURL, minter: minter, logger: logger)
    }

    /// The rooms people are in now (after the tour's move, arcade instead of games).
    var currentRooms: [String] {
        seats.withLock { Array($0.keys) }.sorted()
    }

    /// The people in `room` now.
    func seated(in room: String) -> [Participant] {
        seats.withLock { $0[room] ?? [] }.compactMap { people[$0] }
    }

    /// Everyone logs in to their rooms and starts to act.
    func enter() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (room, names) in Self.seating {
                for name in names {
                    guard let person = people[name] else { continue }
                    group.addTask { try await person.join(room) }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Everyone in `from` switches to `to`.
    func move(from: String, to: String) async throws {
        let movers = seated(in: from)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for person in movers { group.addTask { try await person.move(from: from, to: to) } }
            try await group.waitForAll()
        }
        seats.withLock { seats in
            seats[to] = seats.removeValue(forKey: from)
        }
    }

    /// Each person in `rooms` says something at once (the tour's drop).
    func burst(in rooms: [String]) async {
        await withTaskGroup(of: Void.self) { group in
            for room in rooms {
                for person in seated(in: room) {
                    group.addTask { await person.say("anyone there? the bot just dropped", in: room) }
                }
            }
        }
    }

    /// Stops every activity, logs everyone out and closes the loop.
    func leave() async {
        await withTaskGroup(of: Void.self) { group in
            for person in people.values {
                group.addTask {
                    person.stopAll()
                    await person.host.shutdown()
                }
            }
        }
        try? loop.shutdown()
    }
}

/// One simulated person. Every action's sequence number is reported to the
/// `Outage` tally, so the tour can tell which events the bot missed.
final class Participant: Sendable {
    let user: LoginUser
    let host: RoomHost
    private let pace: Duration
    private let outage: Outage
    private let activities = LockedValue<[String: Task<Void, Never>]>([:])

    init(user: LoginUser, host: RoomHost, pace: Duration, outage: Outage) {
        self.user = user
        self.host = host
        self.pace = pace
        self.outage = outage
    }

    var name: String { user.id }

    func join(_ roomID: String) async throws {
        try await host.loginRoom(roomID, user: user)
        try await host.room(roomID)?.publishStream("cam-\(user.id)", extraInfo: "{\"codec\":\"vp8\"}")
        startActivity(in: roomID)
    }

    func move(from: String, to: String) async throws {
        stopActivity(in: from)
        try await host.switchRoom(from: from, to: to)
        try await host.room(to)?.publishStream("cam-\(user.id)")
        startActivity(in: to)
    }

    func stopAll() {
        let all = activities.withLock { tasks in defer { tasks.removeAll() }; return Array(tasks.values) }
        for task in all { task.cancel() }
    }

    private func stopActivity(in roomID: String) {
        activities.withLock { $0.removeValue(forKey: roomID) }?.cancel()
    }

    private func startActivity(in roomID: String) {
        let task = Task { [self] in
            var step = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: pace * Double.random(in: 0.4...1.6))
                guard !Task.isCancelled, let room = host.room(roomID) else { continue }
                step += 1
                await act(in: room, step: step)
            }
        }
        activities.withLock { $0[roomID] = task }
    }

    /// Mostly chat; sometimes global state, an image, or a stream toggle.
    private func act(in room: Room, step: Int) async {
        do {
            switch Int.random(in: 0..<20) {
            case 0..<12:
                await say(Self.lines.randomElement() ?? "hi", in: room.id)
            case 12..<16:
                let seq = try await room.setGlobalState(["topic": .string(Self.topics.randomElement() ?? "plans"),
                                                         "lastEdit": .string(user.id), "edits": .int(Int64(step))])
                outage.note(room: room.id, seq: seq, magix: false)
            case 16..<18:
                let image = Image(uuid: "\(user.id)-\(step)", url: "http://img.example.com/\(user.id)/\(step).png",
                                  x: Double.random(in: -400...400), y: Double.random(in: -300...300), width: 160, height: 120)
                let (seq, _) = try await room.insertImage(image)
                outage.note(room: room.id, seq: seq, magix: false)
            default:
                let stream = "cam-\(user.id)"
                let seq = room.streams.contains { $0.id == stream }
                    ? try await room.unpublishStream(stream)
                    : try await room.publishStream(stream)
                outage.note(room: room.id, seq: seq, magix: false)
            }
        } catch {
            // Not logged in (a switch in progress) or the session is resuming: skip a beat.
        }
    }

    /// A chat line (magix `chat`).
    func say(_ text: String, in roomID: String) async {
        guard let room = host.room(roomID),
              let seq = try? await room.dispatchMagixEvent("chat", payload: ["text": .string(text)]) else { return }
        outage.note(room: roomID, seq: seq, magix: true)
    }

    /// Sends a `command` magix (e.g. `!ping`) and waits for the `reply`
    /// addressed to this member (echo-commands answers with `to`: our member ID).
    func ask(_ command: String, in roomID: String, timeout: Duration) async throws -> JSON {
        guard let room = host.room(roomID), let me = room.memberId else {
            throw TourError("\(name) is not in \(roomID)")
        }
        let (replies, continuation) = AsyncStream<JSON>.makeStream()
        let listener = room.addMagixEventListener("reply") { event in
            if event.payload["to"]?.int64Value == me { continuation.yield(event.payload) }
        }
        defer { listener.cancel() }
        try await room.dispatchMagixEvent("command", payload: .string(command))
        return try await withThrowingTaskGroup(of: JSON?.self) { group in
            group.addTask {
                for await reply in replies { return reply }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll(); continuation.finish() }
            guard let first = try await group.next(), let reply = first else {
                throw TourError("no reply to \(command) within \(timeout)")
            }
            return reply
        }
    }

    static let lines = [
        "morning all", "did the build go green?", "shipping it", "who has the notes?", "lgtm",
        "brb", "coffee?", "that demo was slick", "can someone review #42?", "on it",
    ]
    static let topics = ["roadmap", "retro", "launch", "bug bash", "planning"]
}

/// Counts the events participants commit to rooms while the bot is away
/// (from the forced drop until the bot's session in that room is back).
final class Outage: Sendable {
    struct Sent: Sendable {
        var seqs: [Int64] = []
        var magix: [Int64] = []
    }
    private struct State {
        var away: Set<String> = []
        /// Rooms whose RECONNECTING has been seen (only a reason after it ends the absence).
        var lost: Set<String> = []
        var sent: [String: Sent] = [:]
        var endings: [String: RoomReason] = [:]
    }
    private let state = LockedValue(State())

    /// The bot is about to drop out of `rooms`.
    func begin(_ rooms: [String]) {
        state.withLock { $0 = State(away: Set(rooms)) }
    }

    /// A participant's action in `room` was committed with `seq`.
    func note(room: String, seq: Int64, magix: Bool) {
        state.withLock { state in
            guard state.away.contains(room) else { return }
            state.sent[room, default: Sent()].seqs.append(seq)
            if magix { state.sent[room, default: Sent()].magix.append(seq) }
        }
    }

    /// The bot's session in `room` reported `reason`: the first reason after
    /// its RECONNECTING (RECONNECTED, or a failure) ends its absence.
    func bot(_ reason: RoomReason, in room: String) {
        state.withLock { state in
            guard state.away.contains(room) else { return }
            if reason == .reconnecting {
                state.lost.insert(room)
            } else if state.lost.contains(room) {
                state.away.remove(room)
                state.endings[room] = reason
            }
        }
    }

    var isOver: Bool { state.withLock { $0.away.isEmpty } }
    var endings: [String: RoomReason] { state.withLock { $0.endings } }
    var sent: [String: Sent] { state.withLock { $0.sent } }
}
