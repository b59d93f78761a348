import CRoomKitPluginWire
import Foundation
import RoomKitProtocol

/// A manifest entry's `"command"` (any executable as a plugin, speaking
/// docs/PLUGIN-WIRE.md): the first word is found on `PATH` (or is a path),
/// relative paths among the other words resolve against the manifest's
/// folder, which is also the child's working directory.
enum PluginCommand {
    struct Resolved {
        /// The absolute path given to posix_spawn.
        let executable: String
        /// argv[1...].
        let arguments: [String]
        /// The command as shown in messages and `roombot check`.
        let display: String
    }

    /// Finds the executable and resolves the arguments; a clear error naming the field otherwise.
    static func resolve(_ command: [String], directory: String, plugin: String, at: String) throws(PluginLoadError) -> Resolved {
        guard let first = command.first, !first.isEmpty else {
            throw PluginLoadError(plugin: plugin, stage: .missingFile, message: "\(at).command: must be a non-empty array of strings")
        }
        guard let executable = find(first, directory: directory) else {
            let where_ = first.contains("/") ? "no such executable file" : "not found on PATH"
            throw PluginLoadError(plugin: plugin, stage: .missingFile, message: "\(at).command[0]: \(where_): \(first)")
        }
        let arguments = command.dropFirst().map { argument(in: directory, $0) }
        return Resolved(executable: executable, arguments: Array(arguments), display: ([executable] + arguments).joined(separator: " "))
    }

    /// An argument that names an existing file or folder relative to the
    /// manifest's folder becomes absolute; any other word is passed as it is.
    static func argument(in directory: String, _ word: String) -> String {
        guard !word.hasPrefix("/"), !word.hasPrefix("-"), !word.isEmpty else { return word }
        let candidate = ((directory as NSString).appendingPathComponent(word) as NSString).standardizingPath
        return FileManager.default.fileExists(atPath: candidate) ? candidate : word
    }

    /// `word` with a slash: that file (relative to `directory`); else the first executable of that name on PATH.
    static func find(_ word: String, directory: String) -> String? {
        if word.contains("/") {
            let path = word.hasPrefix("/") ? word : ((directory as NSString).appendingPathComponent(word) as NSString).standardizingPath
            return isExecutable(path) ? path : nil
        }
        let search = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for folder in search.split(separator: ":", omittingEmptySubsequences: true) {
            let path = (String(folder) as NSString).appendingPathComponent(word)
            if isExecutable(path) { return path }
        }
        return nil
    }

    private static func isExecutable(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
            && FileManager.default.isExecutableFile(atPath: path)
    }
}

/// The environment of a plugin child (PLUGIN-WIRE.md section 1): the bot's
/// own, minus RoomKit's secrets, plus the wire's variables.
public enum PluginEnvironment {
    /// Variables never passed to a plugin child.
    public static let secretNames: Set<String> = ["ROOMD_SECRET", "ROOMBOT_TOKEN", "ROOMBOT_SERVICE_TOKEN"]

    /// Whether `name` is one of RoomKit's secrets: a listed one, or any
    /// `ROOMKIT_*`, `ROOMBOT_*` or `ROOMD_*` variable whose name mentions a
    /// token, secret, password or key.
    public static func isSecret(_ name: String) -> Bool {
        if secretNames.contains(name) { return true }
        let upper = name.uppercased()
        guard ["ROOMKIT_", "ROOMBOT_", "ROOMD_"].contains(where: { upper.hasPrefix($0) }) else { return false }
        return ["TOKEN", "SECRET", "PASSWORD", "KEY"].contains { upper.contains($0) }
    }

    /// `NAME=value` strings for posix_spawn.
    public static func forChild(plugin: String, progressPage: Bool,
                                from environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        var variables = environment.filter { !isSecret($0.key) && !$0.key.hasPrefix("ROOMKIT_WIRE_") && $0.key != "ROOMKIT_PROGRESS_FD" }
        variables["ROOMKIT_WIRE_FD"] = "\(ROOMKIT_WIRE_SOCKET_FD)"
        variables["ROOMKIT_WIRE_VERSIONS"] = ROOMKIT_WIRE_VERSIONS_OFFERED
        variables["ROOMKIT_PLUGIN_NAME"] = plugin
        if progressPage { variables["ROOMKIT_PROGRESS_FD"] = "\(ROOMKIT_WIRE_PROGRESS_FD)" }
        return variables.map { "\($0.key)=\($0.value)" }.sorted()
    }
}
