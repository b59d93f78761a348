import Foundation
import RoomKit
import RoomKitLoop
import RoomKitPluginHost
import RoomKitProtocol

/// The control API (CLI.md): HTTP/1.1 + JSON on `--control`, loopback by
/// default. Each endpoint answers once the outcome is known (a login answers
/// at LOGINED or LOGIN_FAILED).
final class ControlAPI: WebServerDelegate, @unchecked Sendable {
    // @unchecked Sendable: `runner` is unowned (the runner outlives its API);
    // the listener is the loop's, checked at run time (`LoopBound`).
    unowned let runner: BotRunner
    /// The listener, the loop's own: touched anywhere else, it traps.
    private let server: LoopBound<WebServer?>
    /// Its bound port, for any thread (tests, `roombot run`'s "control on" line).
    private let boundPort = LockedValue<Int?>(nil)
    /// The live event stream and each room's last event time (the dashboard's).
    let feed: EventFeed
    /// When the bot started (the control API is made at start): `GET /v1/bot`'s uptime.
    let startedAt = Date()

    init(runner: BotRunner) {
        self.runner = runner
        server = LoopBound(nil, loop: runner.loop)
        feed = EventFeed(loop: runner.loop, settings: EventStreamSettings(), logger: runner.logger)
        feed.attach(to: runner.events)
    }

    /// The bound port once listening; nil before and after. Any thread.
    var port: Int? { boundPort.withLock { $0 } }

    /// Binds. Loop thread only (checked).
    func listen(host: String, port: Int) throws {
        var configuration = WebServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.webSocketPath = nil
        let listener = try WebServer(loop: runner.loop, configuration: configuration, delegate: self, logger: runner.logger)
        server.value = listener
        boundPort.withLock { $0 = listener.port }
    }

    /// Ends the streams and stops listening. Loop thread only (checked).
    func stop() {
        feed.stop()
        server.value?.stop()
        server.value = nil
        boundPort.withLock { $0 = nil }
    }

    func webServer(_ server: WebServer, didAccept connection: WebSocketConnection) {
        connection.close(code: 1008, reason: "no WebSocket endpoint here")
    }

    func webServer(_ server: WebServer, didReceive request: HTTPRequest, responder: HTTPResponder) {
        let runner = self.runner
        if runner.config.controlToken == nil, let refusal = Self.refuseNonLoopback(request) {
            responder.respond(status: 403, text: Self.error(.notPermitted, refusal).jsonString)
            return
        }
        if serveDashboardPage(request, responder: responder) { return }
        if let required = runner.config.controlToken, !Self.constantTimeEqual(request.bearerToken ?? "", required),
           request.path != "/healthz" {
            responder.respond(status: 401, text: Self.error(.tokenInvalid, "the control API needs Authorization: Bearer <controlToken>").jsonString)
            return
        }
        if serveDashboardData(request, responder: responder) { return }
        if serveBotRoutes(request, responder: responder) { return }
        Task {
            let (status, body) = await Self.route(request, runner: runner)
            if status == 200, request.path == "/metrics" || request.path == "/healthz" || request.path == "/readyz" {
                responder.respond(status: 200, contentType: "text/plain; version=0.0.4", text: body.stringValue ?? "")
            } else {
                responder.respond(status: status, text: body.jsonString)
            }
        }
    }

    /// Without a `controlToken` the API listens on loopback only, but a web
    /// page the operator opens can still reach it: through DNS rebinding (its
    /// own name resolving to 127.0.0.1, so the browser sends `Host: evil.example`)
    /// or with a cross-site form POST (`Origin: https://evil.example`). Such a
    /// request names a non-loopback host in `Host` or `Origin`; refuse it.
    /// Returns why, or nil when the request may proceed.
    static func refuseNonLoopback(_ request: HTTPRequest) -> String? {
        if let host = request.host, !isLoopbackName(authorityHost(host)) {
            return "the control API has no controlToken, so it answers only requests addressed to a loopback name (Host: \(host)); set controlToken to reach it by another name"
        }
        if let origin = request.origin, origin != "null" {
            let authority = origin.range(of: "://").map { String(origin[$0.upperBound...]) } ?? origin
            if !isLoopbackName(authorityHost(authority)) {
                return "the control API has no controlToken, so it refuses requests from web pages of other origins (Origin: \(origin))"
            }
        } else if request.origin == "null" {
            return "the control API has no controlToken, so it refuses requests from opaque origins (Origin: null)"
        }
        return nil
    }

