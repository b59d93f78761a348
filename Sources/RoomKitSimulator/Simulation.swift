import Foundation
import Synchronization
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol

/// Runs a `Scenario` against a real `RoomHost` (the same engine a live bot
/// runs: session and connection machines, push apply, reconnect, resume,
/// token renewal) on a virtual clock, with an in-memory `SimulatedServer`
/// instead of a network. Attach what you want to test (a `PluginManager`,
/// your delegate or observer) to `host` before `run()`.
///
/// Virtual time advances from step to step and timer to timer; it waits
/// for real time only while the host's observers and plugins (which run on
/// their own queues) react, until everything is quiet. A 20-minute outage
/// takes well under a second. The same seed gives the same event log.
public final class Simulation: @unchecked Sendable {
    // @unchecked Sendable: its state is set in init; the server and the
    // environment are touched on the loop thread only, through runAndWait.
    public let loop: EventLoop
    public let host: RoomHost
    public let server: SimulatedServer
    public let scenario: Scenario
    private let environment: VirtualEnvironment
    private let recorder = Recorder()
    /// Whether work outside this process is done (e.g. process plugins have
    /// finished every event sent to them); `settle` waits for it, so that a
    /// run is repeatable by seed whatever the children's speed. Set before `run`.
    public var externalWorkIdle: @Sendable () -> Bool = { true }
    /// The virtual wall clock at time 0 (ms since the epoch): fixed, so logs repeat.
    public static let epoch: Int64 = 1_767_225_600_000  // 2026-01-01T00:00:00Z

    /// One event-log line, at virtual time `at` (ms since the simulation began).
    public struct LogLine: Sendable {
        public let at: Int64
        public let name: String
        public let fields: [String: JSON]
        /// Exactly as an event log writes it (`EventLogFormat`), newline included.
        public var bytes: [UInt8] { EventLogFormat.line(ts: Simulation.epoch + at, name: name, fields: fields) }
    }

    /// A failed `expect`.
    public struct Failure: Sendable, CustomStringConvertible {
        public let step: Int
        public let at: Int64
        public let message: String
        public var description: String { "step \(step) (at \(at) ms): \(message)" }
    }

