import RoomKitLoop
import RoomKitProtocol

/// The optional admin listener (`roomd serve --admin-listen`): `/metrics`,
/// `/healthz` and `/v1/admin/…` on a port of their own, so the public port
/// need not expose them. Loop thread only.
extension RoomServer {
    /// The admin listener's bound port, when there is one.
    public var adminPort: Int? { adminWeb?.port }

    /// Binds the admin listener if the configuration asks for one.
    func startAdminListener() throws {
        guard let host = configuration.adminHost else { return }
        var admin = WebServerConfiguration()
        admin.host = host
        admin.port = configuration.adminPort
        admin.webSocketPath = nil
        adminWeb = try WebServer(loop: loop, configuration: admin, delegate: self, logger: logger)
    }

    /// 404 for a path that belongs to the other listener: with an admin
    /// listener, metrics and the admin API live only there, and rooms and
    /// recordings only on the public one. `/healthz` is on both.
    func checkListener(_ server: WebServer, parts: [String], request: HTTPRequest) throws {
        guard adminWeb != nil, parts != ["healthz"] else { return }
        let adminPath = parts == ["metrics"] || (parts.count >= 2 && parts[0] == "v1" && parts[1] == "admin")
        if server === adminWeb, !adminPath {
            throw HTTPFailure(404, .invalidArgument, "no such endpoint on the admin listener: \(request.method) \(request.path)")
        }
        if server !== adminWeb, adminPath {
            throw HTTPFailure(404, .invalidArgument, "\(request.path) is served on the admin listener only")
        }
    }
}
