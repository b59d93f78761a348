import Foundation
import RoomKitProtocol

/// A hook a plugin may declare in the manifest.
public enum PluginHook: String, Sendable, Hashable, CaseIterable {
    case urlInterrupter, throwError, room, magix, player
}

/// One validated manifest entry (CLI.md "Plugin manifest").
public struct PluginSpec: Sendable, Hashable {
    public var name: String
    /// Absolute path of the library: a relative one (a bare name included) is
    /// resolved against the manifest file's directory, or the current
    /// directory when the manifest path has none. Never a search-path name.
    public var library: String
    public var entry: String
    public var abi: Int
    public var hooks: Set<PluginHook>
    public var rooms: [String]
    public var order: Int
    public var enabled: Bool
    public var timeout: Duration
    public var config: JSON
    /// Per-room overrides of `config` (`roomConfig`): glob -> object, merged
    /// one level deep over `config` for the rooms the glob matches.
    public var roomConfig: [String: JSON] = [:]
    /// Bytes (keys + values, UTF-8) the plugin may keep with kv_set
    /// (`storageLimitBytes`, default 1 MiB).
    public var storageLimit = 1 << 20
    /// The entry's index in the manifest (for messages).
    public var index: Int
    /// Where its hooks run (`isolation`, default `process`).
    public var isolation: PluginIsolation = .process
    /// Limits and restart policy when `isolation` is `process`.
    public var supervision = PluginSupervision()
    /// `"command"` instead of `library`: any executable speaking
    /// docs/PLUGIN-WIRE.md, always process-isolated (`library` is then "").
    public var command: [String]?
    /// The manifest's folder (a command's working directory).
    public var directory = ""
    /// Log and action rate limits (any isolation).
    public var rateLimits = PluginRateLimits()
}

/// One problem in a file a user wrote, naming the file and the field: a
/// manifest's (`file: plugins[1].library: no such file`) or, as
/// `ConfigError`, the bot's configuration's (`bot.json: auth.secret: must be
/// a non-empty string`; a flag is named as the file, with no field).
public struct ManifestError: Error, Sendable, Hashable, CustomStringConvertible {
    public let file: String
    public let field: String
    public let problem: String

    /// `file` (or a flag), `field` (empty: the whole file), and what is wrong.
    public init(file: String, field: String, problem: String) {
        self.file = file
        self.field = field
        self.problem = problem
    }

    /// One line, always: control characters from the file (a key with a
    /// newline, say) are escaped, so a manifest cannot forge log lines.
    public var description: String {
        oneLine(field.isEmpty ? "\(file): \(problem)" : "\(file): \(field): \(problem)")
    }
}

/// `text` with control characters escaped (`\n`, `\u{1b}`), so it prints on one line.
public func oneLine(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return text }
    var result = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\n": result += "\\n"
        case "\r": result += "\\r"
        case "\t": result += "\\t"
        default:
            if scalar.properties.generalCategory == .control {
                result += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
    }
    return result
}

/// Every problem found in a manifest, or (as `ConfigErrors`) in the bot's
/// configuration: at least one, printed one per line, exit 2.
public struct ManifestErrors: Error, Sendable, CustomStringConvertible {
    public let errors: [ManifestError]

    /// `errors`: at least one.
    public init(errors: [ManifestError]) {
        self.errors = errors
    }

    public var description: String { errors.map(\.description).joined(separator: "\n") }
}

/// The plugin manifest (`plugins.json`), fully validated before anything is loaded.
public struct PluginManifest: Sendable {
    /// The ABI major version this host speaks.
    public static let hostABIMajor = 1
    public static let hostABIMinor = 1

    public let path: String
    public let plugins: [PluginSpec]

