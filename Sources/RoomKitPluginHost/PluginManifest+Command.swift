import Foundation
import RoomKitProtocol

// Manifest fields of the plugin wire work: `command` and the rate limits.
// Needs only RoomKitProtocol (scripts/fuzz.sh compiles it into the manifest fuzzer).

/// A plugin's rate limits (manifest `logPerSecond`, `logBurst`,
/// `actionsPerSecond`, `actionBurst`), for inline and process plugins alike,
/// so that one plugin never floods the bot's log or starves the operator and
/// the other plugins of the loop (docs/PLUGIN-WIRE.md section 6.2).
public struct PluginRateLimits: Sendable, Hashable {
    /// Log lines a second, and the burst allowed above it.
    public var logPerSecond = 100
    public var logBurst = 200
    /// Room actions a second (dispatch_magix, set_global_state, ...), and the burst.
    public var actionsPerSecond = 1000
    public var actionBurst = 2000

    public init() {}

    static let fields = ["logPerSecond", "logBurst", "actionsPerSecond", "actionBurst"]
}

extension PluginManifest {
    /// Parses `"command"`: a non-empty array of non-empty strings without NUL.
    static func parseCommand(_ value: JSON, at: String, fail: (String, String) -> Void) -> [String]? {
        guard let list = value.arrayValue, !list.isEmpty,
              list.allSatisfy({ $0.stringValue.map { !$0.isEmpty && !$0.utf8.contains(0) } ?? false }) else {
            fail("\(at).command", "must be a non-empty array of non-empty strings, e.g. [\"python3\", \"plugin.py\"]")
            return nil
        }
        return list.compactMap(\.stringValue)
    }
}

extension PluginManifest {
    /// Parses the rate-limit fields (any isolation).
    static func parseRateLimits(_ object: [String: JSON], at: String, fail: (String, String) -> Void) -> PluginRateLimits {
        var limits = PluginRateLimits()
        let fields: [(String, WritableKeyPath<PluginRateLimits, Int>)] = [
            ("logPerSecond", \.logPerSecond), ("logBurst", \.logBurst), ("actionsPerSecond", \.actionsPerSecond), ("actionBurst", \.actionBurst),
        ]
        for (name, path) in fields {
            guard let value = object[name] else { continue }
            if let number = value.int64Value, number >= 1, number <= Int64(Int32.max) {
                limits[keyPath: path] = Int(number)
            } else {
                fail("\(at).\(name)", "must be an integer >= 1")
            }
        }
        return limits
    }
}
