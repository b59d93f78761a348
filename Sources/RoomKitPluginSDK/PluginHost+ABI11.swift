import CRoomKitPluginABI
import RoomKitJSON
import RoomKitProtocol

/// The host functions of ABI 1.1. In a 1.0 host (its table ends before
/// them) each returns false / nil and does nothing: check `hasABI11`.
extension PluginHost {
    /// Whether the host's table has the ABI 1.1 functions.
    public var hasABI11: Bool { has(\.kv_scan_json) }

    func has<T>(_ member: KeyPath<roomkit_host_api, T>) -> Bool {
        guard let offset = MemoryLayout<roomkit_host_api>.offset(of: member) else { return false }
        return Int(api.pointee.struct_size) >= offset + MemoryLayout<T>.size
    }

    private func taking(_ raw: UnsafeMutablePointer<CChar>?) -> String? {
        guard let raw else { return nil }
        defer { api.pointee.free_string?(api.pointee.context, raw) }
        return String(cString: raw)
    }

    /// Merges `patch` into the bot's member state in `room`.
    @discardableResult
    public func setMemberState(room: String, patch: [String: JSON]) -> Bool {
        has(\.set_member_state) && api.pointee.set_member_state?(api.pointee.context, room, JSON.object(patch).jsonString) == 0
    }

    /// Sets a room's extra-info `key`.
    @discardableResult
    public func setExtraInfo(room: String, key: String, value: String) -> Bool {
        has(\.set_extra_info) && api.pointee.set_extra_info?(api.pointee.context, room, key, value) == 0
    }

    /// Publishes a stream in `room`.
    @discardableResult
    public func publishStream(room: String, id: String, extraInfo: String? = nil) -> Bool {
        guard has(\.publish_stream) else { return false }
        return withOptionalCString(extraInfo) { api.pointee.publish_stream?(api.pointee.context, room, id, $0) == 0 }
    }

    /// Withdraws a stream from `room`.
    @discardableResult
    public func unpublishStream(room: String, id: String) -> Bool {
        has(\.unpublish_stream) && api.pointee.unpublish_stream?(api.pointee.context, room, id) == 0
    }

    /// Logs the bot in to `room` (asynchronous: watch `stateChanged`).
    @discardableResult
    public func loginRoom(_ room: String) -> Bool {
        has(\.login_room) && api.pointee.login_room?(api.pointee.context, room) == 0
    }

    /// Logs the bot out of `room` (asynchronous).
    @discardableResult
    public func logoutRoom(_ room: String) -> Bool {
        has(\.logout_room) && api.pointee.logout_room?(api.pointee.context, room) == 0
    }

    /// Leaves `from` and logs in to `to` (asynchronous).
    @discardableResult
    public func switchRoom(from: String, to: String) -> Bool {
        has(\.switch_room) && api.pointee.switch_room?(api.pointee.context, from, to) == 0
    }

    /// The room's members, or nil for an unknown room.
    public func roomMembers(_ room: String) -> JSON? {
        guard has(\.room_members_json) else { return nil }
        return taking(api.pointee.room_members_json?(api.pointee.context, room)).flatMap { try? JSON.parse($0) }
    }

    /// The plugin's config as resolved for `room` (manifest `roomConfig`),
    /// or the base config for nil.
    public func config(for room: String?) -> JSON? {
        guard has(\.config_get_json) else { return nil }
        return withOptionalCString(room) { taking(api.pointee.config_get_json?(api.pointee.context, $0)) }.flatMap { try? JSON.parse($0) }
    }

    /// Persistent per-plugin storage: the value of `key`, or nil.
    public func storedValue(_ key: String) -> String? {
        guard has(\.kv_get) else { return nil }
        return taking(api.pointee.kv_get?(api.pointee.context, key))
    }

    /// The outcome of `store(_:_:)`.
    public enum StoreResult: Sendable { case stored, full, failed }

    /// Stores `value` under `key` (`.full` past the manifest's `storageLimitBytes`).
    @discardableResult
    public func store(_ key: String, _ value: String) -> StoreResult {
        guard has(\.kv_set), let rc = api.pointee.kv_set?(api.pointee.context, key, value) else { return .failed }
        return rc == 0 ? .stored : rc == ROOMKIT_KV_FULL ? .full : .failed
    }

    /// Removes `key`; whether it existed.
    @discardableResult
    public func removeValue(_ key: String) -> Bool {
        has(\.kv_delete) && api.pointee.kv_delete?(api.pointee.context, key) == 1
    }

    /// Every stored pair whose key starts with `prefix`.
    public func storedValues(prefix: String = "") -> [String: String] {
        guard has(\.kv_scan_json), let text = taking(api.pointee.kv_scan_json?(api.pointee.context, prefix)),
              let object = try? JSON.parse(text).objectValue else { return [:] }
        return object.compactMapValues(\.stringValue)
    }
}
