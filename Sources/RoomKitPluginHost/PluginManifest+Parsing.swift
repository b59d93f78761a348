import Foundation
import RoomKitProtocol

// Parsing helpers of the manifest that need nothing but the protocol
// module and Foundation, so `make fuzz` can build the manifest target from
// the manifest files alone (scripts/fuzz.sh).

extension PluginManifest {
    /// `path` made absolute against the current directory (a bare name
    /// handed to dlopen would be looked up in the linker's search path).
    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return ((FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path) as NSString).standardizingPath
    }

    /// Validates `roomConfig`: an object whose keys are non-empty globs and
    /// whose values are objects; only allowed when `config` is an object
    /// (or absent), since overrides merge into its keys.
    static func parseRoomConfig(_ value: JSON?, config: JSON?, at: String, fail: (String, String) -> Void) -> [String: JSON] {
        guard let value else { return [:] }
        let field = at.isEmpty ? "roomConfig" : "\(at).roomConfig"
        guard let object = value.objectValue else {
            fail(field, "must be an object of glob -> object")
            return [:]
        }
        if let config, config != .null, config.objectValue == nil {
            fail(field, "needs \"config\" to be an object (overrides merge into its keys)")
        }
        var result: [String: JSON] = [:]
        for (glob, override) in object.sorted(by: { $0.key < $1.key }) {
            if glob.isEmpty { fail("\(field)[\"\"]", "a glob must not be empty"); continue }
            guard override.objectValue != nil else { fail("\(field)[\"\(glob)\"]", "must be an object"); continue }
            result[glob] = override
        }
        return result
    }
}
