import Foundation

/// The conformance plugin (WireConformanceTests' doc comment) as a C-ABI
/// library's source, run by roomkit-plugin-host (Fixtures/wire_conformance_plugin.c).
var conformancePluginC: String {
    get throws {
        try String(contentsOfFile: WireConformanceTests.repo + "/Tests/RoomKitPluginTests/Fixtures/wire_conformance_plugin.c",
                   encoding: .utf8)
    }
}
