import Foundation
import RoomKitLoop
import RoomKitProtocol

extension RoomServer {
    public func webServer(_ server: WebServer, didReceive request: HTTPRequest, responder: HTTPResponder) {
        // Group commit: what this turn wrote is committed (and its messages
        // sent) before an HTTP reader can see it.
        commitPending()
        let now = wallMilliseconds()
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        do {
            try checkListener(server, parts: parts, request: request)
            switch (request.method, parts.count, parts) {
            case ("GET", 1, ["healthz"]):
                responder.respond(status: 200, contentType: "text/plain", text: "ok")
            case ("GET", 1, ["metrics"]):
                responder.respond(status: 200, contentType: "text/plain; version=0.0.4", text: metricsText())
            case ("GET", 4, _) where parts[0] == "v1" && parts[1] == "rooms" && parts[3] == "recording":
                try recording(room: parts[2], request: request, responder: responder, now: now)
            case ("GET", 3, ["v1", "rooms", "recording"]):
                // The room as a query parameter: reaches `.` and `..`, which
                // libwebsockets normalises out of a path (docs/PROTOCOL.md).
                try recording(room: try roomParameter(request), request: request, responder: responder, now: now)
            case ("POST", 5, _) where parts[0] == "v1" && parts[1] == "admin" && parts[2] == "rooms" && parts[4] == "kick":
                try adminKick(room: parts[3], request: request, responder: responder, now: now)
            case ("POST", 4, ["v1", "admin", "rooms", "kick"]):
                try adminKick(room: try roomParameter(request), request: request, responder: responder, now: now)
            case ("GET", 3, ["v1", "admin", "rooms"]):
                _ = try authorize(request, room: "*", now: now, admin: true)
                let list = rooms.values.sorted { $0.id < $1.id }.map { room -> JSON in
                    ["room": .string(room.id), "members": .int(Int64(room.visibleCount)), "seq": .int(room.seq)]
                }
                responder.respond(status: 200, text: JSON.array(list).jsonString)
            default:
                throw HTTPFailure(404, .invalidArgument, "no such endpoint: \(request.method) \(request.path)")
            }
        } catch let failure as HTTPFailure {
            responder.respond(status: failure.status, text: JSON.object([
                "code": .int(Int64(failure.code.rawValue)), "message": .string(failure.message),
            ]).jsonString)
        } catch {
            responder.respond(status: 500, text: #"{"code":1009500,"message":"internal error"}"#)
        }
    }

    /// The `room` query parameter of the query-form endpoints (a room ID
    /// that is only dots cannot be a path segment). Missing: 400 1009001.
    private func roomParameter(_ request: HTTPRequest) throws -> String {
        guard let room = request.queryValue("room") else {
            throw HTTPFailure(400, .malformed, "the room query parameter is required")
        }
        return room
    }

    /// Bearer token for `room` (or `*`); admin role when `admin`. 401 when
    /// missing or invalid, 403 for the wrong room or role.
    private func authorize(_ request: HTTPRequest, room: String, now: Int64, admin: Bool) throws -> TokenClaims {
        guard let token = request.bearerToken else {
            noteTokenRejected("missing bearer token", in: "\(request.method) \(request.path)", room: room, connection: nil, now: now)
            throw HTTPFailure(401, .tokenInvalid, "missing bearer token")
        }
        let claims: TokenClaims
        do {
            claims = try signer.verify(token, now: now / 1000)
        } catch {
            noteTokenRejected("\(error)", in: "\(request.method) \(request.path)", room: room, connection: nil, now: now)
            throw HTTPFailure(401, .tokenInvalid, "token rejected: \(error.reason)")
        }
        if admin && claims.role != .admin {
            throw HTTPFailure(403, .notPermitted, "an admin token is required")
        }
        if !claims.allows(room: room) {
            throw HTTPFailure(403, .notPermitted, "token is not for room \(room)")
        }
        return claims
    }

    /// PROTOCOL.md §10, plus the slice extension of docs/PROTOCOL.md
    /// ("Recording slices"): `sliceStart`/`sliceEnd` (ms after
    /// `beginTimestamp`, half-open) narrow the frames and move the snapshot to
    /// the slice's start; `snapshot=0` leaves the snapshot out. The seek cost
    /// is the nearest stored snapshot plus the events after it.
    private func recording(room roomID: String, request: HTTPRequest, responder: HTTPResponder, now: Int64) throws {
        guard RoomID.isValid(roomID) else { throw HTTPFailure(404, .invalidArgument, "invalid room ID") }
        _ = try authorize(request, room: roomID, now: now, admin: false)
        guard let room = rooms[roomID] else { throw HTTPFailure(404, .invalidArgument, "unknown room \(roomID)") }
        // Every number is checked once against its documented range
        // (RecordingWindow, through ExternalNumber): no sum can overflow.
        let window: RecordingWindow
        do {
            window = try RecordingWindow(query: request.queryValue, created: room.created, now: now)
        } catch {
            throw HTTPFailure(400, error.code, error.message)
        }
        let (begin, end, sliceStart, sliceFrom, sliceTo) = (window.begin, window.end, window.sliceStart, window.sliceFrom, window.sliceTo)
        let wantsSnapshot = !["0", "false"].contains(request.queryValue("snapshot") ?? "")

        let query = RecordingRequest(room: roomID, begin: begin, end: end, sliceStart: sliceStart, sliceEnd: window.answeredSliceEnd,
                                     sliceFrom: sliceFrom, sliceTo: sliceTo, wantsSnapshot: wantsSnapshot,
                                     throughSeq: room.seq)
        if let delay = configuration.recordingDelay {
            loop.schedule(after: delay) { [self] in startRecording(query, responder: responder) }
        } else {
            startRecording(query, responder: responder)
        }
    }

    private func adminKick(room roomID: String, request: HTTPRequest, responder: HTTPResponder, now: Int64) throws {
        // As recording: an ID that no room can have is 404 (PROTOCOL.md).
        guard RoomID.isValid(roomID) else { throw HTTPFailure(404, .invalidArgument, "invalid room ID") }
        _ = try authorize(request, room: roomID, now: now, admin: true)
        let body: JSON
        do {
            body = try JSON.parse(request.body)
        } catch {
            throw HTTPFailure(400, .malformed, "body is not JSON: \(error)")
        }
        guard let user = body["user"]?.stringValue else {
            throw HTTPFailure(400, .malformed, "body.user must be a string")
        }
        let reason = body["reason"]?.stringValue ?? "kicked by admin"
        var kicked = 0
        if let room = rooms[roomID] {
            for session in room.sessions.values where session.userId == user && session.endedCode == nil {
                end(session, code: .kickedByAdmin, reason: reason, now: now)
                kicked += 1
            }
        }
        responder.respond(status: 200, text: JSON.object(["kicked": .int(Int64(kicked))]).jsonString)
    }

    func metricsText() -> String {
        exporter.render(self)
    }
}

/// An HTTP error answer: status plus the protocol code and message body.
struct HTTPFailure: Error {
    let status: Int
    let code: ErrorCode
    let message: String
    init(_ status: Int, _ code: ErrorCode, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }
}
