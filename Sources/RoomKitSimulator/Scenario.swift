import Foundation
import RoomKitProtocol

/// A scripted run for the simulator (docs/PLUGINS.md, "Test with the
/// simulator"): timed steps in virtual time, from `roombot simulate
/// --script FILE` or built in code.
public struct Scenario: Sendable {
    /// One timed step.
    public struct Step: Sendable {
        /// Virtual time, ms since the simulation began.
        public var at: Int64
        public var kind: Kind
        /// Its position in the script (0-based), for messages.
        public var index: Int

        public init(at: Int64, kind: Kind, index: Int = 0) {
            self.at = at
            self.kind = kind
            self.index = index
        }
    }

    public enum Kind: Sendable {
        /// The bot logs in to a room (as `roombot` would for a configured room).
        case login(room: String, writable: Bool)
        /// The bot logs out of a room.
        case logout(room: String)
        /// The bot inserts an image into the room's current scene, as an app
        /// would (its URL passes through the plugins' URL interrupters).
        case image(room: String, url: String)
        /// Another user joins or leaves a room.
        case join(room: String, user: String, name: String?)
        case leave(room: String, user: String)
        /// Another user sends a magix event or changes the room state.
        case magix(room: String, from: String, event: String, payload: JSON, to: [String]?)
        case state(room: String, from: String, patch: [String: JSON])
        /// The server kicks the bot (1002050, 1002055 or 1002056).
        case kick(room: String, code: ErrorCode, reason: String)
        /// The server warns that the bot's token expires in `remaining` ms
        /// (kicked with 1002056 then unless renewed).
        case tokenWillExpire(room: String, remaining: Int64)
        /// Every connection drops; new ones are refused for `duration` ms.
        case disconnect(duration: Int64)
        /// The server restarts having lost every session.
        case serverRestart
        /// The server pushes an `error` (§8) to the bot: the host raises
        /// `throwError`, which reaches the plugins' `throw_error`.
        case serverError(code: ErrorCode, message: String)
        /// Something must (or must not) happen within `within` ms of `at`.
        case expect(Expectation)
    }

    /// What an `expect` step asks for.
    public struct Expectation: Sendable {
        public enum Target: Sendable {
            /// An event-log line whose fields include these (`{"event": "roomStateChanged", "reason": …}`).
            case event([String: JSON])
            /// A request the bot (a plugin or the app) sent, as the server saw it
            /// (`{"op": "magix", "event": "reply", "to": ["alice"]}`).
            case action([String: JSON])
        }
        public var target: Target
        public var within: Int64
        /// Exactly this many; nil: at least one.
        public var count: Int?

        public init(target: Target, within: Int64 = 1000, count: Int? = nil) {
            self.target = target
            self.within = within
            self.count = count
        }
    }

    public var steps: [Step]
    /// The jitter seed (`--seed` overrides).
    public var seed: UInt64
    /// The bot's user.
    public var user: LoginUser
    /// Server settings (heartbeat, retention).
    public var server: SimulatedServer.Settings
    /// When the run ends: the last step, or the end of the last expectation's window.
    public var end: Int64 {
        steps.map { step -> Int64 in
            if case .expect(let expectation) = step.kind { return step.at + expectation.within }
            return step.at
        }.max() ?? 0
    }

    public init(steps: [Step], seed: UInt64 = 1, user: LoginUser = LoginUser(id: "bot-1", name: "Bot"),
                server: SimulatedServer.Settings = SimulatedServer.Settings()) {
        self.steps = steps.enumerated().map { index, step in var step = step; step.index = index; return step }
        self.seed = seed
        self.user = user
        self.server = server
    }
}

/// A problem in a scenario file, naming the file and the field.
public struct ScenarioError: Error, CustomStringConvertible, Sendable {
    public let file: String
    public let field: String
    public let problem: String
    public var description: String { field.isEmpty ? "\(file): \(problem)" : "\(file): \(field): \(problem)" }
}
