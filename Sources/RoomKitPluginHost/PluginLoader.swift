import CRoomKitPluginABI
import Foundation
import Logging
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

/// A plugin mapped (inline) or started and greeted (process), not yet loaded.
struct MappedPlugin: Sendable {
    let spec: PluginSpec
    let endpoint: PluginEndpoint
    let mappedPath: String
}

/// dlopen + entry + ABI and hook checks. Never dlcloses: a library stays
/// mapped for the life of the process, so no callback can outlive its code.
enum PluginLoader {
    /// Maps `spec.library` (or `path`, e.g. a fresh copy for a reload) and validates its descriptor.
    /// The path reaching dlopen is always absolute, so it never goes
    /// through the dynamic linker's search path (`LD_LIBRARY_PATH`).
    static func map(_ spec: PluginSpec, path: String? = nil) throws(PluginLoadError) -> MappedPlugin {
        let where_ = "plugins[\(spec.index)] (\(spec.name))"
        let file = PluginManifest.absolute(path ?? spec.library)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else {
            throw PluginLoadError(plugin: spec.name, stage: .missingFile, message: "\(where_).library: no such file: \(file)")
        }
        guard !isDirectory.boolValue else {
            throw PluginLoadError(plugin: spec.name, stage: .missingFile,
                                  message: "\(where_).library: is a directory, not a library file: \(file)")
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
        return MappedPlugin(spec: spec, endpoint: .inline(InlinePluginEndpoint(descriptor: descriptor)), mappedPath: file)
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

    /// Where reload copies go (`$TMPDIR/roomkit-plugins`).
    static var copyDirectory: URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("roomkit-plugins", isDirectory: true)
    }

    /// A private copy of `library`, so a changed file can be mapped beside
    /// the old one (dlopen of the same path would return the old mapping).
    /// Remove it with `removeCopy` once mapped.
    static func sideBySideCopy(of library: String) throws -> String {
        let directory = copyDirectory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let copy = directory.appendingPathComponent("\(UUID().uuidString)-\((library as NSString).lastPathComponent)").path
        try FileManager.default.copyItem(atPath: PluginManifest.absolute(library), toPath: copy)
        return copy
    }

    /// Deletes a reload copy. Safe once dlopen has returned, mapped or not:
    /// on Linux a mapping keeps its file's pages after the name is gone, and
    /// the library is never dlclosed.
    static func removeCopy(_ copy: String) {
        try? FileManager.default.removeItem(atPath: copy)
    }
}

/// What `roombot check` found for one plugin.
public struct PluginCheck: Sendable, Hashable {
    public let spec: PluginSpec
    /// The absolute path that was (or would be) handed to dlopen.
    public let library: String
    /// The plugin's ABI version as its descriptor declares it ("1.0"); nil when not mapped.
    public let abi: String?
    /// The problem, one line; nil when the plugin maps and checks cleanly.
    public let problem: String?
}

/// `roombot check`: maps every plugin of a validated manifest and checks its
/// entry, ABI and declared hooks, without starting it or joining any room.
/// Disabled plugins are checked too (they may be enabled by a reload).
public enum PluginChecker {
    /// One line per problem (empty when all is well).
    public static func check(_ manifest: PluginManifest) -> [String] {
        inspect(manifest).compactMap(\.problem)
    }

    /// Every plugin, in manifest order, with its resolved path and ABI. Each
    /// is checked in a child process as `run` starts it (a library by
    /// roomkit-plugin-host, a command as it is): the HELLO within the load
    /// bound, with a compatible wire version, contract and hooks. A library
    /// whose constructor crashes, an entry that is not a function, or a file
    /// that blocks (a FIFO) costs only that child.
    public static func inspect(_ manifest: PluginManifest) -> [PluginCheck] {
        manifest.plugins.sorted { $0.index < $1.index }.map { spec -> PluginCheck in
            let shown = spec.command?.joined(separator: " ") ?? PluginManifest.absolute(spec.library)
            do throws(PluginLoadError) {
                let process = try PluginProcess.prepare(spec, path: nil, logger: Logger(label: "roombot.check"),
                                                        onStatus: { _, _, _ in })
                let child = try process.handshake()
                let hello = child.waitForHello(timeout: .zero)
                child.kill(because: "checked")
                _ = child.waitForExit(timeout: .seconds(2))
                return PluginCheck(spec: spec, library: process.library,
                                   abi: hello.map { "\($0.abiMajor).\($0.abiMinor)" }, problem: nil)
            } catch {
                return PluginCheck(spec: spec, library: shown, abi: nil, problem: error.message)
            }
        }
    }
}

extension PluginChecker {
    /// One line saying how `spec` would run: `echo: isolation process (memoryLimitMB 1024, ...)`.
    public static func describe(_ spec: PluginSpec) -> String {
        let state = spec.enabled ? "" : ", disabled"
        guard spec.isolation == .process else { return "\(spec.name): isolation inline (in the bot's process\(state))" }
        let s = spec.supervision
        return "\(spec.name): isolation process (memoryLimitMB \(s.memoryLimitMB), cpuLimitSeconds \(s.cpuLimitSeconds), "
            + "maxCrashes \(s.maxCrashes) in \(s.crashWindowSeconds) s, hangFactor \(s.hangFactor)\(state))"
    }
}
