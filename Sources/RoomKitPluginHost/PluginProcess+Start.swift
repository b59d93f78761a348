import CRoomKitPluginABI
import CRoomKitPluginWire
import Foundation
import Logging

extension PluginProcess {
    // MARK: Mapping (the process replaces dlopen)

    /// Starts the plugin's process and waits for its HELLO (PLUGIN-WIRE.md
    /// section 3): for a library, `roomkit-plugin-host` maps it and checks its
    /// entry and ABI (so a library that crashes while loading costs only its
    /// process); a command is started as it is. Checks the HELLO's version,
    /// contract and hooks against the manifest, applies the limits, and
    /// returns the process endpoint.
    static func map(_ spec: PluginSpec, path: String?, logger: Logger,
                    onStatus: @escaping @Sendable (String, PluginStatus, String?) -> Void) throws(PluginLoadError) -> MappedPlugin {
        let process = try prepare(spec, path: path, logger: logger, onStatus: onStatus)
        let child = try process.handshake()
        let minor = child.waitForHello(timeout: .zero)?.abiMinor ?? 0
        process.lock.withLock { process.helloMinor = minor }
        return MappedPlugin(spec: spec, endpoint: .process(process), mappedPath: process.library)
    }

    /// The process for `spec`, not started: what to run, where.
    static func prepare(_ spec: PluginSpec, path: String?, logger: Logger,
                        onStatus: @escaping @Sendable (String, PluginStatus, String?) -> Void) throws(PluginLoadError) -> PluginProcess {
        let where_ = "plugins[\(spec.index)] (\(spec.name))"
        if let command = spec.command {
            let resolved = try PluginCommand.resolve(command, directory: spec.directory, plugin: spec.name, at: where_)
            return PluginProcess(spec: spec, library: resolved.display, executable: resolved.executable,
                                 arguments: resolved.arguments, workingDirectory: spec.directory, logger: logger, onStatus: onStatus)
        }
        let file = path ?? spec.library
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw PluginLoadError(plugin: spec.name, stage: .missingFile, message: "\(where_).library: no such file: \(file)")
        }
        guard let executable = hostExecutable() else {
            throw PluginLoadError(plugin: spec.name, stage: .missingFile, message:
                "\(where_).isolation: roomkit-plugin-host not found next to \(ownExecutable) (install it there, or set ROOMKIT_PLUGIN_HOST)")
        }
        return PluginProcess(spec: spec, library: file, executable: executable, arguments: [file, spec.entry, "\(getpid())"],
                             workingDirectory: nil, logger: logger, onStatus: onStatus)
    }

    /// Spawns the first child and checks its HELLO; kills it and throws on any problem.
    func handshake() throws(PluginLoadError) -> PluginChild {
        let where_ = "plugins[\(spec.index)] (\(spec.name))"
        let child: PluginChild
        do {
            child = try spawn()
        } catch {
            _ = lock.withLock { machine.spawned(.failed(error: "\(error)"), now: PluginChild.monotonicNow()) }
            throw PluginLoadError(plugin: spec.name, stage: .dlopen, message: "\(where_): cannot start \(executable): \(error)")
        }
        let now = { PluginChild.monotonicNow() }
        guard let hello = child.waitForHello(timeout: loadBound) else {
            // Exited on its own (a crash while mapping: the machine heard
            // `exited`), or silent: the machine's `timeout(.hello)`, killed.
            let exited = child.waitForExit(timeout: .milliseconds(50))
            _ = lock.withLock { machine.timeout(.hello, now: now()) }
            child.kill()
            _ = child.waitForExit(timeout: .seconds(1))
            let why = exited ? (child.exitDescription ?? "exited") : "did not answer within \(loadBound)"
            throw PluginLoadError(plugin: spec.name, stage: .dlopen, message: "\(where_): the plugin process \(why) while starting \(library)")
        }
        var problem = Self.check(hello, against: spec)
        if problem == nil {
            let limits = spec.supervision
            let applied = roomkit_wire_limit(child.pid, UInt(limits.memoryLimitMB), UInt(limits.cpuLimitSeconds))
            if applied != 0 {
                problem = (.dlopen, "cannot apply memoryLimitMB/cpuLimitSeconds: \(String(cString: strerror(-applied)))")
            }
        }
        let result = lock.withLock { machine.frame(.hello(problem: problem?.message), now: now()) }
        // A child whose HELLO says it cannot run exits at once: the machine
        // may have heard `exited` first, so the HELLO's own words are the error.
        if let problem {
            child.kill()
            throw PluginLoadError(plugin: spec.name, stage: problem.stage, message: "\(where_): \(problem.message)")
        }
        switch result {
        case .load:
            break
        case .stopAndKill(let reason), .kill(let reason):
            child.kill()
            throw PluginLoadError(plugin: spec.name, stage: .dlopen, message: "\(where_): the plugin process \(child.exitDescription ?? reason) while starting \(library)")
        case .running, .nothing:
            child.kill()
            throw PluginLoadError(plugin: spec.name, stage: .dlopen, message: "\(where_): the plugin process was unloaded while starting")
        }
        return child
    }

    /// Why a HELLO does not fit the manifest entry (nil: it does).
    static func check(_ hello: PluginChild.Hello, against spec: PluginSpec) -> (stage: PluginLoadError.Stage, message: String)? {
        guard hello.stage == 0 else { return (stage(hello.stage), hello.message) }
        guard hello.version == ROOMKIT_WIRE_VERSION else {
            return (.abiMismatch, "the plugin answered wire version \(hello.version); the bot offered \(ROOMKIT_WIRE_VERSIONS_OFFERED)")
        }
        guard Int(hello.abiMajor) == spec.abi else {
            return (.abiMismatch, "abi: the plugin speaks contract \(hello.abiMajor).\(hello.abiMinor), the manifest says \(spec.abi)")
        }
        let needed: [(PluginHook, UInt32)] = [(.urlInterrupter, ROOMKIT_WIRE_HOOK_URL), (.throwError, ROOMKIT_WIRE_HOOK_THROW_ERROR),
                                              (.room, ROOMKIT_WIRE_HOOK_ROOM), (.magix, ROOMKIT_WIRE_HOOK_ROOM),
                                              (.player, ROOMKIT_WIRE_HOOK_PLAYER)]
        for (hook, bit) in needed where spec.hooks.contains(hook) && hello.hooks & bit == 0 {
            let name = hook == .magix ? "room" : hook.rawValue
            return (.hookNotExported, "declares hook '\(name)' but does not export it")
        }
        return nil
    }

    static func stage(_ code: Int32) -> PluginLoadError.Stage {
        switch code {
        case Int32(ROOMKIT_WIRE_STAGE_MISSING_ENTRY.rawValue): return .missingEntry
        case Int32(ROOMKIT_WIRE_STAGE_ENTRY_REFUSED.rawValue): return .entryRefused
        case Int32(ROOMKIT_WIRE_STAGE_ABI_MISMATCH.rawValue), Int32(ROOMKIT_WIRE_STAGE_VERSION.rawValue): return .abiMismatch
        case Int32(ROOMKIT_WIRE_STAGE_HOOK_NOT_EXPORTED.rawValue): return .hookNotExported
        default: return .dlopen
        }
    }

}
