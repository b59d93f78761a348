import Foundation
import Logging
import RoomKitLoop
import Synchronization

/// A room event held back from a plugin while its state moves to a new version.
typealias HeldEvent = PluginRoomEvent

extension PluginPlatformState {
    /// Buffers the event when `plugin` is being reloaded (true), so that it
    /// reaches exactly one version, in order, once the hand-off has an
    /// outcome. Called on the loop thread by dispatch.
    func hold(_ plugin: String, _ event: PluginRoomEvent) -> Bool {
        held.withLock { held in
            guard held[plugin] != nil else { return false }
            held[plugin]?.append(event)
            return true
        }
    }

    /// Whether any plugin's events are being held (one check per event, no lock).
    var holding: Bool { heldCount.load(ordering: .acquiring) > 0 }

    /// Starts holding `plugin`'s room events.
    func startHolding(_ plugin: String) {
        held.withLock { held in
            held[plugin] = []
            heldCount.store(held.count, ordering: .releasing)
        }
    }

    /// Stops holding `plugin`'s room events; returns those held.
    func stopHolding(_ plugin: String) -> [HeldEvent] {
        held.withLock { held in
            defer { heldCount.store(held.count, ordering: .releasing) }
            return held.removeValue(forKey: plugin) ?? []
        }
    }
}

/// Why a reload was rolled back (the old version keeps running, with its state).
public struct PluginReloadError: Error, Sendable, CustomStringConvertible {
    public let plugin: String
    public let reason: String
    public var description: String { "\(plugin): reload rolled back, the old version keeps running: \(reason)" }
}

extension PluginManager {
    /// Reload with state hand-off (`POST /v1/plugins/{name}/reload`):
    /// 1. load the new version beside the old (on_load);
    /// 2. hold the plugin's room events on the loop, then export_state from
    ///    the old (after its last queued event) and import_state into the new;
    /// 3. switch dispatch over and hand the held events to the new version;
    /// 4. unload the old (on_unload after its queued calls).
    /// On any failure the new version is stopped, the held events go to the
    /// old one, which keeps running with its state, and this throws.
    /// Each room event reaches exactly one of the two versions, in order.
    /// Not on the loop thread (it waits for the loop).
    func handOff(_ spec: PluginSpec, path: String?) throws {
        let old = runtimes.withLock { $0.first { $0.spec.name == spec.name && $0.isActive } }
        let new = try start(spec, path: path)
        guard let old, !host.loop.inEventLoop else {
            activate(new)
            return
        }
        let name = spec.name
        do {
            try host.loop.runAndWait { [self] in
                flushTurn()  // what was dispatched before the hold goes to the old version
                platform.startHolding(name)
            }
        } catch {
            activate(new)  // the loop is shut down: no events to order
            return
        }
        let limit = max(old.spec.timeout * 20, .seconds(2))
        var problem: String?
        var state: String?
        switch old.exportState(timeout: limit) {
        case .nothing: break
        case .state(let text): state = text
        case .failed(let why): problem = why
        }
        if problem == nil { problem = new.importState(state, timeout: limit) }
        let outcome = problem
        let switched = (try? host.loop.runAndWait { [self] () -> Bool in
            let held = platform.stopHolding(name)
            let target = outcome == nil ? new : old
            if outcome == nil { activate(new) }
            if target.hasRoomEventHook {
                target.post(roomEvents: held)
            }
            return outcome == nil
        }) ?? false
        if switched {
            logger.info("plugin reloaded with state hand-off", metadata: ["plugin": "\(name)", "stateBytes": "\(state?.utf8.count ?? 0)"])
            return
        }
        new.stop()
        retired.withLock { $0.append(new) }
        let reason = outcome ?? "the loop shut down during the switch"
        logger.error("plugin reload rolled back", metadata: ["plugin": "\(name)", "reason": "\(reason)"])
        throw PluginReloadError(plugin: name, reason: reason)
    }
}
