import CRoomKitPluginABI
import CRoomKitPluginWire
import Foundation

// The proxy descriptor: what PluginRuntime calls for a process plugin. It
// is still the seam between the runtime and the process; an endpoint type
// above both kinds (issue #25 section 1) would replace it.
extension PluginProcess {
    // MARK: The proxy descriptor

    func installDescriptor() {
        var d = roomkit_plugin()
        d.struct_size = UInt32(MemoryLayout<roomkit_plugin>.size)
        d.abi_major = UInt16(ROOMKIT_PLUGIN_ABI_MAJOR)
        d.abi_minor = UInt16(ROOMKIT_PLUGIN_ABI_MINOR)
        d.`self` = Unmanaged.passUnretained(self).toOpaque()
        d.on_load = { me, host, config in
            proxy(me).load(host: host, config: config.map { String(cString: $0) } ?? "null")
        }
        d.on_unload = { me in proxy(me).shutdown() }
        let hooks = spec.hooks
        // Always: besides the throwError hook, a failed action of the
        // plugin's own reaches it as throw_error (roomkit_plugin.h); the child
        // calls the plugin's throw_error when it exports one.
        do {
            d.throw_error = { me, domain, code, message in
                guard let domain, let message else { return }
                proxy(me).enqueue(ROOMKIT_WIRE_RECORD_THROW_ERROR, number: code, a: domain, b: message)
            }
        }
        if hooks.contains(.urlInterrupter) {
            d.url_interrupter = { me, url in
                guard let url else { return nil }
                return proxy(me).interrupt(String(cString: url))
            }
        }
        if hooks.contains(.room) || hooks.contains(.magix) {
            d.on_room_event = { me, kind, room, payload in
                guard let room, let payload else { return }
                proxy(me).enqueue(ROOMKIT_WIRE_RECORD_ROOM, number: Int64(kind), a: room, b: payload)
            }
        }
        if hooks.contains(.player) {
            d.on_player_event = { me, kind, room, payload in
                guard let room, let payload else { return }
                proxy(me).enqueue(ROOMKIT_WIRE_RECORD_PLAYER, number: Int64(kind), a: room, b: payload)
            }
        }
        installABI11Hooks(&d)
        descriptor.pointee = d
    }
}

/// The process behind a proxy descriptor's `self`.
private func proxy(_ pointer: UnsafeMutableRawPointer?) -> PluginProcess {
    Unmanaged<PluginProcess>.fromOpaque(pointer!).takeUnretainedValue()
}

