import RoomKitPluginSDK
import RoomKitProtocol

/// A test plugin for the Swift SDK's typed handlers and injected `host`,
/// `config` and `log`: no stored host, no switch over event kinds.
/// - magix `hello` -> magix `hi` {"greeting": config.greeting, "joined": [...], "count": n}
/// - every magix is counted; the count is handed over on reload
/// - userJoined records the users; magix `remember` stores payload.text (kv)
///   and `recall` answers `recalled` {"text"}.
final class SDKProbePlugin: RoomKitPlugin {
    private var joined: [String] = []
    private var count = 0

    init() {}

    func magix(_ message: MagixMessage) {
        count += 1
        switch message.event {
        case "hello":
            host.dispatchMagix(room: message.room, event: "hi", payload: [
                "greeting": config["greeting"] ?? "hello", "joined": .array(joined.map(JSON.string)), "count": .int(Int64(count)),
            ])
        case "remember":
            host.store("text", message.payload["text"]?.stringValue ?? "")
        case "recall":
            host.dispatchMagix(room: message.room, event: "recalled", payload: ["text": host.storedValue("text").map(JSON.string) ?? .null])
        default:
            break
        }
    }

    func userJoined(_ change: UsersChange) {
        joined += change.users
        log.info("joined: \(change.users)")
    }

    func exportState() -> String? { String(count) }

    func importState(_ state: String) throws { count = Int(state) ?? 0 }
}

@_cdecl("roomkit_plugin_entry")
public func roomkitPluginEntry(_ major: UInt16, _ minor: UInt16) -> UnsafeRawPointer? { exportPlugin(SDKProbePlugin.self, major, minor) }
