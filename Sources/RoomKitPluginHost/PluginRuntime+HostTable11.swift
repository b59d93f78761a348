import CRoomKitPluginABI
import Foundation
import RoomKitProtocol

/// What the host does for the function-table members added in ABI 1.1
/// (roomkit_plugin.h, "1.1 and later"). The manager implements it; every
/// method may be called from any thread (a plugin's hook, its timer, or a
/// thread of its own).
protocol PluginPlatformActions: AnyObject, Sendable {
    func pluginSetMemberState(_ plugin: String, room: String, patch: [String: JSON]) -> Bool
    func pluginSetExtraInfo(_ plugin: String, room: String, key: String, value: String) -> Bool
    func pluginPublishStream(_ plugin: String, room: String, stream: String, extraInfo: String?) -> Bool
    func pluginUnpublishStream(_ plugin: String, room: String, stream: String) -> Bool
    func pluginLoginRoom(_ plugin: String, room: String) -> Bool
    func pluginLogoutRoom(_ plugin: String, room: String) -> Bool
    func pluginSwitchRoom(_ plugin: String, from: String, to: String) -> Bool
    func pluginRoomMembers(_ room: String) -> JSON?
    func pluginConfig(_ plugin: String, room: String?) -> JSON
    func pluginKVGet(_ plugin: String, key: String) -> String?
    /// 0, -1 (bad arguments, storage error) or `ROOMKIT_KV_FULL`.
    func pluginKVSet(_ plugin: String, key: String, value: String) -> Int32
    /// 1 removed, 0 absent, -1 error.
    func pluginKVDelete(_ plugin: String, key: String) -> Int32
    func pluginKVScan(_ plugin: String, prefix: String) -> JSON?
}

extension PluginRuntime {
    /// Whether the plugin's descriptor is long enough to have `member` (it
    /// was built with a header that has it); a 1.0 descriptor ends before
    /// every 1.1 hook, and reading past its end would read foreign memory.
    func descriptorHas<T>(_ member: KeyPath<roomkit_plugin, T>) -> Bool {
        guard let offset = MemoryLayout<roomkit_plugin>.offset(of: member) else { return false }
        return Int(descriptor.pointee.struct_size) >= offset + MemoryLayout<T>.size
    }

    /// The descriptor's `abi_minor` (0 for a plugin built against 1.0).
    var abiMinor: UInt16 { descriptor.pointee.abi_minor }
}

/// Like `platform`, for a room action: nil also when the action budget is spent (`budget` set).
private func acting(_ context: UnsafeMutableRawPointer?, _ budget: inout Bool) -> (plugin: String, actions: any PluginPlatformActions)? {
    guard let context else { return nil }
    let runtime = Unmanaged<PluginRuntime>.fromOpaque(context).takeUnretainedValue()
    guard runtime.mayAct() else {
        budget = true
        return nil
    }
    return platform(context)
}

private func platform(_ context: UnsafeMutableRawPointer?) -> (plugin: String, actions: any PluginPlatformActions)? {
    guard let context else { return nil }
    let runtime = Unmanaged<PluginRuntime>.fromOpaque(context).takeUnretainedValue()
    guard let actions = runtime.actions as? any PluginPlatformActions else { return nil }
    return (runtime.spec.name, actions)
}

private func text(_ pointer: UnsafePointer<CChar>?) -> String? {
    pointer.flatMap { String(validatingCString: $0) }
}

private func object(_ pointer: UnsafePointer<CChar>?) -> [String: JSON]? {
    text(pointer).flatMap { try? JSON.parse($0) }?.objectValue
}

/// Fills in the ABI 1.1 members of the host's function table.
func addPlatformFunctions(to api: inout roomkit_host_api) {
    api.set_member_state = { context, room, patch in
        var budget = false
        guard let (plugin, actions) = acting(context, &budget), let room = text(room), let patch = object(patch) else { return budget ? actionBudgetExhausted : -1 }
        return actions.pluginSetMemberState(plugin, room: room, patch: patch) ? 0 : -1
    }
    api.set_extra_info = { context, room, key, value in
        var budget = false
        guard let (plugin, actions) = acting(context, &budget), let room = text(room), let key = text(key), !key.isEmpty,
              let value = text(value) else { return budget ? actionBudgetExhausted : -1 }
        return actions.pluginSetExtraInfo(plugin, room: room, key: key, value: value) ? 0 : -1
    }
    api.publish_stream = { context, room, stream, extra in
        var budget = false
        guard let (plugin, actions) = acting(context, &budget), let room = text(room), let stream = text(stream), !stream.isEmpty else { return budget ? actionBudgetExhausted : -1 }
        if extra != nil, text(extra) == nil { return -1 }
        return actions.pluginPublishStream(plugin, room: room, stream: stream, extraInfo: text(extra)) ? 0 : -1
    }
    api.unpublish_stream = { context, room, stream in
        var budget = false
        guard let (plugin, actions) = acting(context, &budget), let room = text(room), let stream = text(stream), !stream.isEmpty else { return budget ? actionBudgetExhausted : -1 }
        return actions.pluginUnpublishStream(plugin, room: room, stream: stream) ? 0 : -1
    }
    api.login_room = { context, room in
        var budget = false
        guard let (plugin, actions) = acting(context, &budget), let room = text(room) else { return budget ? actionBudgetExhausted : -1 }
        return actions.pluginLoginRoom(plugin, room: room) ? 0 : -1
    }
    api.logout_room = { context, room in
        var budget = false
        guard let (plugin, actions) = acting(context, &budget), let room = text(room) else { return budget ? actionBudgetExhausted : -1 }
        return actions.pluginLogoutRoom(plugin, room: room) ? 0 : -1
    }
    api.switch_room = { context, from, to in
        var budget = false
        guard let (plugin, actions) = acting(context, &budget), let from = text(from), let to = text(to) else { return budget ? actionBudgetExhausted : -1 }
        return actions.pluginSwitchRoom(plugin, from: from, to: to) ? 0 : -1
    }
    api.room_members_json = { context, room in
        guard let (_, actions) = platform(context), let room = text(room), let members = actions.pluginRoomMembers(room) else { return nil }
        return strdup(members.jsonString)
    }
    api.config_get_json = { context, room in
        guard let (plugin, actions) = platform(context) else { return nil }
        if room != nil, text(room) == nil { return nil }
        return strdup(actions.pluginConfig(plugin, room: text(room)).jsonString)
    }
    api.kv_get = { context, key in
        guard let (plugin, actions) = platform(context), let key = text(key), let value = actions.pluginKVGet(plugin, key: key) else { return nil }
        return strdup(value)
    }
    api.kv_set = { context, key, value in
        guard let (plugin, actions) = platform(context), let key = text(key), !key.isEmpty, let value = text(value) else { return -1 }
        return actions.pluginKVSet(plugin, key: key, value: value)
    }
    api.kv_delete = { context, key in
        guard let (plugin, actions) = platform(context), let key = text(key) else { return -1 }
        return actions.pluginKVDelete(plugin, key: key)
    }
    api.kv_scan_json = { context, prefix in
        guard let (plugin, actions) = platform(context), let prefix = prefix == nil ? "" : text(prefix),
              let pairs = actions.pluginKVScan(plugin, prefix: prefix) else { return nil }
        return strdup(pairs.jsonString)
    }
}
