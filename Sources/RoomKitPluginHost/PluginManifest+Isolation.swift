import RoomKitProtocol

/// Where a plugin's hooks run (manifest `isolation`).
public enum PluginIsolation: String, Sendable, Hashable, CaseIterable {
    /// In its own supervised `roomkit-plugin-host` process (the default): a
    /// crash, a hang or a runaway allocation costs only that plugin's calls.
    case process
    /// Inside the bot's process, on the plugin's own serial queue: the
    /// cheapest calls, but a crash in the plugin kills the bot.
    case inline
}

/// How a process-isolated plugin is supervised (manifest fields; the
/// defaults are the seed values, tests shrink them).
public struct PluginSupervision: Sendable, Hashable {
    /// `memoryLimitMB`: the process's address-space limit (RLIMIT_AS); 0 = none.
    public var memoryLimitMB = 1024
    /// `cpuLimitSeconds`: CPU seconds per process life (RLIMIT_CPU); 0 = none.
    public var cpuLimitSeconds = 0
    /// `maxCrashes`: more crashes than this within `crashWindowSeconds` quarantine the plugin.
    public var maxCrashes = 5
    /// `crashWindowSeconds`: the window `maxCrashes` counts in.
    public var crashWindowSeconds = 300
    /// `restartBackoffMs`: the first restart delay; it doubles per recent crash (±50 % jitter), up to 30 s.
    public var restartBackoffMs = 200
    /// `hangFactor`: a hook still running after `timeoutMs × hangFactor` has its process killed.
    public var hangFactor = 20
    /// `queueLimit`: events waiting for the process (e.g. during a restart) beyond this are dropped and counted.
    public var queueLimit = 10_000
    /// `shutdownTimeoutMs`: how long on_unload may take before SIGKILL.
    public var shutdownTimeoutMs = 500
    /// `quarantineRetryMs` (either isolation): how long a quarantined plugin
    /// stays out before a half-open retry (a reload); doubled by each
    /// quarantine that follows a retry; 0 = until an operator reloads it.
    public var quarantineRetryMs = 30_000
    /// `quarantineRetryCapMs` (either isolation): the longest wait between
    /// retries, and how long a retried plugin must stay well to start over.
    public var quarantineRetryCapMs = 1_800_000

    /// The defaults above.
    public init() {}
}

extension PluginManifest {
    /// The manifest fields this file parses (added to the known set).
    static let isolationFields = ["isolation", "memoryLimitMB", "cpuLimitSeconds", "maxCrashes", "crashWindowSeconds",
                                  "restartBackoffMs", "hangFactor", "queueLimit", "shutdownTimeoutMs"]

    /// `manifest` (a parsed `plugins.json`) with every library plugin inline: its
    /// `isolation` and supervision fields dropped. The simulator runs plugins
    /// this way, so their calls and actions happen in a repeatable order.
    public static func inlined(_ manifest: JSON) -> JSON {
        guard var object = manifest.objectValue, let plugins = object["plugins"]?.arrayValue else { return manifest }
        object["plugins"] = .array(plugins.map { entry in
            // A command plugin always runs in its own process (the simulator
            // waits for it: PluginManager.processPluginsIdle).
            guard var fields = entry.objectValue, fields["command"] == nil else { return entry }
            for key in isolationFields { fields.removeValue(forKey: key) }
            fields["isolation"] = "inline"
            return .object(fields)
        })
        return .object(object)
    }

    /// Parses `isolation` and the supervision fields of entry `at`; every
    /// problem goes to `fail(field, problem)`.
    static func parseIsolation(_ object: [String: JSON], at: String,
                               fail: (String, String) -> Void) -> (PluginIsolation, PluginSupervision) {
        var isolation = PluginIsolation.process
        if let value = object["isolation"] {
            if let mode = value.stringValue.flatMap(PluginIsolation.init(rawValue:)) {
                isolation = mode
            } else {
                fail("\(at).isolation", "must be \"process\" or \"inline\", got \(value.jsonString)")
            }
        }
        var supervision = PluginSupervision()
        // Each range is documented (docs/SECURITY.md "Numeric limits"); the
        // upper bounds keep timeoutMs × hangFactor and the backoff and window
        // arithmetic in nanoseconds inside Int64.
        let fields: [(String, WritableKeyPath<PluginSupervision, Int>, ClosedRange<Int64>)] = [
            ("memoryLimitMB", \.memoryLimitMB, 0...Int64(Int32.max)), ("cpuLimitSeconds", \.cpuLimitSeconds, 0...Int64(Int32.max)),
            ("maxCrashes", \.maxCrashes, 0...Int64(Int32.max)), ("crashWindowSeconds", \.crashWindowSeconds, 1...86_400),
            ("restartBackoffMs", \.restartBackoffMs, 0...3_600_000), ("hangFactor", \.hangFactor, 1...1000),
            ("queueLimit", \.queueLimit, 1...Int64(Int32.max)), ("shutdownTimeoutMs", \.shutdownTimeoutMs, 1...600_000),
        ]
        for (name, path, range) in fields {
            guard let value = object[name] else { continue }
            guard isolation == .process else {
                fail("\(at).\(name)", "only applies with \"isolation\": \"process\"")
                continue
            }
            do {
                supervision[keyPath: path] = Int(try ExternalNumber.integer(value, field: "\(at).\(name)", in: range))
            } catch {
                fail("\(at).\(name)", error.problem)
            }
        }
        // Quarantine recovery applies to both kinds of plugin.
        for (name, path) in [("quarantineRetryMs", \PluginSupervision.quarantineRetryMs),
                             ("quarantineRetryCapMs", \PluginSupervision.quarantineRetryCapMs)] {
            guard let value = object[name] else { continue }
            do {
                supervision[keyPath: path] = Int(try ExternalNumber.integer(value, field: "\(at).\(name)", in: 0...86_400_000))
            } catch {
                fail("\(at).\(name)", error.problem)
            }
        }
        if isolation == .process, supervision.memoryLimitMB > 0, supervision.memoryLimitMB < 16 {
            fail("\(at).memoryLimitMB", "must be 0 (no limit) or at least 16")
        }
        return (isolation, supervision)
    }
}
