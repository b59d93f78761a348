import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol

/// The dashboard's identity and detail routes (docs/DASHBOARD.md):
///
/// - `GET /v1/bot` — who the bot is and how it is: user, servers with each
///   connection's state, version, uptime, and the names of the error codes;
/// - `GET /v1/bot/activity?since=` — the Activity charts' history (`BotActivity`);
/// - `GET /v1/rooms/{id}` — one room: its fields, members, last events and plugin calls.
///
/// All are answered on the loop thread (the connection state and the activity ring live there).
extension ControlAPI {
    /// Answers the three routes. True when it answered. Loop thread.
    func serveBotRoutes(_ request: HTTPRequest, responder: HTTPResponder) -> Bool {
        guard request.method == "GET" else { return false }
        if request.path == "/v1/bot" {
            responder.respond(status: 200, text: botIdentity().jsonString)
            return true
        }
        if request.path == "/v1/bot/activity" {
            var since: Int64?
            if let text = request.queryValue("since") {
                guard let value = Int64(text), value >= 0 else {
                    responder.respond(status: 400, text: JSON.object([
                        "code": .int(Int64(ErrorCode.invalidArgument.rawValue)),
                        "message": .string("GET /v1/bot/activity: since must be ms since epoch (an integer ≥ 0), not \(text)"),
                    ]).jsonString)
                    return true
                }
                since = value
            }
            responder.respond(status: 200, text: runner.metrics.activity.json(since: since).jsonString)
            return true
        }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, parts[0].isEmpty, parts[1] == "v1", parts[2] == "rooms", !parts[3].isEmpty else { return false }
        let id = parts[3].removingPercentEncoding ?? parts[3]
        guard let room = runner.host.room(id) else {
            responder.respond(status: 404, text: JSON.object([
                "code": .int(Int64(ErrorCode.roomNotLoggedIn.rawValue)),
                "message": .string("GET /v1/rooms/\(id): the bot has never been in room \(id)"),
            ]).jsonString)
            return true
        }
        responder.respond(status: 200, text: roomDetail(room).jsonString)
        return true
    }

    /// `GET /v1/bot`. Loop thread (reads the connection state).
    func botIdentity() -> JSON {
        let config = runner.config
        let status = runner.host.connectionStatus
        var server: [String: JSON] = ["url": .string(config.server), "state": .string(status.state),
                                      "ready": .bool(status.isReady), "attempt": .int(Int64(status.attempt))]
        server["retryInMs"] = status.retryInMs.map(JSON.int) ?? .null
        let now = Date()
        var codes: [String: JSON] = [:]
        for code in ErrorCode.allKnown { codes[String(code.rawValue)] = .string(code.name ?? "") }
        return [
            "user": ["id": .string(config.user.id), "name": config.user.name.map(JSON.string) ?? .null],
            "servers": [.object(server)],
            "version": .string(runner.build.version), "revision": .string(runner.build.revision),
            "startedAt": .int(Int64(startedAt.timeIntervalSince1970 * 1000)),
            "uptimeSeconds": .int(Int64(now.timeIntervalSince(startedAt))),
            "fleet": .bool(config.fleet != nil),
            "errorCodes": .object(codes),
        ]
    }

    /// `GET /v1/rooms/{id}`: the room's fields (as in `GET /v1/rooms`), its
    /// members, its last event-log lines (newest last, at most 50 of the
    /// bot's last 2,000 room lines), plugin lines included, and each
    /// plugin's calls and failures in the room, per hook (`pluginCalls`).
    func roomDetail(_ room: Room) -> JSON {
        let c = room.content
        let lines = feed.recentLines(of: room.id, limit: 50)
        let events: [JSON] = lines.compactMap { line in
            let text = String(decoding: line.line.last == 10 ? line.line.dropLast() : line.line[...], as: UTF8.self)
            return try? JSON.parse(text)
        }
        return [
            "room": .string(room.id), "reason": .string(c.reason.rawValue), "phase": .string(c.phase.rawValue),
            "errorCode": .int(Int64(c.errorCode.rawValue)), "errorName": c.errorCode.name.map(JSON.string) ?? .null,
            "memberId": c.memberId.map(JSON.int) ?? .null, "members": .int(Int64(RoomRow.members(c))),
            "seq": .int(c.seq), "writable": .bool(c.writable),
            // As `members`: nobody is listed once the bot has no session in the room.
            "memberList": .array((RoomRow.members(c) == 0 ? [] : c.members).map { member in
                ["memberId": .int(member.memberId), "userId": .string(member.userId),
                 "name": member.name.map(JSON.string) ?? .null]
            }),
            "events": .array(events),
            "pluginCalls": .array(runner.plugins.roomCalls(room.id).map { row in
                ["plugin": .string(row.plugin), "hook": .string(row.hook), "calls": .int(Int64(row.calls)),
                 "failures": .int(Int64(row.failures)), "lastError": row.lastError.map(JSON.string) ?? .null,
                 "lastErrorAt": row.lastErrorAt.map(JSON.int) ?? .null]
            }),
        ]
    }
}
