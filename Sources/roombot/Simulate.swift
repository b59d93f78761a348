import ArgumentParser
import Foundation
import Logging
import RoomKit
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitCLI
import RoomKitSimulator

/// `roombot simulate`: the manifest's plugins against scripted rooms in
/// virtual time (docs/PLUGINS.md, "Test with the simulator"; CLI.md).
struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a manifest's plugins against a scripted scenario in virtual time (no server, no sockets).",
        discussion: "Exit 0 when every expect holds, 1 when one does not (each printed with its step and time), 2 for a bad manifest or scenario.")

    @Option(help: "The plugin manifest (plugins.json). Library plugins run inline here; command plugins in their own process.")
    var manifest: String
    @Option(help: "The scenario (a JSON list of timed steps; see docs/PLUGINS.md).")
    var script: String
    @Option(help: "Write the event log (JSON lines, virtual timestamps) to this file, or - for stdout.")
    var events: String?
    @Option(help: "The jitter seed (overrides the scenario's seed).")
    var seed: UInt64?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "error"

    func run() async throws {
        let scenario: Scenario
        do { scenario = try Scenario(path: script) } catch { throw UsageProblems(lines: ["\(error)"]) }
        let file = (manifest as NSString).lastPathComponent
        guard let data = FileManager.default.contents(atPath: manifest), let json = try? JSON.parse(Array(data)) else {
            throw UsageProblems(lines: ["\(file): cannot read \(manifest) as JSON"])
        }
        let parsed: PluginManifest
        do {
            parsed = try PluginManifest(json: PluginManifest.inlined(json), path: manifest)
        } catch {
            throw UsageProblems(lines: error.errors.map(\.description))
        }
        var logger = Logger(label: "roombot.simulate")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .error

        let simulation = try Simulation(scenario: scenario, seed: seed, logger: logger)
        let host = simulation.host
        let user = scenario.user
        // The plugins attach exactly as in `roombot run`: one PluginManager on
        // the host, with per-plugin storage (in memory here) and room logins.
        let plugins = PluginManager(host: host, logger: logger)
        plugins.useStore(MemoryPluginStore())
        plugins.useRoomLogin { room in _ = try await host.loginRoom(room, user: user) }
        let loadErrors = plugins.load(parsed)
        if !loadErrors.isEmpty {
            plugins.unloadAll()
            try await simulation.close()
            throw UsageProblems(lines: loadErrors.map { "\(file): \($0)" })
        }

        simulation.externalWorkIdle = { plugins.processPluginsIdle }
        let failures = try await simulation.run()
        plugins.unloadAll()
        try await simulation.close()

        if let events {
            let bytes = simulation.log.flatMap(\.bytes)
            if events == "-" {
                FileHandle.standardOutput.write(Data(bytes))
            } else if !FileManager.default.createFile(atPath: events, contents: Data(bytes)) {
                throw UsageProblems(lines: ["--events: cannot write \(events)"])
            }
        }
        let name = (script as NSString).lastPathComponent
        let expectations = scenario.steps.filter { if case .expect = $0.kind { return true }; return false }.count
        if failures.isEmpty {
            FileHandle.standardError.write(Data("\(name): \(expectations) expectation(s) held over \(scenario.end) ms of virtual time\n".utf8))
            return
        }
        for failure in failures {
            FileHandle.standardError.write(Data("\(name): \(failure)\n".utf8))
        }
        FileHandle.standardError.write(Data("\(name): \(failures.count) of \(expectations) expectation(s) failed\n".utf8))
        throw ExitCode(1)
    }
}
