import Foundation
import RoomKit
import RoomKitProtocol

/// What the tour showed, for the summary.
struct TourReport: Sendable {
    var stepsDone: [String] = []
    /// Events committed while the bot was away, and how many of them it received afterwards.
    var missed = 0
    var recovered = 0
    var missedMagix = 0
    var recoveredMagix = 0
    var duplicates = 0
    var pong: String?
    var rewritten: (from: String, to: String)?
    var loggedOut: [String] = []
    /// Why the tour stopped early (nil: it finished).
    var failure: String?
}

/// The guided tour. Each step drives the engine into one or more of the
/// nine room state reasons and says what happened; the reasons themselves
/// are narrated as the bot's hosts raise them (`Demo.follow`).
struct Tour {
    let world: World
    let demo: Demo
    private var report = TourReport()
    private var console: Console { demo.console }
    private var pace: Pace { demo.options.pace }

    init(world: World, demo: Demo) {
        self.world = world
        self.demo = demo
    }

    mutating func play() async -> TourReport {
        let steps: [(String, (inout Tour) async throws -> Void)] = [
            ("a login with a bad token", { try await $0.badToken() }),
            ("switchRoom: the games crowd moves to arcade, and the bot follows", { try await $0.switchRoom() }),
            ("a forced connection drop while the rooms keep talking", { try await $0.connectionDrop() }),
            ("a duplicate login of the bot's user", { try await $0.duplicateLogin() }),
            ("!ping, answered by the C plugin echo-commands", { try await $0.ping() }),
            ("an image URL through the URL plugin url-rewrite", { try await $0.rewriteURL() }),
            ("the canary's roomd goes away for good", { try await $0.canaryLost() }),
            ("logout of a room the bot is not in", { try await $0.logoutUnknown() }),
            ("logoutRoom() of every room", { try await $0.logoutEverything() }),
        ]
        do {
            demo.step.withLock { $0 = "warming up: the rooms chat" }
            try await Task.sleep(for: pace.warmup)
            demo.showRooms(world)
            for (index, (title, body)) in steps.enumerated() {
                let heading = "\(index + 1)/\(steps.count) \(title)"
                demo.step.withLock { $0 = heading }
                console.log("── \(heading)")
                try await body(&self)
                report.stepsDone.append(title)
                if index == 2 || index == steps.count - 1 { demo.showRooms(world) }
                if index < steps.count - 1 { try await Task.sleep(for: pace.step) }
            }
            demo.step.withLock { $0 = "tour complete" }
        } catch is CancellationError {
            report.failure = "interrupted"
        } catch {
            report.failure = "\(error)"
            console.log("tour stopped: \(error)")
        }
        return report
    }

    // MARK: Steps

    /// LOGIN_FAILED: the server refuses a token signed with the wrong secret.
    private mutating func badToken() async throws {
        let forged = TokenMinter(secret: "not-the-secret").token(user: world.user.id, room: "vault")
        do {
            try await world.bot.loginRoom("vault", user: world.user, token: forged)
            throw TourError("vault accepted a forged token")
        } catch let error as RoomError where error.reason == .loginFailed {
            say("vault refused the forged token: \(error.code.rawValue) → LOGIN_FAILED, no retry")
        }
    }

    /// LOGOUT of the old room, LOGINING/LOGINED in the new one.
    private mutating func switchRoom() async throws {
        let movers = world.crowd.seated(in: "games").map(\.name).sorted()
        try await world.crowd.move(from: "games", to: "arcade")
        say("\(movers.joined(separator: ", ")) switched to arcade; now the bot")
        try await world.bot.switchRoom(from: "games", to: "arcade")
        say("the bot is in arcade with \(world.bot.room("arcade")?.roomMembers.count ?? 0) members")
    }

