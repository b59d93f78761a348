import Foundation

/// A minimal plugin child written with nothing but Python's standard
/// library, straight from docs/PLUGIN-WIRE.md (not the SDK): it proves a
/// `"command"` plugin needs nothing from RoomKit but the wire. Like the C
/// isolation plugins it records each magix payload it finished to argv[1]
/// and misbehaves (argv[2]: none, segfault, exit3, hang) on every event
/// (stall: right after loading, outside any event);
/// with `echo` it answers a magix "!ping" with a magix "reply" {"text": "pong-py"}.
/// Its first log line says whether RoomKit's secrets reached its environment.
enum WirePythonFixture {
    /// Tests/RoomKitPluginTests/Fixtures/wire_fixture_plugin.py.
    static var script: String {
        get throws {
            let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            return try String(contentsOfFile: repo.path + "/Tests/RoomKitPluginTests/Fixtures/wire_fixture_plugin.py", encoding: .utf8)
        }
    }
}
