import Foundation
import Logging
import RoomKit
import RoomKitPluginHost
import RoomKitProtocol

extension BotRunner {
    /// ABI 1.1 services for plugins: persistent key-value storage (and
    /// persisted live config) in the bot's durable store, the state file
    /// (its own tables, `plugin_kv` and `plugin_config`, through a second
    /// connection: one file to back up, move or delete with the bot), and
    /// `login_room` as the bot's own user with its token source. A store that
    /// cannot be opened is logged; plugins then get -1 from kv_* calls.
    func configurePluginPlatform() {
        let path = config.stateFile
        do {
            plugins.useStore(try SQLitePluginStore(path: path))
        } catch {
            logger.error("plugin storage unavailable", metadata: ["path": "\(path)", "error": "\(error)"])
        }
        let host = self.host
        let user = config.user
        let tokens = self.tokens
        plugins.useRoomLogin { [weak self] room in
            try await host.loginRoom(room, user: user, tokenProvider: tokens)
            self?.remember(room, joined: true)
        }
    }
}

extension ControlAPI {
    /// `PUT /v1/plugins/{name}/config`: body `{"config": …, "roomConfig": {glob: {…}}}`.
    /// Validated, persisted, pushed live (on_config_changed); an event-log
    /// line `pluginConfig` records it. 400 names the bad field; 404 an
    /// unknown plugin; 500 when it could not be saved (nothing changed).
    static func putPluginConfig(_ name: String, body: [UInt8], runner: BotRunner) -> (Int, JSON) {
        let json: JSON
        do { json = try JSON.parse(body) } catch {
            return (400, ["code": .int(Int64(ErrorCode.malformed.rawValue)), "message": .string("body is not JSON: \(error)")])
        }
        do {
            let updated = try runner.plugins.updateConfig(name, body: json)
            runner.events.write("pluginConfig", ["plugin": .string(name), "config": updated.config,
                                                 "roomConfig": .object(updated.roomConfig)])
            return (200, ["name": .string(name), "config": updated.config, "roomConfig": .object(updated.roomConfig)])
        } catch {
            let status: Int
            switch error {
            case .unknownPlugin: status = 404
            case .invalid: status = 400
            case .storage: status = 500
            }
            let code: ErrorCode = status == 500 ? .internalError : .invalidArgument
            return (status, ["code": .int(Int64(code.rawValue)), "message": .string(error.description)])
        }
    }
}
