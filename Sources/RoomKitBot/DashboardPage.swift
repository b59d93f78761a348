/// The dashboard served at `GET /` of the control API: one self-contained
/// page (HTML, CSS, a little JS), no external fetch. The page is the file
/// `Resources/dashboard.html`, which SwiftPM embeds in the module at build
/// time (`.embedInCode`), so an installed `roombot` needs no resource bundle
/// beside it. It reads `GET /v1/bot`, `GET /v1/rooms?offset=&limit=&filter=`,
/// `GET /v1/rooms/{id}`, `GET /v1/plugins` and the SSE stream
/// `GET /v1/events/stream`, all with `Authorization: Bearer <token>` when the
/// bot has a `controlToken` (the page asks for it and keeps it in the tab's
/// sessionStorage, never in a URL).
enum DashboardPage {
    /// The page, with `nonce` on its one style sheet and one script (the
    /// Content-Security-Policy allows nothing else).
    /// `fleetMode`: the bot runs in fleet mode, so the page shows the fleet
    /// view (hosts, shards, unhomed rooms from `GET /v1/fleet`).
    static func html(nonce: String, tokenRequired: Bool, fleetMode: Bool = false) -> String {
        template
            .replacingOccurrences(of: "{{NONCE}}", with: nonce)
            .replacingOccurrences(of: "{{TOKEN_REQUIRED}}", with: tokenRequired ? "true" : "false")
            .replacingOccurrences(of: "{{FLEET_MODE}}", with: fleetMode ? "true" : "false")
    }

    /// The file's text, decoded once.
    static let template = String(decoding: PackageResources.dashboard_html, as: UTF8.self)
}