    /// The host part of `name`, `name:port`, `[v6]` or `[v6]:port`.
    static func authorityHost(_ authority: String) -> String {
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            return String(authority[authority.index(after: authority.startIndex)..<close])
        }
        if let colon = authority.lastIndex(of: ":") { return String(authority[..<colon]) }
        return authority
    }

    static func isLoopbackName(_ host: String) -> Bool {
        let name = host.lowercased()
        if name == "localhost" || name.hasSuffix(".localhost") || name == "::1" { return true }
        // 127.0.0.0/8, written as a dotted quad.
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    private static func route(_ request: HTTPRequest, runner: BotRunner) async -> (Int, JSON) {
        let parts = request.path.split(separator: "/").map(String.init)
        let host = runner.host
        do {
            switch (request.method, parts) {
            case ("GET", ["healthz"]):
                // Liveness: the process and its loop answer.
                return (200, "ok")
            case ("GET", ["readyz"]):
                // Readiness: every room the bot should be in is LOGINED or RECONNECTED.
                let notReady = runner.roomsNotReady
                if notReady.isEmpty { return (200, "ready") }
                return (503, ["ready": false, "notReady": .array(notReady.map {
                    ["room": .string($0.room), "reason": .string($0.reason.rawValue), "errorCode": .int(Int64($0.errorCode.rawValue))]
                })])
            case ("GET", ["metrics"]):
                return (200, .string(runner.metrics.exposition(host: host, plugins: runner.plugins)))
            case ("GET", ["v1", "rooms"]):
                // The rooms the bot should be in, whatever their state, and
                // any other room with a live session; not rooms merely named
                // by a failed request or left through the control API.
                let wanted = Set(runner.targetRooms)
                let live: Set<RoomReason> = [.logining, .logined, .reconnecting, .reconnected]
                let listed = host.allRooms.filter { wanted.contains($0.id) || live.contains($0.reason) }
                let rooms = listed.sorted { $0.id < $1.id }.map { room -> JSON in
                    let c = room.content
                    return ["room": .string(room.id), "reason": .string(c.reason.rawValue), "phase": .string(c.phase.rawValue),
                            "errorCode": .int(Int64(c.errorCode.rawValue)), "memberId": c.memberId.map(JSON.int) ?? .null,
                            "members": .int(Int64(RoomRow.members(c))), "seq": .int(c.seq), "writable": .bool(c.writable)]
                }
                return (200, .array(rooms))
            case ("GET", ["v1", "plugins"]):
                return (200, .array(runner.plugins.reports.map { report -> JSON in
                    var fields: [String: JSON] = [
                        "name": .string(report.name), "status": .string(report.status.rawValue),
                        "hooks": .array(report.hooks.map(JSON.string)), "calls": .int(Int64(report.calls)),
                        "failures": .int(Int64(report.failures)), "meanMicroseconds": .double(report.meanMicroseconds),
                        "message": report.message.map(JSON.string) ?? .null, "isolation": .string(report.isolation.rawValue)]
                    if let process = report.process { fields["process"] = process.json }
                    return .object(fields)
                }))
            case ("POST", let p) where p.count == 4 && p[0] == "v1" && p[1] == "plugins" && p[3] == "reload":
                _ = try ControlBody(request.body, accepts: [:])
                return try reload(p[2], runner: runner)
            case ("PUT", let p) where p.count == 4 && p[0] == "v1" && p[1] == "plugins" && p[3] == "config":
                return putPluginConfig(p[2], body: request.body, runner: runner)
            case ("POST", ["v1", "logout"]):
                _ = try ControlBody(request.body, accepts: [:])
                let rooms = await host.logoutRoom()
                for room in rooms { runner.leftByOperator.withLock { _ = $0.insert(room) } }
                return (200, ["rooms": .array(rooms.map(JSON.string))])
            case ("POST", let p) where p.count == 4 && p[0] == "v1" && p[1] == "rooms":
                return try await roomAction(p[3], room: p[2], body: request.body, runner: runner)
            case (_, let p) where p.count >= 2 && p[0] == "v1" && p[1] == "fleet":
                return await FleetControl.route(request.method, Array(p.dropFirst(2)), body: request.body, runner: runner)
            default:
                return (404, error(.invalidArgument, "no such endpoint: \(request.method) \(request.path)"))
            }
        } catch let failure as RoomError {
            return (status(for: failure.code), error(failure.code, failure.message))
        } catch let failure as BodyError {
            return (400, error(.malformed, failure.message))
        } catch {
            return (500, Self.error(.internalError, "\(error)"))
        }
    }

    private static func roomAction(_ action: String, room: String, body: [UInt8], runner: BotRunner) async throws -> (Int, JSON) {
        let host = runner.host
        switch action {
        case "login":
            let fields = try ControlBody(body, accepts: ["token": .string, "writable": .boolean])
            do {
                // Without a token in the body the bot's auth supplies one; when
                // it has none, the engine reports LOGINING then LOGIN_FAILED 1002033.
                let handle = try await host.loginRoom(room, user: runner.config.user, token: fields["token"]?.stringValue,
                                                      tokenProvider: runner.tokens, writable: fields["writable"]?.boolValue ?? true)
                runner.operatorChose(room, joined: true)
                return (200, loginAnswer(handle))
            } catch let failure as RoomError {
                return (409, ["reason": "LOGIN_FAILED", "errorCode": .int(Int64(failure.code.rawValue)), "message": .string(failure.message)])
            }
        case "logout":
            _ = try ControlBody(body, accepts: [:])
            do {
                try await host.logoutRoom(room)
                runner.operatorChose(room, joined: false)
                return (200, ["reason": "LOGOUT", "room": .string(room)])
            } catch let failure as RoomError where failure.code == .logoutNotLoggedIn {
                return (404, ["reason": "LOGOUT_FAILED", "errorCode": .int(Int64(failure.code.rawValue))])
            }
        case "switch":
            let fields = try ControlBody(body, accepts: ["to": .string, "token": .string], requires: ["to"])
            guard let target = fields["to"]?.stringValue else { throw BodyError(message: "body.to must be a room ID") }
            do {
                // The engine checks the target (ID, already joined, token) before
                // leaving `room`; the state file follows the LOGOUT it reports.
                let handle = try await host.switchRoom(from: room, to: target, token: fields["token"]?.stringValue,
                                                       tokenProvider: runner.tokens)
                runner.operatorChose(room, joined: false)
                runner.operatorChose(target, joined: true)
                return (200, loginAnswer(handle))
            } catch let failure as RoomError {
                let reason = failure.reason == .logoutFailed ? "LOGOUT_FAILED" : "LOGIN_FAILED"
                return (409, ["reason": .string(reason), "errorCode": .int(Int64(failure.code.rawValue)), "message": .string(failure.message)])
            }
        case "state":
            let fields = try ControlBody(body, accepts: ["patch": .object], requires: ["patch"])
            guard let patch = fields["patch"]?.objectValue else { throw BodyError(message: "body.patch must be an object") }
            return (200, ["seq": .int(try await handle(room, host).setState(patch: patch))])
        case "magix":
            let fields = try ControlBody(body, accepts: ["event": .string, "payload": .any, "to": .strings], requires: ["event"])
            guard let event = fields["event"]?.stringValue else { throw BodyError(message: "body.event must be a string") }
            let to = fields["to"]?.arrayValue?.compactMap(\.stringValue)
            return (200, ["seq": .int(try await handle(room, host).dispatchMagixEvent(event, payload: fields["payload"] ?? .null, to: to))])
        case "images":
            let fields = try ControlBody(body, accepts: ["uuid": .string, "url": .string, "x": .number, "y": .number,
                                                         "width": .number, "height": .number]).fields
            let image: Image
            do { image = try Image(json: .object(fields)) } catch { throw BodyError(message: "body: \(error)") }
            let (seq, url) = try await handle(room, host).insertImage(image)
            return (200, ["seq": .int(seq), "url": .string(url)])
        case "scenes":
            let fields = try ControlBody(body, accepts: ["dir": .string, "scenes": .array, "index": .integer],
                                         requires: ["dir", "scenes"])
            guard let dir = fields["dir"]?.stringValue, let list = fields["scenes"]?.arrayValue else {
                throw BodyError(message: "body needs dir (string) and scenes (array)")
            }
            let scenes: [Scene]
            do { scenes = try list.map { (json) throws(ProtocolError) in try Scene(json: json) } } catch { throw BodyError(message: "body.scenes: \(error)") }
            return (200, ["seq": .int(try await handle(room, host).putScenes(dir: dir, scenes: scenes, index: fields["index"]?.intValue))])
        default:
            return (404, error(.invalidArgument, "no such action: \(action)"))
        }
    }

    /// Reloads one plugin from the manifest on disk (its library and config
    /// may have changed): the new library is mapped beside the old one and
    /// dispatch switches over; no room is touched.
    private static func reload(_ name: String, runner: BotRunner) throws -> (Int, JSON) {
        guard let path = runner.config.manifest else {
            return (404, Self.error(.invalidArgument, "no plugin manifest is configured"))
        }
        let manifest: PluginManifest
        do {
            manifest = try PluginManifest(path: path)
        } catch {
            return (400, Self.error(.invalidArgument, error.errors.map(\.description).joined(separator: "; ")))
        }
        guard let spec = manifest.plugins.first(where: { $0.name == name }) else {
            return (404, Self.error(.invalidArgument, "no plugin named \(name) in \(path)"))
        }
        do {
            try runner.plugins.reload(spec)
        } catch {
            return (409, Self.error(.invalidArgument, "reload of \(name) failed: \(error)"))
        }
        let report = runner.plugins.reports.first { $0.name == name }
        return (200, ["name": .string(name), "status": .string(report?.status.rawValue ?? "loaded")])
    }

    private static func handle(_ room: String, _ host: RoomHost) throws -> Room {
        guard let handle = host.room(room) else { throw RoomError(code: .roomNotLoggedIn, message: "not logged in to \(room)") }
        return handle
    }

    private static func loginAnswer(_ room: Room) -> JSON {
        let c = room.content
        return ["reason": .string(c.reason.rawValue), "room": .string(room.id), "errorCode": .int(Int64(c.errorCode.rawValue)),
                "memberId": c.memberId.map(JSON.int) ?? .null, "writable": .bool(c.writable), "seq": .int(c.seq)]
    }


    /// Compares without an early exit, so timing does not reveal the secret.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) {
            difference |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
        }
        return difference == 0
    }

    private static func error(_ code: ErrorCode, _ message: String) -> JSON {
        ["code": .int(Int64(code.rawValue)), "message": .string(message)]
    }

    private static func status(for code: ErrorCode) -> Int {
        switch code {
        case .roomNotLoggedIn, .logoutNotLoggedIn: return 404
        case .notPermitted: return 403
        case .tokenInvalid: return 401
        case .malformed, .invalidArgument, .unknownOp: return 400
        case .alreadyLoggedIn: return 409
        case .rateLimited: return 429
        case .connectionInterrupted, .timedOut: return 503
        default: return 500
        }
    }
}
