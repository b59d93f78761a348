import CRoomKitPluginABI
import Dispatch
import Foundation

/// What a plugin *is* to its runtime: one of two kinds of endpoint, neither
/// pretending to be the other (swift-nio's `Channel` over `NIOPosix` and
/// `NIOEmbedded`).
///
/// - `inline`: a dlopen'ed C-ABI library whose hooks are called on the
///   plugin's queue, in the bot's process (`InlinePluginEndpoint`).
/// - `process`: a child process speaking the wire of docs/PLUGIN-WIRE.md
///   (`PluginProcess`): `roomkit-plugin-host` for a library, or any command.
///
/// `PluginRuntime` owns the one queue and the one watchdog of a plugin and
/// asks the endpoint to carry each call; `PluginManager` talks to runtimes.
enum PluginEndpoint: Sendable {
    case inline(InlinePluginEndpoint)
    case process(PluginProcess)

    /// The contract's minor version the plugin was built against (the
    /// descriptor's, or the child's HELLO): kinds added later reach only
    /// plugins that know them.
    var abiMinor: UInt16 {
        switch self {
        case .inline(let inline): return inline.descriptor.pointee.abi_minor
        case .process(let process): return process.abiMinor
        }
    }

    /// Whether room events go to it at all (on_room_event, or a process
    /// plugin declaring `room` or `magix`).
    func hasRoomEventHook(_ spec: PluginSpec) -> Bool {
        switch self {
        case .inline(let inline): return inline.descriptor.pointee.on_room_event != nil
        case .process: return spec.hooks.contains(.room) || spec.hooks.contains(.magix)
        }
    }

    /// The process of a process plugin (nil: inline).
    var process: PluginProcess? {
        switch self {
        case .inline: return nil
        case .process(let process): return process
        }
    }
}

/// A C-ABI library mapped into the bot: its descriptor and the host's
/// function table handed to it. Every method calls one hook on the calling
/// thread, which is the plugin's queue (`PluginRuntime` sees to it).
final class InlinePluginEndpoint: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is immutable plugin memory, mapped
    // for good (never dlclosed); the table is written once, before on_load.

    let descriptor: UnsafePointer<roomkit_plugin>
    /// The host's function table (PluginHostTable.swift); its `context` is
    /// the runtime. The plugin may keep it as long as its library is mapped.
    let table: UnsafeMutablePointer<roomkit_host_api>

    init(descriptor: UnsafePointer<roomkit_plugin>) {
        self.descriptor = descriptor
        table = .allocate(capacity: 1)
        table.initialize(to: makeHostTable())
        PluginLoader.keepForProcessLifetime(UnsafeRawPointer(table))
    }

    private var plugin: roomkit_plugin { descriptor.pointee }

    /// Whether the descriptor is long enough to have `member` (it was built
    /// with a header that has it): a 1.0 descriptor ends before every 1.1
    /// hook, and reading past its end would read foreign memory.
    func has<T>(_ member: KeyPath<roomkit_plugin, T>) -> Bool {
        guard let offset = MemoryLayout<roomkit_plugin>.offset(of: member) else { return false }
        return Int(plugin.struct_size) >= offset + MemoryLayout<T>.size
    }

    var hasConfigChanged: Bool { has(\.on_config_changed) && plugin.on_config_changed != nil }
    var hasOnLoad: Bool { plugin.on_load != nil }

    func load(config: String) -> Int32? {
        config.withCString { plugin.on_load?(plugin.`self`, UnsafePointer(table), $0) }
    }

    func unload() { plugin.on_unload?(plugin.`self`) }

    /// One on_room_event call; `payload` is NUL-terminated UTF-8.
    func roomEvent(kind: Int32, room: UnsafePointer<CChar>, payload: UnsafePointer<CChar>?) {
        plugin.on_room_event?(plugin.`self`, kind, room, payload)
    }

    /// on_player_event with a NUL-terminated payload in place (a turn's buffer).
    func playerEvent(kind: Int32, room: UnsafePointer<CChar>, payload: UnsafePointer<CChar>?) {
        plugin.on_player_event?(plugin.`self`, kind, room, payload)
    }

    func throwError(domain: String, code: Int64, message: String) {
        domain.withCString { d in message.withCString { plugin.throw_error?(plugin.`self`, d, code, $0) } }
    }

    var hasURLInterrupter: Bool { plugin.url_interrupter != nil }
    var hasThrowError: Bool { plugin.throw_error != nil }
    var hasPlayerEvent: Bool { plugin.on_player_event != nil }

    /// url_interrupter: the new URL, or nil (NULL, invalid UTF-8).
    func interrupt(_ url: String) -> String? {
        guard let raw = url.withCString({ plugin.url_interrupter?(plugin.`self`, $0) }) else { return nil }
        // Through the host's own free_string, the counterpart of the
        // alloc_string the plugin had to use (roomkit_plugin.h, "Strings").
        defer { table.pointee.free_string?(table.pointee.context, raw) }
        return String(validatingCString: raw)
    }

    func configChanged(room: String?, config: String) {
        config.withCString { json in
            if let room {
                room.withCString { plugin.on_config_changed?(plugin.`self`, $0, json) }
            } else {
                plugin.on_config_changed?(plugin.`self`, nil, json)
            }
        }
    }

    var hasExportState: Bool { has(\.export_state) && plugin.export_state != nil }
    var hasImportState: Bool { has(\.import_state) && plugin.import_state != nil }

    func exportState() -> PluginRuntime.Export {
        guard let raw = plugin.export_state?(plugin.`self`) else { return .nothing }
        defer { table.pointee.free_string?(table.pointee.context, raw) }
        guard let text = String(validatingCString: raw) else { return .failed("export_state returned invalid UTF-8") }
        return .state(text)
    }

    func importState(_ state: String) -> Int32? {
        state.withCString { plugin.import_state?(plugin.`self`, $0) }
    }
}