    /// Reads and validates `path`; throws `ManifestErrors` listing every problem.
    public init(path: String) throws(ManifestErrors) {
        let file = (path as NSString).lastPathComponent
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ManifestErrors(errors: [ManifestError(file: file, field: "", problem: "cannot read \(path)")])
        }
        let json: JSON
        do {
            json = try JSON.parse(Array(data))
        } catch {
            throw ManifestErrors(errors: [ManifestError(file: file, field: "", problem: "not valid JSON: \(error)")])
        }
        try self.init(json: json, path: path)
    }

    /// Validates an already-parsed manifest whose file is `path`.
    public init(json: JSON, path: String) throws(ManifestErrors) {
        let file = (path as NSString).lastPathComponent
        // Absolute, so a bare `"library": "libx.so"` never reaches dlopen
        // without a slash (it would search LD_LIBRARY_PATH; docs/SECURITY.md).
        let directory = PluginManifest.absolute((path as NSString).deletingLastPathComponent)
        var errors: [ManifestError] = []
        func fail(_ field: String, _ problem: String) { errors.append(ManifestError(file: file, field: field, problem: problem)) }

        guard let root = json.objectValue else {
            throw ManifestErrors(errors: [ManifestError(file: file, field: "", problem: "must be a JSON object")])
        }
        for key in root.keys where !["manifestVersion", "plugins"].contains(key) { fail(key, "unknown field") }
        switch root["manifestVersion"] {
        case .int(1)?: break
        case nil: fail("manifestVersion", "missing (expected 1)")
        default: fail("manifestVersion", "must be 1")
        }
        var specs: [PluginSpec] = []
        guard let list = root["plugins"]?.arrayValue else {
            fail("plugins", root["plugins"] == nil ? "missing" : "must be an array")
            throw ManifestErrors(errors: errors)
        }
        var seen: [String: Int] = [:]
        let known = Set(["name", "library", "entry", "abi", "hooks", "rooms", "order", "enabled", "timeoutMs", "config", "roomConfig", "storageLimitBytes", "command", "quarantineRetryMs", "quarantineRetryCapMs"] + Self.isolationFields + PluginRateLimits.fields)
        for (index, item) in list.enumerated() {
            let at = "plugins[\(index)]"
            guard let object = item.objectValue else {
                fail(at, "must be an object")
                continue
            }
            let before = errors.count
            for key in object.keys.sorted() where !known.contains(key) { fail("\(at).\(key)", "unknown field") }

            let name = object["name"]?.stringValue ?? ""
            if object["name"] == nil { fail("\(at).name", "missing") }
            else if !Self.isValidName(name) { fail("\(at).name", "must match [a-z0-9-]{1,64}, got '\(name)'") }
            else if let first = seen[name] { fail("\(at).name", "duplicate '\(name)' (also plugins[\(first)])") }
            else { seen[name] = index }

            var library = ""
            var command: [String]?
            if let raw = object["library"]?.stringValue, raw.utf8.contains(0) {
                // A C path ends at the first NUL: dlopen would load another file.
                fail("\(at).library", "must not contain a NUL character")
            } else if let value = object["command"] {
                command = Self.parseCommand(value, at: at, fail: fail)
                if object["library"] != nil { fail("\(at).command", "give library or command, not both") }
                if object["isolation"]?.stringValue == "inline" { fail("\(at).isolation", "a command plugin always runs in its own process") }
            } else if let raw = object["library"]?.stringValue, !raw.isEmpty {
                library = raw.hasPrefix("/") ? raw : (directory as NSString).appendingPathComponent(raw)
                library = (library as NSString).standardizingPath
                var isDirectory: ObjCBool = false
                if !FileManager.default.fileExists(atPath: library, isDirectory: &isDirectory) {
                    fail("\(at).library", "no such file: \(library)")
                } else if isDirectory.boolValue {
                    fail("\(at).library", "is a directory, not a library file: \(library)")
                }
            } else {
                fail("\(at).library", object["library"] == nil ? "missing (give library or command)" : "must be a non-empty string")
            }

            let entry = object["entry"]?.stringValue ?? "roomkit_plugin_entry"
            if object["entry"] != nil && (object["entry"]?.stringValue == nil || !Self.isCIdentifier(entry)) {
                fail("\(at).entry", "must be a C identifier")
            }

            var abi = 0
            if let value = object["abi"]?.int64Value {
                abi = Int(value)
                if abi != Self.hostABIMajor { fail("\(at).abi", "\(abi) does not match the host's ABI \(Self.hostABIMajor)") }
            } else {
                fail("\(at).abi", object["abi"] == nil ? "missing" : "must be an integer")
            }

            var hooks: Set<PluginHook> = []
            if let list = object["hooks"]?.arrayValue {
                for (h, value) in list.enumerated() {
                    if let hook = value.stringValue.flatMap(PluginHook.init(rawValue:)) { hooks.insert(hook) }
                    else {
                        fail("\(at).hooks[\(h)]", "unknown hook \(value.jsonString) (known: \(PluginHook.allCases.map(\.rawValue).joined(separator: ", ")))")
                    }
                }
                if list.isEmpty { fail("\(at).hooks", "must name at least one hook") }
            } else {
                fail("\(at).hooks", object["hooks"] == nil ? "missing" : "must be an array of strings")
            }

            var rooms = ["*"]
            if let value = object["rooms"] {
                if let list = value.arrayValue, list.allSatisfy({ $0.stringValue?.isEmpty == false }), !list.isEmpty {
                    rooms = list.compactMap(\.stringValue)
                } else {
                    fail("\(at).rooms", "must be a non-empty array of glob patterns")
                }
            }
            var order = 0
            if let value = object["order"] {
                do {
                    order = Int(try ExternalNumber.integer(value, field: "\(at).order", in: -1_000_000...1_000_000))
                } catch {
                    fail("\(at).order", error.problem)
                }
            }
            var enabled = true
            if let value = object["enabled"] {
                if let flag = value.boolValue { enabled = flag } else { fail("\(at).enabled", "must be true or false") }
            }
            var timeout = Duration.milliseconds(50)
            if let value = object["timeoutMs"] {
                do {
                    timeout = try ExternalNumber.milliseconds(value, field: "\(at).timeoutMs", in: ExternalNumber.pluginTimeoutMilliseconds)
                } catch {
                    fail("\(at).timeoutMs", error.problem)
                }
            }
            let roomConfig = Self.parseRoomConfig(object["roomConfig"], config: object["config"], at: at, fail: fail)
            var storageLimit = 1 << 20
            if let value = object["storageLimitBytes"] {
                do {
                    storageLimit = Int(try ExternalNumber.integer(value, field: "\(at).storageLimitBytes", in: 0...Int64(Int32.max)))
                } catch {
                    fail("\(at).storageLimitBytes", error.problem)
                }
            }
            let (isolation, supervision) = Self.parseIsolation(object, at: at, fail: fail)
            if errors.count == before {
                specs.append(PluginSpec(name: name, library: library, entry: entry, abi: abi, hooks: hooks, rooms: rooms,
                                        order: order, enabled: enabled, timeout: timeout, config: object["config"] ?? .null,
                                        roomConfig: roomConfig, storageLimit: storageLimit, index: index,
                                        isolation: command == nil ? isolation : .process, supervision: supervision,
                                        command: command, directory: directory,
                                        rateLimits: Self.parseRateLimits(object, at: at, fail: fail)))
            }
        }
        if !errors.isEmpty { throw ManifestErrors(errors: errors) }
        self.path = path
        plugins = specs.sorted { ($0.order, $0.index) < ($1.order, $1.index) }
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 }
    }

    static func isCIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(first >= 48 && first <= 57) else { return false }
        return name.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) || $0 == 95 }
    }
}
