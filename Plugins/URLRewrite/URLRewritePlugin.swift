import RoomKitPluginSDK
import RoomKitProtocol

/// `url-rewrite`: rewrites every outgoing URL that starts with `config.from`
/// so that it starts with `config.to` instead (e.g. http:// to a CDN). A live
/// config change (`PUT /v1/plugins/url-rewrite/config`) applies at once; an
/// invalid one is logged and the previous rule kept.
final class URLRewritePlugin: RoomKitPlugin {
    private var from = ""
    private var to = ""

    init() {}

    func load(host: PluginHost, config: JSON) throws {
        try apply(config)
    }

    func configChanged(room: String?, config: JSON) {
        guard room == nil else { return }  // one rule for every room
        do { try apply(config) } catch { log.error("config change ignored: \(error)") }
    }

    private func apply(_ config: JSON) throws {
        guard let from = config["from"]?.stringValue, let to = config["to"]?.stringValue, !from.isEmpty else {
            throw PluginConfigError("config needs string fields 'from' (non-empty) and 'to'")
        }
        self.from = from
        self.to = to
        log.info("rewriting \(from)… to \(to)…")
    }

    func urlInterrupter(_ url: String) throws -> String {
        url.hasPrefix(from) ? to + url.dropFirst(from.count) : url
    }
}

struct PluginConfigError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

@_cdecl("roomkit_plugin_entry")
public func roomkitPluginEntry(_ major: UInt16, _ minor: UInt16) -> UnsafeRawPointer? { exportPlugin(URLRewritePlugin.self, major, minor) }
