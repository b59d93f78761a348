import CRoomKitPluginABI
import Foundation
import RoomKitLoop

/// Why a plugin could not be loaded: one case per stage, each with a message
/// that names the manifest entry.
public struct PluginLoadError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Stage: String, Sendable, Hashable {
        case missingFile, dlopen, missingEntry, abiMismatch, entryRefused, hookNotExported, loadFailed
    }
    public let plugin: String
    public let stage: Stage
    public let message: String
    public var description: String { "\(plugin): \(message)" }
}

/// A library mapped and checked, not yet started.
struct MappedPlugin: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is immutable plugin memory that
    // lives as long as the library stays mapped (forever: we never dlclose).
    let spec: PluginSpec
    let descriptor: UnsafePointer<roomkit_plugin>
    let mappedPath: String
}

/// dlopen + entry + ABI and hook checks. Never dlcloses: a library stays
/// mapped for the life of the process, so no callback can outlive its code.
enum PluginLoader {
    /// Maps `spec.library` (or `path`, e.g. a fresh copy for a reload) and validates its descriptor.
    static func map(_ spec: PluginSpec, path: String? = nil) throws(PluginLoadError) -> MappedPlugin {
        let where_ = "plugins[\(spec.index)] (\(spec.name))"
        let file = path ?? spec.library
        guard FileManager.default.fileExists(atPath: file) else {
            throw PluginLoadError(plugin: spec.name, stage: .missingFile, message: "\(where_).library: no such file: \(file)")
        }
        _ = dlerror()
        guard let handle = dlopen(file, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "unknown dlopen error"
            throw PluginLoadError(plugin: spec.name, stage: .dlopen, message: "\(where_): dlopen failed: \(reason)")
        }
        guard let symbol = dlsym(handle, spec.entry) else {
            throw PluginLoadError(plugin: spec.name, stage: .missingEntry,
                                  message: "\(where_): entry symbol '\(spec.entry)' not found in \(file)")
        }
        let entry = unsafeBitCast(symbol, to: roomkit_plugin_entry_fn.self)
        guard let descriptor = entry(UInt16(ROOMKIT_PLUGIN_ABI_MAJOR), UInt16(ROOMKIT_PLUGIN_ABI_MINOR)) else {
            throw PluginLoadError(plugin: spec.name, stage: .entryRefused,
                                  message: "\(where_): the entry refused host ABI \(ROOMKIT_PLUGIN_ABI_MAJOR).\(ROOMKIT_PLUGIN_ABI_MINOR)")
        }
        keepForProcessLifetime(descriptor)
        let header = descriptor.pointee
        let minimum = MemoryLayout<roomkit_plugin>.offset(of: \roomkit_plugin.on_player_event)! + MemoryLayout<UnsafeRawPointer>.size
        guard header.abi_major == UInt16(ROOMKIT_PLUGIN_ABI_MAJOR), header.abi_minor <= UInt16(ROOMKIT_PLUGIN_ABI_MINOR),
              Int(header.struct_size) >= minimum else {
            throw PluginLoadError(plugin: spec.name, stage: .abiMismatch, message:
                "\(where_): ABI mismatch: plugin \(header.abi_major).\(header.abi_minor) (descriptor \(header.struct_size) bytes), host \(ROOMKIT_PLUGIN_ABI_MAJOR).\(ROOMKIT_PLUGIN_ABI_MINOR)")
        }
        for hook in spec.hooks.sorted(by: { $0.rawValue < $1.rawValue }) {
            let exported: Bool
            switch hook {
            case .urlInterrupter: exported = header.url_interrupter != nil
            case .throwError: exported = header.throw_error != nil
            case .room, .magix: exported = header.on_room_event != nil
            case .player: exported = header.on_player_event != nil
            }
            if !exported {
                throw PluginLoadError(plugin: spec.name, stage: .hookNotExported,
                                      message: "\(where_): declares hook '\(hook.rawValue)' but does not export it")
            }
        }
        return MappedPlugin(spec: spec, descriptor: descriptor, mappedPath: file)
    }

    /// Plugin memory that lives as long as the process, like the libraries
    /// (never dlclosed): every descriptor an entry hands out (the Swift SDK
    /// allocates one per load, with the plugin instance behind it) and every
    /// function table handed to a plugin, which may keep it. Never freed; held
    /// here so it stays reachable (LeakSanitizer reports memory that nothing
    /// points to as leaked).
    private static let processLifetime = LockedValue<[UnsafeRawPointer]>([])

    static func keepForProcessLifetime(_ pointer: UnsafeRawPointer) {
        processLifetime.withLock { $0.append(pointer) }
    }

    /// A private copy of `library`, so a changed file can be mapped beside
    /// the old one (dlopen of the same path would return the old mapping).
    static func sideBySideCopy(of library: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("roomkit-plugins", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let copy = directory.appendingPathComponent("\(UUID().uuidString)-\((library as NSString).lastPathComponent)").path
        try FileManager.default.copyItem(atPath: library, toPath: copy)
        return copy
    }
}

/// `roombot check`: maps every plugin of a validated manifest and checks its
/// entry, ABI and declared hooks, without starting it or joining any room.
public enum PluginChecker {
    /// One line per problem (empty when all is well).
    public static func check(_ manifest: PluginManifest) -> [String] {
        manifest.plugins.compactMap { spec -> String? in
            do throws(PluginLoadError) {
                _ = try PluginLoader.map(spec)
                return nil
            } catch {
                return error.message
            }
        }
    }
}
