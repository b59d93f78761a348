import CRoomKitPluginABI
import CRoomKitPluginWire
import Foundation

extension PluginProcess {
    /// The ABI 1.1 hooks of the proxy descriptor: on_config_changed is queued
    /// in order with the events (journaled like them) and flushed at once; export_state and
    /// import_state are round trips bounded by `timeoutMs` x 20 (at least 2 s,
    /// the manager's own bound) plus a second. A child plugin without a hook answers as
    /// if it had none (export: NULL; import: ROOMKIT_WIRE_NO_IMPORT).
    func installABI11Hooks(_ d: inout roomkit_plugin) {
        d.on_config_changed = { me, room, config in
            guard let me, let config else { return }
            let process = Unmanaged<PluginProcess>.fromOpaque(me).takeUnretainedValue()
            let seq = process.enqueue(ROOMKIT_WIRE_RECORD_CONFIG_CHANGED, number: 0, a: room, b: config)
            // Sent now, and finished before this returns: a url_interrupter
            // request (which jumps the child's queue of records) after this
            // call must find the new config (PLUGIN-WIRE.md section 5).
            process.writer.sync { process.flush() }
            if let seq, let child = process.lock.withLock({ process.phase == .running ? process.current : nil }) {
                _ = child.waitDone(seq, timeout: process.loadBound)
            }
        }
        d.export_state = { me in
            guard let me else { return nil }
            let process = Unmanaged<PluginProcess>.fromOpaque(me).takeUnretainedValue()
            // ANSWER text = the state, or null for nothing to hand over. The
            // round trip waits a second longer than the manager does, so a
            // child that does not answer makes the manager's wait fail (and
            // the reload roll back) rather than look like "no state".
            guard let answer = process.stateRoundTrip(ROOMKIT_WIRE_EXPORT_STATE, state: nil), let text = answer.text else { return nil }
            return strdup(String(decoding: text, as: UTF8.self))
        }
        d.import_state = { me, state in
            guard let me, let state else { return -1 }
            let process = Unmanaged<PluginProcess>.fromOpaque(me).takeUnretainedValue()
            guard let answer = process.stateRoundTrip(ROOMKIT_WIRE_IMPORT_STATE, state: String(cString: state)) else { return -1 }
            return answer.result == ROOMKIT_WIRE_NO_IMPORT ? -1 : answer.result
        }
    }

    /// One export/import round trip with the running child; nil when it is not running or does not answer in time.
    func stateRoundTrip(_ type: roomkit_wire_down, state: String?) -> (result: Int32, text: [UInt8]?)? {
        guard let child = lock.withLock({ phase == .running ? current : nil }) else { return nil }
        // Every event queued before this call reaches the child first (the
        // export must follow the old version's last event).
        writer.sync { flush() }
        return child.stateRequest(type, state: state, timeout: max(spec.timeout * 20, .seconds(2)) + .seconds(1))
    }
}
