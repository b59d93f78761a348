import RoomKitProtocol

// The host actions: what a plugin may ask of the bot, whichever kind of
// endpoint it is. Inline plugins reach them through the C function table
// (PluginHostTable.swift); process plugins through CALL frames
// (PluginProcess+HostCalls.swift). Both go straight to these methods, with
// the same rate limits (PluginRateLimit.swift).

/// What the host does for a plugin's log lines and room actions.
protocol PluginHostActions: AnyObject, Sendable {
    func pluginLog(_ plugin: String, level: Int32, _ message: String)
    func pluginDispatchMagix(_ plugin: String, room: String, event: String, payload: JSON, to: [String]?) -> Bool
    func pluginSetGlobalState(_ plugin: String, room: String, patch: [String: JSON]) -> Bool
    func pluginInsertImage(_ plugin: String, room: String, image: Image) -> Bool
    func pluginPutScenes(_ plugin: String, room: String, dir: String, scenes: [Scene], index: Int?) -> Bool
    func pluginRoomState(_ room: String) -> JSON?
}

/// What the host does for the rest of a plugin's host calls (storage, room
/// login, members, config). The manager implements it; every method may be
/// called from any thread (a plugin's hook, its timer, or a thread of its own).
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

