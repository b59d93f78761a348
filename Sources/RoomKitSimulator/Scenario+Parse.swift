import Foundation
import RoomKitProtocol

extension Scenario {
    /// Reads a scenario file; the error names the file and the field.
    public init(path: String) throws(ScenarioError) {
        let file = (path as NSString).lastPathComponent
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ScenarioError(file: file, field: "", problem: "cannot read \(path)")
        }
        let json: JSON
        do { json = try JSON.parse(Array(data)) } catch {
            throw ScenarioError(file: file, field: "", problem: "not valid JSON: \(error)")
        }
        try self.init(json: json, file: file)
    }

    /// Validates a parsed scenario: `{"seed"?, "user"?, "server"?, "steps": [...]}`.
    public init(json: JSON, file: String = "scenario") throws(ScenarioError) {
        func fail(_ field: String, _ problem: String) -> ScenarioError { ScenarioError(file: file, field: field, problem: problem) }
        guard let object = json.objectValue else { throw fail("", "must be a JSON object with \"steps\"") }
        for key in object.keys.sorted() where !["seed", "user", "server", "steps"].contains(key) {
            throw fail(key, "unknown field")
        }
        var seed: UInt64 = 1
        if let value = object["seed"] {
            guard let number = value.int64Value, number >= 0 else { throw fail("seed", "must be a non-negative integer") }
            seed = UInt64(number)
        }
        var user = LoginUser(id: "bot-1", name: "Bot")
        if let value = object["user"] {
            guard let id = value["id"]?.stringValue, !id.isEmpty else { throw fail("user.id", "must be a non-empty string") }
            user = LoginUser(id: id, name: value["name"]?.stringValue)
        }
        var server = SimulatedServer.Settings()
        if let value = object["server"] {
            guard let fields = value.objectValue else { throw fail("server", "must be an object") }
            for (key, number) in fields.sorted(by: { $0.key < $1.key }) {
                // Checked once (ExternalNumber): a day at most for the heartbeat,
                // 365 days for retention, so the virtual clock cannot overflow.
                let range = key == "sessionRetention" ? 1...Self.maxRetentionMilliseconds : ExternalNumber.heartbeatMilliseconds
                let ms: Int64
                do { ms = try ExternalNumber.integer(number, field: "server.\(key)", in: range) } catch {
                    throw fail("server.\(key)", "\(error.problem) (ms)")
                }
                switch key {
                case "heartbeatInterval": server.heartbeatInterval = ms
                case "heartbeatTimeout": server.heartbeatTimeout = ms
                case "sessionRetention": server.sessionRetention = ms
                default: throw fail("server.\(key)", "unknown field (heartbeatInterval, heartbeatTimeout, sessionRetention)")
                }
            }
        }
        guard let list = object["steps"]?.arrayValue else { throw fail("steps", "must be an array of steps") }
        var steps: [Step] = []
        for (index, value) in list.enumerated() {
            steps.append(try Self.step(value, index: index, fail: fail))
        }
        self.init(steps: steps, seed: seed, user: user, server: server)
    }

    /// The latest virtual time a step may name, and the longest duration
    /// (`at`, `for`, `in`, `within`): one day, in ms.
    static let maxStepMilliseconds: Int64 = 86_400_000
    /// The longest `server.sessionRetention`: 365 days, in ms.
    static let maxRetentionMilliseconds: Int64 = 31_536_000_000

    static let kinds = ["login", "logout", "image", "join", "leave", "magix", "state", "kick", "tokenWillExpire", "disconnect",
                        "serverRestart", "serverError", "expect"]

    private static func step(_ value: JSON, index: Int, fail: (String, String) -> ScenarioError) throws(ScenarioError) -> Step {
        let at = "steps[\(index)]"
        guard let object = value.objectValue else { throw fail(at, "must be an object {\"at\": ms, \"<kind>\": {...}}") }
        let time: Int64
        do {
            time = try ExternalNumber.integer(object["at"] ?? .null, field: "\(at).at", in: 0...maxStepMilliseconds)
        } catch {
            throw fail("\(at).at", "\(error.problem) (ms)")
        }
        let named = object.keys.filter { $0 != "at" }
        guard named.count == 1, let name = named.first, kinds.contains(name) else {
            throw fail(at, "must have \"at\" and exactly one of \(kinds.joined(separator: ", ")); has \(named.sorted())")
        }
        let body = object[name]!
        let path = "\(at).\(name)"
        func string(_ key: String) throws(ScenarioError) -> String {
            guard let text = body[key]?.stringValue, !text.isEmpty else { throw fail("\(path).\(key)", "must be a non-empty string") }
            return text
        }
        func milliseconds(_ key: String, default fallback: Int64? = nil) throws(ScenarioError) -> Int64 {
            guard let value = body[key] else {
                if let fallback { return fallback }
                throw fail("\(path).\(key)", "is required (ms)")
            }
            do {
                return try ExternalNumber.integer(value, field: "\(path).\(key)", in: 0...maxStepMilliseconds)
            } catch {
                throw fail("\(path).\(key)", "\(error.problem) (ms)")
            }
        }
        let kind: Kind
        switch name {
        case "login": kind = .login(room: try string("room"), writable: body["writable"]?.boolValue ?? true)
        case "logout": kind = .logout(room: try string("room"))
        case "image": kind = .image(room: try string("room"), url: try string("url"))
        case "join": kind = .join(room: try string("room"), user: try string("user"), name: body["name"]?.stringValue)
        case "leave": kind = .leave(room: try string("room"), user: try string("user"))
        case "magix":
            var to: [String]?
            if let list = body["to"] {
                guard let users = list.arrayValue?.compactMap(\.stringValue), users.count == list.arrayValue?.count else {
                    throw fail("\(path).to", "must be an array of user IDs")
                }
                to = users
            }
            kind = .magix(room: try string("room"), from: try string("from"), event: try string("event"),
                          payload: body["payload"] ?? .null, to: to)
        case "state":
            guard let patch = body["patch"]?.objectValue else { throw fail("\(path).patch", "must be an object (PROTOCOL.md §7)") }
            kind = .state(room: try string("room"), from: try string("from"), patch: patch)
        case "kick":
            let code = ErrorCode(rawValue: Int(body["code"]?.int64Value ?? 0))
            guard [ErrorCode.kickedDuplicateLogin, .kickedByAdmin, .kickedTokenExpired].contains(code) else {
                throw fail("\(path).code", "must be 1002050, 1002055 or 1002056")
            }
            kind = .kick(room: try string("room"), code: code, reason: body["reason"]?.stringValue ?? "kicked (simulated)")
        case "tokenWillExpire":
            kind = .tokenWillExpire(room: try string("room"), remaining: try milliseconds("in", default: 30_000))
        case "disconnect": kind = .disconnect(duration: try milliseconds("for"))
        case "serverRestart": kind = .serverRestart
        case "serverError":
            guard let code = body["code"]?.int64Value, code > 0 else { throw fail("\(path).code", "must be a positive error code") }
            kind = .serverError(code: ErrorCode(rawValue: Int(code)), message: body["message"]?.stringValue ?? "simulated error")
        default:
            let target: Expectation.Target
            if let event = body["event"]?.objectValue, body["action"] == nil {
                target = .event(event)
            } else if let action = body["action"]?.objectValue, body["event"] == nil {
                target = .action(action)
            } else {
                throw fail(path, "must have exactly one of \"event\" (fields of an event-log line) or \"action\" (fields of a request the bot sent)")
            }
            var count: Int?
            if let value = body["count"] {
                do {
                    count = Int(try ExternalNumber.integer(value, field: "\(path).count", in: 0...1_000_000))
                } catch {
                    throw fail("\(path).count", error.problem)
                }
            }
            kind = .expect(Expectation(target: target, within: try milliseconds("within", default: 1000), count: count))
        }
        return Step(at: time, kind: kind, index: index)
    }
}
