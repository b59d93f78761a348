import Foundation
import RoomKitLoop

extension FleetCoordinator {
    /// Whether roomd answered its `/healthz` within the last TTL. A host that
    /// reaches Redis but not roomd must not keep shards it cannot serve: while
    /// unhealthy it renews no lease (they lapse, its rooms are logged out,
    /// the others claim them), claims nothing and reports itself draining so
    /// no one rebalances shards towards it. Loop thread only.
    var roomdHealthy: Bool {
        guard let lastHealthy = state.value.lastHealthy else { return true }  // not probed yet: assume so
        return loop.nowMilliseconds - lastHealthy <= ttlMs
    }

    /// Starts one `/healthz` probe unless one is running. Loop thread only.
    func probeRoomd() {
        guard let url = healthURL else { return }
        switch state.value.probe {
        case .running:
            return
        case .idle:
            break
        }
        if state.value.lastHealthy == nil { state.value.lastHealthy = loop.nowMilliseconds }
        var configuration = HTTPClientConfiguration()
        configuration.timeout = config.leaseTTL
        configuration.connectTimeout = config.leaseTTL / 2
        guard let client = try? HTTPClient.shared(on: loop, configuration: configuration) else { return }
        state.value.probe = .running
        let loop = self.loop
        Task { [self] in
            let answer = try? await client.get(url)
            let ok = answer?.status == 200
            _ = loop.execute { [self] in
                state.value.probe = .idle
                let was = roomdHealthy
                if ok { state.value.lastHealthy = loop.nowMilliseconds }
                if was && !roomdHealthy {
                    logger.warning("fleet: roomd unreachable for a lease TTL; letting the shards go",
                                   metadata: ["url": "\(url)"])
                } else if !was && roomdHealthy {
                    logger.notice("fleet: roomd reachable again; claiming shards again")
                }
            }
        }
    }

    /// `http(s)://host:port/healthz` of the configured roomd.
    static func healthURL(server: String) -> HTTPURL? {
        guard let ws = try? WebSocketURL(server) else { return nil }
        return try? HTTPURL("\(ws.secure ? "https" : "http")://\(ws.host):\(ws.port)/healthz")
    }
}
