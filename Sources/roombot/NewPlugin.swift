import ArgumentParser
import Foundation
import RoomKitCLI

/// `roombot new-plugin NAME --lang c|swift|rust|python [--dir DIR]`: writes a
/// complete, buildable plugin project (source, build file, plugins.json, a
/// scenario for `roombot simulate`, a README that builds and loads it in two
/// commands, and a passing test that runs the scenario too).
struct NewPlugin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new-plugin",
        abstract: "Write a new plugin project (C, Swift, Rust or Python) that builds, tests and loads as it is.")

    @Argument(help: "The plugin's name: [a-z][a-z0-9-]{0,63} (its manifest name).")
    var name: String
    @Option(help: "c, swift, rust or python.")
    var lang: String
    @Option(help: "Where to write the project (default: ./NAME). Must not exist or be empty.")
    var dir: String?
    @Option(name: .customLong("roomkit-path"),
            help: "Swift: the RoomKit package to depend on (default: the checkout this roombot was built in, or PREFIX/share/roomkit/package after make install); Python: the README installs the SDK from its sdk/python.")
    var roomkitPath: String?

    func run() throws {
        guard !name.isEmpty, name.utf8.count <= 64,
              name.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 }),
              name.first?.isLetter == true else {
            throw UsageProblems(lines: ["NAME: must match [a-z][a-z0-9-]{0,63}, got '\(name)'"])
        }
        let files: [String: String]
        let next: String
        let scaffold = Scaffold(name: name)
        switch lang {
        case "c": (files, next) = (scaffold.c, "cd \(target) && make")
        case "rust": (files, next) = (try scaffold.rust, "cd \(target) && cargo build --release && cargo test")
        case "swift":
            guard let package = roomkitPath ?? Scaffold.installedRoomKit() else {
                throw UsageProblems(lines: ["--roomkit-path: no RoomKit package next to this roombot (neither a checkout around "
                    + "its .build nor PREFIX/share/roomkit/package from make install); give the path of a RoomKit checkout"])
            }
            (files, next) = (scaffold.swift(roomkitPath: package), "cd \(target) && swift build && swift test")
        case "python":
            let sdk = roomkitPath.map { (($0 as NSString).standardizingPath as NSString).appendingPathComponent("sdk/python") }
            (files, next) = (try scaffold.python(sdk: sdk), "cd \(target) && python3 -m unittest -v")
        default: throw UsageProblems(lines: ["--lang: must be c, swift, rust or python, got '\(lang)'"])
        }
        let fm = FileManager.default
        if let existing = try? fm.contentsOfDirectory(atPath: target), !existing.isEmpty {
            throw UsageProblems(lines: ["--dir: \(target) exists and is not empty"])
        }
        for (path, text) in files.sorted(by: { $0.key < $1.key }) {
            let full = (target as NSString).appendingPathComponent(path)
            let parent = (full as NSString).deletingLastPathComponent
            do {
                try fm.createDirectory(atPath: parent, withIntermediateDirectories: true)
            } catch {
                throw UsageProblems(lines: ["--dir: cannot create \(parent): \(Self.reason(error))"])
            }
            do {
                try text.write(toFile: full, atomically: true, encoding: .utf8)
            } catch {
                throw UsageProblems(lines: ["--dir: cannot write \(full): \(Self.reason(error))"])
            }
        }
        print("wrote \(lang) plugin '\(name)' to \(target) (\(files.count) files); next: \(next)")
    }

    private var target: String { dir ?? name }

    /// The operating system's reason for a failed file operation ("Permission
    /// denied"), not Foundation's wrapped NSCocoaErrorDomain text.
    static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if nsError.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(nsError.code))) }
        if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
        return nsError.localizedDescription
    }
}

