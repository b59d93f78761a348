import Foundation
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// A process plugin that dies in on_load is reported with the signal it died of.
final class OnLoadCrashTests: XCTestCase {
    func testSegfaultInOnLoad_isReportedWithTheSignalsName() async throws {
        let harness = try PluginHarness()
        let library = try compilePlugin("loadcrash", source: TestPlugins.plugin(
            hooks: ".on_room_event = event,",
            body: "static void event(void *s, int32_t k, const char *r, const char *p) { (void)s; (void)k; (void)r; (void)p; }",
            prelude: "static int crash(void) { static int *volatile nowhere; *nowhere = 1; return 0; }",
            onLoad: "crash()"), in: harness.directory)
        let (_, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("loadcrash", library: library, hooks: ["magix"], isolation: "process"),
        ]))
        XCTAssertEqual(errors.count, 1)
        let message = errors.first?.message ?? ""
        XCTAssertTrue(message.contains("on_load crashed: the plugin process was killed by signal 11 (SIGSEGV)"), message)
        XCTAssertFalse(message.contains("returned -1"), message)
        try await harness.close()
    }
}
