import CRoomKitPluginABI
import RoomKitJSON
import RoomKitProtocol

/// Builds the C descriptor for `type` (one instance per load). Call it from
/// your exported `roomkit_plugin_entry`; returns nil when the host's ABI
/// major differs from ours.
public func exportPlugin<P: RoomKitPlugin>(_ type: P.Type, _ hostMajor: UInt16, _ hostMinor: UInt16) -> UnsafeRawPointer? {
    guard hostMajor == UInt16(ROOMKIT_PLUGIN_ABI_MAJOR) else { return nil }
    let box = PluginBox(type.init())
    PluginBox.register(box)
    let descriptor = UnsafeMutablePointer<roomkit_plugin>.allocate(capacity: 1)
    descriptor.initialize(to: roomkit_plugin())
    descriptor.pointee.struct_size = UInt32(MemoryLayout<roomkit_plugin>.size)
    descriptor.pointee.abi_major = UInt16(ROOMKIT_PLUGIN_ABI_MAJOR)
    descriptor.pointee.abi_minor = UInt16(ROOMKIT_PLUGIN_ABI_MINOR)
    // Retained for as long as the library is mapped (the host never dlcloses).
    descriptor.pointee.`self` = Unmanaged.passRetained(box).toOpaque()
    descriptor.pointee.on_load = { raw, api, config in
        guard let raw, let api else { return -1 }
        let box = Unmanaged<PluginBox>.fromOpaque(raw).takeUnretainedValue()
        let host = PluginHost(api: api, box: box)
        box.host = host
        do {
            let json = try config.map { try JSON.parse(String(cString: $0)) } ?? .null
            box.config.withLock { $0 = json }
            try box.plugin.load(host: host, config: json)
            return 0
        } catch {
            host.log(.error, "load failed: \(error)")
            return -1
        }
    }
    descriptor.pointee.on_unload = { raw in
        guard let raw else { return }
        let box = Unmanaged<PluginBox>.fromOpaque(raw).takeUnretainedValue()
        box.plugin.unload()
        box.timers.withLock { $0.removeAll() }
    }
    descriptor.pointee.throw_error = { raw, domain, code, message in
        guard let raw else { return }
        let box = Unmanaged<PluginBox>.fromOpaque(raw).takeUnretainedValue()
        box.plugin.throwError(domain: domain.map { String(cString: $0) } ?? "", code: code,
                              message: message.map { String(cString: $0) } ?? "")
    }
    descriptor.pointee.url_interrupter = { raw, url in
        guard let raw, let url else { return nil }
        let box = Unmanaged<PluginBox>.fromOpaque(raw).takeUnretainedValue()
        guard let host = box.host, let rewritten = try? box.plugin.urlInterrupter(String(cString: url)) else { return nil }
        return host.api.pointee.alloc_string?(host.api.pointee.context, rewritten)
    }
    descriptor.pointee.on_room_event = { raw, kind, room, payload in
        guard let raw, let kind = RoomEventKind(rawValue: kind) else { return }
        let box = Unmanaged<PluginBox>.fromOpaque(raw).takeUnretainedValue()
        let json = payload.flatMap { try? JSON.parse(String(cString: $0)) } ?? .null
        box.plugin.roomEvent(kind, room: room.map { String(cString: $0) } ?? "", payload: json)
    }
    descriptor.pointee.on_player_event = { raw, kind, room, payload in
        guard let raw, let kind = PlayerEventKind(rawValue: kind) else { return }
        let box = Unmanaged<PluginBox>.fromOpaque(raw).takeUnretainedValue()
        let json = payload.flatMap { try? JSON.parse(String(cString: $0)) } ?? .null
        box.plugin.playerEvent(kind, room: room.map { String(cString: $0) } ?? "", payload: json)
    }
    descriptor.pointee.on_config_changed = { raw, room, config in
        guard let raw else { return }
        let box = Unmanaged<PluginBox>.fromOpaque(raw).takeUnretainedValue()
        let json = config.flatMap { try? JSON.parse(String(cString: $0)) } ?? .null
        let room = room.map { String(cString: $0) }
        if room == nil { box.config.withLock { $0 = json } }
        box.plugin.configChanged(room: room, config: json)
    }
    descriptor.pointee.export_state = { raw in
        guard let raw else { return nil }
        let box = Unmanaged<PluginBox>.fromOpaque(raw).takeUnretainedValue()
        guard let host = box.host, let state = box.plugin.exportState() else { return nil }
        return host.api.pointee.alloc_string?(host.api.pointee.context, state)
    }
    descriptor.pointee.import_state = { raw, state in
        guard let raw, let state else { return -1 }
        let box = Unmanaged<PluginBox>.fromOpaque(raw).takeUnretainedValue()
        do {
            try box.plugin.importState(String(cString: state))
            return 0
        } catch {
            box.host?.log(.error, "import_state refused: \(error)")
            return -1
        }
    }
    return UnsafeRawPointer(descriptor)
}