/// The files of a new plugin project, by relative path.
struct Scaffold {
    let name: String
    /// `name` as a C/Rust identifier (`-` becomes `_`).
    var identifier: String { name.replacingOccurrences(of: "-", with: "_") }
    /// `name` as a Swift type name (`my-bot` -> `MyBot`).
    var typeName: String {
        name.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    func manifest(library: String, hooks: String = "\"magix\"") -> String {
        """
        {
          "manifestVersion": 1,
          "plugins": [
            {
              "name": "\(name)",
              "library": "\(library)",
              "abi": 1,
              "hooks": [\(hooks)],
              "rooms": ["*"],
              "timeoutMs": 50,
              "config": {"greeting": "hello"},
              "roomConfig": {"vip-*": {"greeting": "welcome back"}}
            }
          ]
        }

        """
    }

    /// The scaffold's scenario for `roombot simulate` (docs/PLUGINS.md): a
    /// ping answered with the manifest's greeting, and with the `vip-*`
    /// rooms' one from `roomConfig`.
    var scenario: String {
        """
        {
          "seed": 1,
          "steps": [
            {"at": 0, "login": {"room": "lobby"}},
            {"at": 100, "join": {"room": "lobby", "user": "alice"}},
            {"at": 500, "magix": {"room": "lobby", "from": "alice", "event": "ping"}},
            {"at": 500, "expect": {"within": 100, "count": 1,
                                   "action": {"op": "magix", "room": "lobby", "event": "pong", "payload": {"greeting": "hello", "to": 2}}}},
            {"at": 600, "magix": {"room": "lobby", "from": "alice", "event": "chat", "payload": "ping"}},
            {"at": 600, "expect": {"within": 400, "count": 0, "action": {"op": "magix", "room": "lobby", "event": "pong"}}},
            {"at": 1000, "login": {"room": "vip-lounge"}},
            {"at": 1500, "magix": {"room": "vip-lounge", "from": "bob", "event": "ping"}},
            {"at": 1500, "expect": {"within": 100, "count": 1,
                                    "action": {"op": "magix", "room": "vip-lounge", "event": "pong", "payload": {"greeting": "welcome back"}}}}
          ]
        }

        """
    }

    /// What every scaffold's README says about running it for real.
    var runSection: String { runSection(plugin: "library") }

    /// The same, for a plugin that is a `library` or a `command`.
    func runSection(plugin kind: String) -> String {
        let checks = kind == "library" ? "maps the library and checks its ABI and hooks"
            : "starts the plugin and checks its hello (wire version, ABI, hooks)"
        let loaded = kind == "library" ? "library loaded as the bot loads it" : "plugin run as the bot runs it, a process of its own"
        let swaps = kind == "library" ? "After rebuilding, `POST /v1/plugins/\(name)/reload` swaps the library in"
            : "After editing, `POST /v1/plugins/\(name)/reload` swaps the process in"
        return """
        ## Test it in the simulator

        The test above also runs `scenario.json` in roombot's simulator: the
        \(loaded), against scripted rooms in virtual
        time (a ping answered in `lobby`, the `vip-*` greeting in `vip-lounge`).
        Add steps for what your plugin must survive (kicks, token expiry, a
        20-minute outage) and run it alone with

            roombot simulate --manifest plugins.json --script scenario.json --events -

        (docs/PLUGINS.md, "Test with the simulator", has the format).

        ## Run it in a bot

        `roombot check` above \(checks).
        To run it, point a bot config at the manifest (docs/CLI.md, "roombot"):

            roombot run --config bot.json --manifest plugins.json

        Then, in any room the bot is in, send the magix event `ping`: the
        plugin answers `pong` with `{"greeting": …, "to": <your memberId>}`.
        The greeting is the manifest's `config.greeting`, overridden per room
        by `roomConfig` (`vip-*` rooms get "welcome back"), and can be changed
        live without a reload:

            curl -X PUT http://127.0.0.1:8081/v1/plugins/\(name)/config \\
                 -d '{"config": {"greeting": "hi"}}'

        \(swaps)
        place; see docs/PLUGINS.md for the state hand-off.

        """
    }
}
