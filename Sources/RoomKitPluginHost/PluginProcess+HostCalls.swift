import CRoomKitPluginWire
import Foundation
import RoomKit
import RoomKitProtocol

extension PluginProcess {
    /// Runs one CALL from the process (PLUGIN-WIRE.md section 6) straight on
    /// the host-action code inline plugins reach through their C table
    /// (`PluginHostActions`, `PluginPlatformActions`), with the same action
    /// budget: the frame's strings are decoded once, no C round trip.
    /// `number` is put_scenes' index. Returns the C function's result and text.
    func perform(_ function: Int32, argument number: Int32, _ arguments: [[UInt8]?]) -> (Int32, String?) {
        guard let runtime = lock.withLock({ runtime }), let actions = runtime.actions else { return (-1, nil) }
        let plugin = spec.name
        let a: [String?] = arguments.map { $0.flatMap { String(validating: $0, as: UTF8.self) } }
        func text(_ i: Int) -> String? { i < a.count ? a[i] : nil }
        func json(_ i: Int) -> JSON? { text(i).flatMap { try? JSON.parse($0) } }
        /// A room action: the budget first, then the arguments (as the C table does).
        func act(_ body: () -> Bool?) -> (Int32, String?) {
            guard runtime.mayAct() else { return (actionBudgetExhausted, nil) }
            return (body() == true ? 0 : -1, nil)
        }
        let platform = actions as? any PluginPlatformActions
        switch UInt32(function) {
        case ROOMKIT_WIRE_DISPATCH_MAGIX.rawValue:
            return act {
                guard let room = text(0), let event = text(1), let payload = json(2) else { return nil }
                let to = json(3)?.arrayValue?.compactMap(\.stringValue)
                return actions.pluginDispatchMagix(plugin, room: room, event: event, payload: payload, to: to)
            }
        case ROOMKIT_WIRE_SET_GLOBAL_STATE.rawValue:
            return act {
                guard let room = text(0), let patch = json(1)?.objectValue else { return nil }
                return actions.pluginSetGlobalState(plugin, room: room, patch: patch)
            }
        case ROOMKIT_WIRE_INSERT_IMAGE.rawValue:
            return act {
                guard let room = text(0), let value = json(1), let image = try? Image(json: value) else { return nil }
                return actions.pluginInsertImage(plugin, room: room, image: image)
            }
        case ROOMKIT_WIRE_PUT_SCENES.rawValue:
            return act {
                guard let room = text(0), let dir = text(1), let list = json(2)?.arrayValue else { return nil }
                let scenes = list.compactMap { try? Scene(json: $0) }
                guard scenes.count == list.count else { return nil }
                return actions.pluginPutScenes(plugin, room: room, dir: dir, scenes: scenes, index: number >= 0 ? Int(number) : nil)
            }
        case ROOMKIT_WIRE_ROOM_STATE.rawValue:
            guard let room = text(0), let state = actions.pluginRoomState(room) else { return (-1, nil) }
            return (0, state.jsonString)
        case ROOMKIT_WIRE_SET_MEMBER_STATE.rawValue:
            return act {
                guard let room = text(0), let patch = json(1)?.objectValue else { return nil }
                return platform?.pluginSetMemberState(plugin, room: room, patch: patch)
            }
        case ROOMKIT_WIRE_SET_EXTRA_INFO.rawValue:
            return act {
                guard let room = text(0), let key = text(1), !key.isEmpty, let value = text(2) else { return nil }
                return platform?.pluginSetExtraInfo(plugin, room: room, key: key, value: value)
            }
        case ROOMKIT_WIRE_PUBLISH_STREAM.rawValue:
            return act {
                guard let room = text(0), let stream = text(1), !stream.isEmpty else { return nil }
                if a.count > 2, arguments[2] != nil, text(2) == nil { return nil }  // extra info that is not UTF-8
                return platform?.pluginPublishStream(plugin, room: room, stream: stream, extraInfo: text(2))
            }
        case ROOMKIT_WIRE_UNPUBLISH_STREAM.rawValue:
            return act {
                guard let room = text(0), let stream = text(1), !stream.isEmpty else { return nil }
                return platform?.pluginUnpublishStream(plugin, room: room, stream: stream)
            }
        case ROOMKIT_WIRE_LOGIN_ROOM.rawValue:
            return act { text(0).flatMap { platform?.pluginLoginRoom(plugin, room: $0) } }
        case ROOMKIT_WIRE_LOGOUT_ROOM.rawValue:
            return act { text(0).flatMap { platform?.pluginLogoutRoom(plugin, room: $0) } }
        case ROOMKIT_WIRE_SWITCH_ROOM.rawValue:
            return act {
                guard let from = text(0), let to = text(1) else { return nil }
                return platform?.pluginSwitchRoom(plugin, from: from, to: to)
            }
        case ROOMKIT_WIRE_ROOM_MEMBERS.rawValue:
            guard let room = text(0), let members = platform?.pluginRoomMembers(room) else { return (-1, nil) }
            return (0, members.jsonString)
        case ROOMKIT_WIRE_CONFIG_GET.rawValue:
            guard let platform else { return (-1, nil) }
            if a.count > 0, arguments[0] != nil, text(0) == nil { return (-1, nil) }
            return (0, platform.pluginConfig(plugin, room: text(0)).jsonString)
        case ROOMKIT_WIRE_KV_GET.rawValue:
            guard let key = text(0), let value = platform?.pluginKVGet(plugin, key: key) else { return (0, nil) }
            return (0, value)
        case ROOMKIT_WIRE_KV_SET.rawValue:
            guard let platform, let key = text(0), !key.isEmpty, let value = text(1) else { return (-1, nil) }
            return (platform.pluginKVSet(plugin, key: key, value: value), nil)
        case ROOMKIT_WIRE_KV_DELETE.rawValue:
            guard let platform, let key = text(0) else { return (-1, nil) }
            return (platform.pluginKVDelete(plugin, key: key), nil)
        case ROOMKIT_WIRE_KV_SCAN.rawValue:
            guard let pairs = platform?.pluginKVScan(plugin, prefix: text(0) ?? "") else { return (-1, nil) }
            return (0, pairs.jsonString)
        default:
            return (-1, nil)  // a function number this bot does not know: bad arguments
        }
    }
}