    /// RECONNECTING → RECONNECTED in every room, and the events committed
    /// meanwhile arrive after the resume (each once).
    private mutating func connectionDrop() async throws {
        for attempt in 1...3 {
            let rooms = world.bot.allRooms.filter { $0.phase == .connected }.map(\.id).sorted()
            world.stats.trackMagix(true)
            let before = Dictionary(uniqueKeysWithValues: rooms.map { ($0, world.bot.room($0)?.seq ?? 0) })
            world.outage.begin(rooms)
            say("dropping the bot's connection (\(rooms.count) rooms share it); the participants keep sending")
            world.bot.simulateConnectionLoss()
            await world.crowd.burst(in: rooms)
            try await waitUntil("every room back", timeout: .seconds(20)) { world.outage.isOver }
            let failed = world.outage.endings.filter { $0.value != .reconnected }
            guard failed.isEmpty else { throw TourError("not resumed: \(failed.map { "\($0.key) \($0.value)" })") }

            // What was committed after the bot's last seq, while it was away...
            var away: [String: Outage.Sent] = [:]
            for (room, sent) in world.outage.sent {
                let floor = before[room, default: 0]
                away[room] = Outage.Sent(seqs: sent.seqs.filter { $0 > floor }, magix: sent.magix.filter { $0 > floor })
            }
            // ...must all arrive: the room's seq covers it and every magix was raised.
            try await waitUntil("the missed events", timeout: .seconds(10)) {
                let seen = world.stats.trackedMagix
                return away.allSatisfy { room, sent in
                    (world.bot.room(room)?.seq ?? 0) >= (sent.seqs.max() ?? 0) && sent.magix.allSatisfy { seen[room]?[$0] != nil }
                }
            }
            let received = world.stats.trackMagix(false)
            for room in rooms {
                let sent = away[room] ?? Outage.Sent()
                let seen = received[room] ?? [:]
                let gotMagix = sent.magix.filter { seen[$0] != nil }.count
                report.missed += sent.seqs.count
                report.recovered += sent.seqs.filter { $0 <= (world.bot.room(room)?.seq ?? 0) }.count
                report.missedMagix += sent.magix.count
                report.recoveredMagix += gotMagix
                report.duplicates += sent.magix.filter { (seen[$0] ?? 0) > 1 }.count
                say("\(room): seq \(before[room, default: 0]) before the drop; \(sent.seqs.count) events committed while away "
                    + "(\(sent.magix.count) magix), \(gotMagix) magix received after RECONNECTED")
            }
            if report.missed > 0 { break }
            say("the bot was back before anything happened (attempt \(attempt)); dropping again")
        }
        say("recovered \(report.recovered) missed events after RECONNECTED (\(report.recoveredMagix)/\(report.missedMagix) magix, "
            + "\(report.duplicates) duplicates)")
        guard report.missed > 0, report.recovered == report.missed, report.recoveredMagix == report.missedMagix else {
            throw TourError("missed events were not all recovered")
        }
    }

    /// KICK_OUT: the same user logs in to support from another connection.
    private mutating func duplicateLogin() async throws {
        let impostor = try world.crowd.extraHost()
        say("another connection logs in to support as user '\(world.user.id)'")
        try await impostor.loginRoom("support", user: world.user)
        try await waitUntil("the kick", timeout: .seconds(5)) { world.bot.room("support")?.reason == .kickOut }
        say("support kicked the older session: \(world.bot.room("support")?.content.errorCode.rawValue ?? 0) "
            + "(duplicate login) → KICK_OUT")
        await impostor.shutdown()
        try await world.bot.loginRoom("support", user: world.user)
        say("the bot is back in support")
    }

    /// echo-commands (C) answers a `command` magix `!ping` with `reply` pong.
    private mutating func ping() async throws {
        guard let alice = world.crowd.people["alice"] else { throw TourError("alice is missing") }
        say("alice sends the command !ping in lobby")
        let reply = try await alice.ask("!ping", in: "lobby", timeout: .seconds(5))
        let text = String(decoding: reply.serialized(sortedKeys: true), as: UTF8.self)
        guard reply["text"]?.stringValue == "pong" else { throw TourError("unexpected reply \(text)") }
        report.pong = text
        say("alice got the bot's reply from echo-commands (C): \(text) → pong")
    }

    /// url-rewrite rewrites the image URL before it leaves the bot.
    private mutating func rewriteURL() async throws {
        guard let lobby = world.bot.room("lobby") else { throw TourError("the bot is not in lobby") }
        let original = "http://img.example.com/tour/roomkit.png"
        let image = Image(uuid: "tour-roomkit", url: original, x: 0, y: 0, width: 320, height: 200)
        let (seq, url) = try await lobby.insertImage(image)
        guard url != original else { throw TourError("the URL was not rewritten") }
        report.rewritten = (original, url)
        say("url-rewrite: \(original) → \(url) (inserted in lobby, seq \(seq))")
    }

    /// RECONNECT_FAILED: the canary's server stops; the window passes.
    private mutating func canaryLost() async throws {
        say("stopping the second roomd; the canary host may retry for \(pace.canaryWindow)")
        await world.canaryServer.stop()
        try await waitUntil("RECONNECT_FAILED", timeout: pace.canaryWindow + .seconds(10)) {
            world.canary.room("canary")?.reason == .reconnectFailed
        }
        say("canary gave up after its reconnect window → RECONNECT_FAILED, no more retries")
    }

    /// LOGOUT_FAILED: logoutRoom of a room ID the bot never joined.
    private mutating func logoutUnknown() async throws {
        do {
            try await world.bot.logoutRoom("nowhere")
            throw TourError("logout of nowhere succeeded")
        } catch let error as RoomError where error.reason == .logoutFailed {
            say("nowhere: \(error.code.rawValue) (not logged in) → LOGOUT_FAILED")
        }
    }

    /// LOGOUT in every room at once.
    private mutating func logoutEverything() async throws {
        report.loggedOut = await world.bot.logoutRoom()
        let stuck = report.loggedOut.filter { world.bot.room($0)?.reason != .logout }
        guard stuck.isEmpty else { throw TourError("not logged out: \(stuck)") }
        say("logged out of \(report.loggedOut.joined(separator: ", "))")
    }

    // MARK: Helpers

    private func say(_ text: String) {
        console.log("   " + text)
    }

    /// Polls `condition` every 20 ms until it holds; throws after `timeout`.
    private func waitUntil(_ what: String, timeout: Duration, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TourError("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