    final class Recorder: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        private let lock = NSLock()
        private var lines: [LogLine] = []
        func add(_ line: LogLine) { lock.withLock { lines.append(line) } }
        var all: [LogLine] { lock.withLock { lines } }
        var count: Int { lock.withLock { lines.count } }
    }

    /// `configure` adjusts the host's configuration (the seeds' timeouts are
    /// the defaults). `seed` overrides the scenario's.
    public init(scenario: Scenario, seed: UInt64? = nil, logger: Logger = Logger(label: "roomkit.simulation"),
                configure: (inout RoomHostConfiguration) -> Void = { _ in }) throws {
        self.scenario = scenario
        server = SimulatedServer()
        server.settings = scenario.server
        loop = try EventLoop(name: "simulation", logger: logger)
        environment = VirtualEnvironment(server: server, seed: seed ?? scenario.seed, epoch: Self.epoch)
        let environment = self.environment
        server.clock = { environment.now }
        server.wall = { environment.wallMilliseconds }
        var configuration = RoomHostConfiguration(serverURL: "ws://simulated.invalid/v1/rooms")
        configure(&configuration)
        host = try RoomHost(loop: loop, configuration: configuration, logger: logger,
                            tokenProvider: SimulatedTokens(), environment: environment)
        let recorder = self.recorder
        host.addObserver { [environment] event in
            recorder.add(LogLine(at: environment.now, name: event.logName, fields: event.logFields))
        }
    }

    /// The event log so far.
    public var log: [LogLine] { recorder.all }

    /// Runs every step, then checks every `expect`; returns the failures (none: it passed).
    public func run() async throws -> [Failure] {
        for step in scenario.steps.sorted(by: { ($0.at, $0.index) < ($1.at, $1.index) }) {
            advance(to: step.at)
            perform(step)
            settle()
        }
        advance(to: scenario.end)
        settle()
        return check()
    }

    /// Shuts the host down (its logouts answered by the simulated server,
    /// at the run's last virtual time), then the loop.
    public func close() async throws {
        let host = self.host
        let done = LockedValue(false)
        let shutdown = Task {
            await host.shutdown()
            done.withLock { $0 = true }
        }
        let server = self.server
        while !done.withLock({ $0 }) {
            _ = try? loop.runAndWait { server.pump() }
            usleep(500)
        }
        await shutdown.value
        try loop.shutdown()
    }

    // MARK: Driving

    private func perform(_ step: Scenario.Step) {
        let host = self.host
        let user = scenario.user
        switch step.kind {
        case .login(let room, let writable):
            Task { _ = try? await host.loginRoom(room, user: user, writable: writable) }
        case .logout(let room):
            Task { _ = try? await host.logoutRoom(room) }
        case .image(let room, let url):
            let uuid = "image-\(step.index)"
            Task { _ = try? await host.room(room)?.insertImage(Image(uuid: uuid, url: url, x: 0, y: 0, width: 100, height: 100)) }
        case .join(let room, let name, let display):
            onLoop { $0.join(room: room, user: name, name: display) }
        case .leave(let room, let name):
            onLoop { $0.leave(room: room, user: name) }
        case .magix(let room, let from, let event, let payload, let to):
            onLoop { $0.magix(room: room, from: from, event: event, payload: payload, to: to) }
        case .state(let room, let from, let patch):
            onLoop { try? $0.setState(room: room, from: from, patch: patch) }
        case .kick(let room, let code, let reason):
            onLoop { $0.kick(room: room, code: code, reason: reason) }
        case .tokenWillExpire(let room, let remaining):
            onLoop { $0.tokenWillExpire(room: room, in: remaining) }
        case .disconnect(let duration):
            onLoop { $0.disconnect(for: duration) }
        case .serverRestart:
            onLoop { $0.restart() }
        case .serverError(let code, let message):
            onLoop { $0.pushError(code: code, message: message) }
        case .expect:
            break
        }
    }

    private func onLoop(_ body: @escaping (SimulatedServer) -> Void) {
        let server = self.server
        try? loop.runAndWait { body(server); server.pump() }
    }

    /// Moves virtual time to `target`, firing timers in order. Stops to let
    /// observers and plugins react (`settle`) whenever the host raised events.
    private func advance(to target: Int64) {
        let server = self.server
        let environment = self.environment
        let recorder = self.recorder
        while true {
            let (reached, raised) = (try? loop.runAndWait { () -> (Bool, Bool) in
                let before = recorder.count
                while true {
                    server.pump()
                    if recorder.count != before { return (false, true) }
                    guard let next = environment.nextDeadline, next <= target else {
                        if environment.now < target { environment.set(target) }
                        server.advance()
                        server.pump()
                        return (true, recorder.count != before)
                    }
                    if next > environment.now { environment.set(next) }
                    server.advance()
                    environment.fireDue()
                }
            }) ?? (true, false)
            if raised { settle() }
            if reached { return }
        }
    }

    /// Lets work off the loop (plugin queues, token renewal tasks) finish:
    /// pumps until nothing has happened for a few consecutive rounds.
    private func settle() {
        let server = self.server
        let recorder = self.recorder
        let host = self.host
        var quiet = 0
        var last = (-1, -1)
        nonisolated(unsafe) var renewalRounds = 0  // only the loop's closure below touches it, one call at a time
        while quiet < 4 {
            let state = (try? loop.runAndWait { () -> (Int, Int, Bool) in
                let worked = server.pump()
                // A renewal in flight (a task asking the token provider) is
                // work too, however slowly the machine schedules it.
                // Bounded (about 2 s of real time), in case a renewal waits
                // for virtual time itself (a request timeout).
                renewalRounds += host.tokenRenewalsPending ? 1 : 0
                return (recorder.count, server.actions.count, worked || (host.tokenRenewalsPending && renewalRounds < 10_000))
            }) ?? (0, 0, false)
            if state.2 || (state.0, state.1) != last || !externalWorkIdle() {
                quiet = 0
                last = (state.0, state.1)
            } else {
                quiet += 1
            }
            usleep(quiet == 0 ? 200 : 1000)
        }
    }

    // MARK: Expectations

    private func check() -> [Failure] {
        let lines = recorder.all
        let actions = (try? loop.runAndWait { self.server.actions }) ?? []
        var failures: [Failure] = []
        for step in scenario.steps {
            guard case .expect(let expectation) = step.kind else { continue }
            let window = step.at...(step.at + expectation.within)
            let seen: Int
            let what: String
            switch expectation.target {
            case .event(let fields):
                seen = lines.filter { window.contains($0.at) && Self.matches(fields, $0.fieldsWithName) }.count
                what = "event \(Self.text(fields))"
            case .action(let fields):
                seen = actions.filter { window.contains($0.at) && Self.matches(fields, $0.fields) }.count
                what = "action \(Self.text(fields))"
            }
            if let count = expectation.count, seen != count {
                failures.append(Failure(step: step.index, at: step.at,
                                        message: "expected \(count) × \(what) within \(expectation.within) ms, saw \(seen)"))
            } else if expectation.count == nil, seen == 0 {
                failures.append(Failure(step: step.index, at: step.at, message: "expected \(what) within \(expectation.within) ms, saw none"))
            }
        }
        return failures
    }

    /// `fields` as JSON with sorted keys, so messages repeat.
    static func text(_ fields: [String: JSON]) -> String {
        String(decoding: JSON.object(fields).serialized(sortedKeys: true), as: UTF8.self)
    }

    /// Whether `actual` has every field of `expected` (objects compared the same way, recursively).
    static func matches(_ expected: [String: JSON], _ actual: [String: JSON]) -> Bool {
        expected.allSatisfy { key, value in
            guard let other = actual[key] else { return false }
            if let inner = value.objectValue, let otherInner = other.objectValue { return matches(inner, otherInner) }
            return value == other
        }
    }
}

extension Simulation.LogLine {
    /// The fields as the log line has them: `event` is the line's type, and a
    /// magix event's own name is `magixEvent`.
    var fieldsWithName: [String: JSON] {
        var all = fields
        if let custom = all.removeValue(forKey: "event") { all["magixEvent"] = custom }
        all["event"] = .string(name)
        return all
    }
}

/// Tokens for the simulated server, which accepts any but `"invalid"`.
/// Each answer is a new token (numbered in the order asked, so the same
/// seed gives the same tokens), as a real token service's would be: the
/// engine never renews with the token it already holds.
final class SimulatedTokens: TokenProvider {
    private let issued = Mutex<Int>(0)

    func token(room: String, user: String) async throws -> String {
        let number = issued.withLock { count in
            count += 1
            return count
        }
        return "sim-\(user)-\(room)-\(number)"
    }
}
