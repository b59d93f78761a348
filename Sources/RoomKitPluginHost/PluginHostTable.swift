import CRoomKitPluginABI
import Foundation
import RoomKitProtocol

// The host's C function table handed to an inline plugin's on_load
// (roomkit_plugin.h): file-scope trampolines that capture nothing; each
// finds the runtime through the table's `context` and goes straight to the
// host actions (PluginHostActions.swift), as a process plugin's CALL does.

private func runtime(_ context: UnsafeMutableRawPointer?) -> PluginRuntime? {
    context.map { Unmanaged<PluginRuntime>.fromOpaque($0).takeUnretainedValue() }
}

private func string(_ pointer: UnsafePointer<CChar>?) -> String? {
    pointer.flatMap { String(validatingCString: $0) }
}

private func json(_ pointer: UnsafePointer<CChar>?) -> JSON? {
    string(pointer).flatMap { try? JSON.parse($0) }
}

func makeHostTable() -> roomkit_host_api {
    var api = roomkit_host_api()
    api.struct_size = UInt32(MemoryLayout<roomkit_host_api>.size)
    api.abi_major = UInt16(ROOMKIT_PLUGIN_ABI_MAJOR)
    api.abi_minor = UInt16(ROOMKIT_PLUGIN_ABI_MINOR)
    api.log = { context, level, message in
        guard let runtime = runtime(context), runtime.mayLog(), let message = string(message) else { return }
        runtime.actions?.pluginLog(runtime.spec.name, level: level, message)
    }
    api.dispatch_magix = { context, room, event, payload, to in
        guard let runtime = runtime(context) else { return -1 }
        guard runtime.mayAct() else { return actionBudgetExhausted }
        guard let room = string(room), let event = string(event),
              let payload = json(payload) else { return -1 }
        let recipients = to.flatMap { json($0)?.arrayValue?.compactMap(\.stringValue) }
        return runtime.actions?.pluginDispatchMagix(runtime.spec.name, room: room, event: event, payload: payload, to: recipients) == true ? 0 : -1
    }
    api.set_global_state = { context, room, patch in
        guard let runtime = runtime(context) else { return -1 }
        guard runtime.mayAct() else { return actionBudgetExhausted }
        guard let room = string(room), let patch = json(patch)?.objectValue else { return -1 }
        return runtime.actions?.pluginSetGlobalState(runtime.spec.name, room: room, patch: patch) == true ? 0 : -1
    }
    api.insert_image = { context, room, image in
        guard let runtime = runtime(context) else { return -1 }
        guard runtime.mayAct() else { return actionBudgetExhausted }
        guard let room = string(room), let json = json(image),
              let image = try? Image(json: json) else { return -1 }
        return runtime.actions?.pluginInsertImage(runtime.spec.name, room: room, image: image) == true ? 0 : -1
    }
    api.put_scenes = { context, room, dir, scenes, index in
        guard let runtime = runtime(context) else { return -1 }
        guard runtime.mayAct() else { return actionBudgetExhausted }
        guard let room = string(room), let dir = string(dir),
              let list = json(scenes)?.arrayValue else { return -1 }
        let parsed = list.compactMap { try? Scene(json: $0) }
        guard parsed.count == list.count else { return -1 }
        return runtime.actions?.pluginPutScenes(runtime.spec.name, room: room, dir: dir, scenes: parsed,
                                                index: index >= 0 ? Int(index) : nil) == true ? 0 : -1
    }
    api.room_state_json = { context, room in
        guard let runtime = runtime(context), let room = string(room),
              let state = runtime.actions?.pluginRoomState(room) else { return nil }
        return strdup(state.jsonString)
    }
    api.set_timer = { context, delay, repeatEvery, fire, user in
        guard let runtime = runtime(context), let fire else { return 0 }
        return runtime.setTimer(delay: delay, repeatEvery: repeatEvery, fire: fire, user: user)
    }
    api.cancel_timer = { context, id in
        runtime(context)?.cancelTimer(id)
    }
    api.alloc_string = { _, text in text.map { strdup($0) } ?? nil }
    api.free_string = { _, text in free(text) }
    addPlatformFunctions(to: &api)
    return api
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

/// Fills in the storage, room-login, members and config members of the table.
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
