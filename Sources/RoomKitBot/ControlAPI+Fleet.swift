import RoomKitProtocol

/// The control API's fleet endpoints (docs/FLEET.md):
/// `GET /v1/fleet`, `POST /v1/fleet/rooms {"rooms": [...]}`,
/// `DELETE /v1/fleet/rooms/{room}`. 404 when the bot is not in fleet mode,
/// 503 when Redis cannot answer.
enum FleetControl {
    static func route(_ method: String, _ parts: [String], body: [UInt8], runner: BotRunner) async -> (Int, JSON) {
        guard let fleet = runner.fleet else {
            return (404, error(.invalidArgument, "this bot is not in fleet mode (bot.json has no \"fleet\")"))
        }
        do {
            switch (method, parts) {
            case ("GET", []):
                return (200, try await fleet.status())
            case ("POST", ["rooms"]):
                let list: [JSON]
                do {
                    list = try ControlBody(body, accepts: ["rooms": .array], requires: ["rooms"])["rooms"]?.arrayValue ?? []
                } catch {
                    return (400, self.error(.malformed, "\(error.message); the body is {\"rooms\": [room IDs]}"))
                }
                var rooms: [String] = []
                for (index, value) in list.enumerated() {
                    guard let room = value.stringValue, RoomID.isValid(room) else {
                        return (400, error(.invalidArgument, "rooms[\(index)] is not a valid room ID"))
                    }
                    rooms.append(room)
                }
                let added = try await fleet.addRooms(rooms)
                return (200, ["added": .int(Int64(added)), "rooms": .int(Int64(rooms.count))])
            case ("DELETE", let p) where p.count == 2 && p[0] == "rooms":
                guard RoomID.isValid(p[1]) else { return (400, error(.invalidArgument, "invalid room ID '\(p[1])'")) }
                let removed = try await fleet.removeRoom(p[1])
                return removed ? (200, ["removed": .string(p[1])]) : (404, error(.invalidArgument, "\(p[1]) is not in the fleet's room set"))
            default:
                return (404, error(.invalidArgument, "no such fleet endpoint: \(method) /v1/fleet/\(parts.joined(separator: "/"))"))
            }
        } catch {
            return (503, Self.error(.internalError, "fleet: \(error)"))
        }
    }

    private static func error(_ code: ErrorCode, _ message: String) -> JSON {
        ["code": .int(Int64(code.rawValue)), "message": .string(message)]
    }
}
