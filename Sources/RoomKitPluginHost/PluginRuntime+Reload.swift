import Foundation

/// The calls a live config change and a reload make: on_config_changed in
/// order with the events, and the state hand-off from the old instance to
/// the new one (export, then import), for both kinds of endpoint.
extension PluginRuntime {
    /// Whether the plugin takes on_config_changed (a child answers for itself).
    var hasConfigChanged: Bool {
        switch endpoint {
        case .inline(let inline): return inline.hasConfigChanged
        case .process: return true
        }
    }

    /// Posts one on_config_changed call (room nil: the base config) in
    /// order with the plugin's events; watched like any posted call. A
    /// child's is sent at once and finished before the next call runs: a URL
    /// request (which jumps the child's queue of records) after it must find
    /// the new config (PLUGIN-WIRE.md section 5).
    func configChanged(room: String?, config: String) {
        switch endpoint {
        case .inline(let inline):
            guard inline.hasConfigChanged else { return }
            post(hook: .configChanged) { inline.configChanged(room: room, config: config) }
        case .process(let process):
            guard isActive else { return }
            process.configChangesPending.add(1, ordering: .relaxed)
            post(hook: .configChanged) {
                process.configChanged(room: room, config: config)
                process.configChangesPending.subtract(1, ordering: .releasing)
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
    /// queued, and waits (bounded by `timeout`). A child is asked with
    /// EXPORT_STATE; one without the hook answers null (nothing).
    func exportState(timeout: Duration) -> Export {
        let result: Export??
        switch endpoint {
        case .inline(let inline):
            guard inline.hasExportState else { return .nothing }
            result = callAndWait(timeout: timeout, counted: false) { inline.exportState() }
        case .process(let process):
            // The child's round trip waits a second longer than this, so a
            // child that does not answer fails the export (the reload rolls
            // back) rather than look like "no state".
            result = callAndWait(timeout: timeout, counted: false) { process.exportState(timeout: timeout + .seconds(1)) }
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
        let result: Int32??
        switch endpoint {
        case .inline(let inline):
            guard inline.hasImportState else { return "the new version has no import_state, but the old one exported state" }
            result = callAndWait(timeout: timeout, counted: false) { inline.importState(state) }
        case .process(let process):
            result = callAndWait(timeout: timeout, counted: false) { process.importState(state, timeout: timeout + .seconds(1)) }
        }
        switch result {
        case .some(0?): return nil
        case .some(let code?): return "import_state refused the state (returned \(code))"
        default: return "import_state did not return within \(timeout)"
        }
    }
}
