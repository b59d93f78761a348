import RoomKitPluginSDK
import RoomKitProtocol

/// The benchmarks' Swift SDK plugin: every hook does nothing, so a call
/// measures the SDK's own path (trampoline, payload parse, protocol call).
final class NoopPlugin: RoomKitPlugin {
    init() {}
    func roomEvent(_ kind: RoomEventKind, room: String, payload: JSON) {}
    func playerEvent(_ kind: PlayerEventKind, room: String, payload: JSON) {}
}

@_cdecl("roomkit_plugin_entry")
public func entry(_ major: UInt16, _ minor: UInt16) -> UnsafeRawPointer? { exportPlugin(NoopPlugin.self, major, minor) }
