import RoomKit
import RoomKitProtocol

/// Layered plugin config: the manifest's `config` is the base; `roomConfig`
/// (glob -> object) overrides top-level keys for the rooms each glob
/// matches, one level deep like `globalState` (a key's value is replaced
/// whole, never merged further). Globs apply from least to most specific
/// (fewest literal characters first, then by text), so `lobby-*` overrides
/// `*`, and the result is the same whatever order the file lists them in.
public struct PluginConfig: Sendable, Hashable {
    public var config: JSON
    public var roomConfig: [String: JSON]

    public init(config: JSON, roomConfig: [String: JSON] = [:]) {
        self.config = config
        self.roomConfig = roomConfig
    }

    /// The config as a plugin sees it in `room` (the base for nil).
    public func resolved(for room: String?) -> JSON {
        guard let room else { return config }
        let matching = roomConfig.keys.filter { RoomGlob.matches($0, room) }.sorted { a, b in
            let (la, lb) = (Self.literals(a), Self.literals(b))
            return la != lb ? la < lb : a < b
        }
        guard !matching.isEmpty else { return config }
        var merged = config.objectValue ?? [:]
        for glob in matching {
            for (key, value) in roomConfig[glob]?.objectValue ?? [:] { merged[key] = value }
        }
        return .object(merged)
    }

    private static func literals(_ glob: String) -> Int { glob.filter { $0 != "*" && $0 != "?" }.count }

    /// The JSON persisted for a live change: `{"config": …, "roomConfig": {…}}`.
    public var json: JSON { .object(["config": config, "roomConfig": .object(roomConfig)]) }

    /// Validates a live change's body (`PUT /v1/plugins/{name}/config`):
    /// `{"config": any, "roomConfig": {glob: object}}`, `roomConfig` optional
    /// (then `current`'s is kept). Each problem names its field.
    public static func parseUpdate(_ body: JSON, current: PluginConfig) throws(ManifestErrors) -> PluginConfig {
        var errors: [ManifestError] = []
        func fail(_ field: String, _ problem: String) { errors.append(ManifestError(file: "request body", field: field, problem: problem)) }
        guard let object = body.objectValue else {
            throw ManifestErrors(errors: [ManifestError(file: "request body", field: "", problem: "must be a JSON object {\"config\": …, \"roomConfig\": {…}}")])
        }
        for key in object.keys.sorted() where key != "config" && key != "roomConfig" { fail(key, "unknown field") }
        guard let config = object["config"] else {
            fail("config", "missing")
            throw ManifestErrors(errors: errors)
        }
        let rooms = object["roomConfig"].map { PluginManifest.parseRoomConfig($0, config: config, at: "", fail: fail) } ?? current.roomConfig
        if !errors.isEmpty { throw ManifestErrors(errors: errors) }
        return PluginConfig(config: config, roomConfig: rooms)
    }
}
