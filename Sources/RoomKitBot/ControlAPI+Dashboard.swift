import Foundation
import RoomKitLoop
import RoomKitProtocol

/// The dashboard's routes (docs/CLI.md, "Dashboard"):
///
/// - `GET /` — the page itself, which holds no data and so needs no token;
/// - `GET /v1/rooms?offset=&limit=&filter=` — one page of rooms (the plain
///   `GET /v1/rooms` keeps its CLI.md answer);
/// - `GET /v1/events/stream` — every event-log line from now on, as
///   Server-Sent Events.
///
/// The data routes sit behind the same bearer-token rule as the rest of the
/// control API; the page sends the token it asks the operator for.
extension ControlAPI {
    /// Answers `GET /` with the page. True when it answered. Loop thread.
    func serveDashboardPage(_ request: HTTPRequest, responder: HTTPResponder) -> Bool {
        guard request.method == "GET", request.path == "/" || request.path == "/index.html" else { return false }
        // A fresh nonce per answer: the page's one script and one style sheet
        // carry it, and the policy allows nothing else (no inline handlers,
        // no other origin).
        let nonce = (0..<2).map { _ in String(UInt64.random(in: .min ... .max), radix: 36) }.joined()
        let policy = "default-src 'none'; script-src 'nonce-\(nonce)'; style-src 'nonce-\(nonce)'; "
            + "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        let body = DashboardPage.html(nonce: nonce, tokenRequired: runner.config.controlToken != nil)
        responder.respond(HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", headers: [
            ("content-security-policy", policy), ("cache-control", "no-store"),
            ("referrer-policy", "no-referrer"), ("x-content-type-options", "nosniff"),
        ], body: Array(body.utf8)))
        return true
    }

    /// Answers the dashboard's data routes once the token was checked. True
    /// when it answered (or will, from a task). Loop thread.
    func serveDashboardData(_ request: HTTPRequest, responder: HTTPResponder) -> Bool {
        switch (request.method, request.path) {
        case ("GET", "/v1/events/stream"):
            feed.open(responder)
            return true
        case ("GET", "/v1/rooms"):
            let listing: RoomListing
            do {
                guard let parsed = try RoomListing.parse(HTTPRequestQuery(value: request.queryValue)) else { return false }
                listing = parsed
            } catch {
                responder.respond(status: 400, text: JSON.object([
                    "code": .int(Int64(ErrorCode.invalidArgument.rawValue)), "message": .string("GET /v1/rooms: \(error.message)"),
                ]).jsonString)
                return true
            }
            let host = runner.host, feed = self.feed
            // Off the loop: at 100,000 rooms the filter and sort take milliseconds.
            Task {
                let times = feed.lastEventTimes
                let rows = host.allRooms.map { RoomRow($0, lastEventTs: times[$0.id]) }
                responder.respond(status: 200, text: listing.page(rows).jsonString)
            }
            return true
        default:
            return false
        }
    }
}
