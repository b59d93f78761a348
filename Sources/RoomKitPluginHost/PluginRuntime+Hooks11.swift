import CRoomKitPluginABI
import Foundation

/// The plugin hooks added in ABI 1.1, each called only when the plugin's
/// descriptor is long enough to have it and the pointer is set.
extension PluginRuntime {
    /// Whether the plugin has on_config_changed.
    var hasConfigChanged: Bool { descriptorHas(\.on_config_changed) && descriptor.pointee.on_config_changed != nil }

    /// Posts one on_config_changed call (room nil: the base config) in
    /// order with the plugin's events; watched like any posted call.
    func configChanged(room: String?, config: String) {
        guard hasConfigChanged else { return }
        post(hook: .configChanged) { [self] in
            config.withCString { json in
                if let room {
                    room.withCString { descriptor.pointee.on_config_changed?(descriptor.pointee.`self`, $0, json) }
                } else {
                    descriptor.pointee.on_config_changed?(descriptor.pointee.`self`, nil, json)
                }
            }
        }
    }

    /// The outcome of export_state.
    enum Export: Sendable, Equatable {
        /// The plugin has no export_state hook (or it returned NULL): nothing to hand over.
        case nothing
        case state(String)
        /// It overran its time limit or returned invalid UTF-8.
        case failed(String)
    }

    /// Runs export_state on the plugin's queue, after every call already
    /// queued, and waits (bounded by the plugin's timeout).
    func exportState(timeout: Duration) -> Export {
        guard descriptorHas(\.export_state), descriptor.pointee.export_state != nil else { return .nothing }
        let result = callAndWait(timeout: timeout, counted: false) { [self] () -> Export? in
            guard let raw = descriptor.pointee.export_state?(descriptor.pointee.`self`) else { return .nothing }
            defer { freeHostString(raw) }
            guard let text = String(validatingCString: raw) else { return .failed("export_state returned invalid UTF-8") }
            return .state(text)
        }
        switch result {
        case .some(let export?): return export
        default: return .failed("export_state did not return within \(timeout)")
        }
    }

    /// Runs import_state on the plugin's queue and waits; nil on success,
    /// else why it failed. A plugin without import_state cannot take state:
    /// handing it some is a failure (the reload rolls back) unless `state` is nil.
    func importState(_ state: String?, timeout: Duration) -> String? {
        guard let state else { return nil }
        guard descriptorHas(\.import_state), descriptor.pointee.import_state != nil else {
            return "the new version has no import_state, but the old one exported state"
        }
        let result = callAndWait(timeout: timeout, counted: false) { [self] () -> Int32? in
            state.withCString { descriptor.pointee.import_state?(descriptor.pointee.`self`, $0) }
        }
        switch result {
        case .some(0?): return nil
        case .some(let code?): return "import_state refused the state (returned \(code))"
        default: return "import_state did not return within \(timeout)"
        }
    }
}
