import Foundation
import RoomKitPluginHost
import RoomKitProtocol

/// The example's plugin manifest. `plugins.json` beside this file names
/// `lib/…so` paths that exist in an installation, not in the source tree;
/// SwiftPM builds the shipped plugin libraries into the same directory as
/// this executable. So at run time each library is looked up where the
/// manifest says and then next to the executable, and a resolved copy with
/// absolute paths is written to the temporary directory and loaded.
enum ExampleManifest {
    /// Where this executable lives (`/proc/self/exe`, else `argv[0]`).
    static var executableDirectory: String {
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? URL(fileURLWithPath: CommandLine.arguments.first ?? ".").standardizedFileURL.path
        return (path as NSString).deletingLastPathComponent
    }

    /// The template: `--manifest`, else `plugins.json` next to the executable,
    /// else the one in the source tree this example was built from.
    static func template(_ given: String?) throws -> String {
        if let given { return given }
        let candidates = [
            executableDirectory + "/plugins.json",
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("plugins.json").path,
        ]
        guard let found = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) else {
            throw TourError("no plugin manifest found (looked at \(candidates.joined(separator: ", "))); pass --manifest PATH")
        }
        return found
    }

    /// Reads the template, makes every `library` absolute, writes the result
    /// to `directory`/plugins.json, and validates it.
    static func resolve(template path: String, into directory: String) throws -> PluginManifest {
        guard let data = FileManager.default.contents(atPath: path), let json = try? JSON.parse(Array(data)),
              var root = json.objectValue, var plugins = root["plugins"]?.arrayValue else {
            throw TourError("\(path): not a plugin manifest")
        }
        let base = (path as NSString).deletingLastPathComponent
        var missing: [String] = []
        for index in plugins.indices {
            guard var plugin = plugins[index].objectValue, let library = plugin["library"]?.stringValue else { continue }
            let name = plugin["name"]?.stringValue ?? "plugins[\(index)]"
            let file = (library as NSString).lastPathComponent
            let candidates = library.hasPrefix("/")
                ? [library]
                : [(base as NSString).appendingPathComponent(library), executableDirectory + "/" + file]
            if let found = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) {
                plugin["library"] = .string((found as NSString).standardizingPath)
                plugins[index] = .object(plugin)
            } else {
                missing.append("\(file) (plugin \(name)) is not built: looked at \(candidates.joined(separator: " and "))")
            }
        }
        guard missing.isEmpty else {
            throw TourError((missing + ["build the shipped plugins with `swift build` (SwiftPM puts them next to multiroom-bot), "
                + "or pass --manifest with absolute library paths"])
                .joined(separator: "\n"))
        }
        root["plugins"] = .array(plugins)
        let resolved = directory + "/plugins.json"
        try Data(JSON.object(root).serialized()).write(to: URL(fileURLWithPath: resolved))
        do {
            return try PluginManifest(path: resolved)
        } catch {
            throw TourError(error.description)
        }
    }
}
