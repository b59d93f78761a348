// libFuzzer target: manifest validation on arbitrary JSON never crashes and
// reports at least one one-line problem whenever it refuses.
import Foundation
import RoomKitProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzManifest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let json = try? JSON.parse(UnsafeBufferPointer(start: data, count: size)) else { return 0 }
    do {
        _ = try PluginManifest(json: json, path: "/tmp/fuzz/plugins.json")
    } catch {
        precondition(!error.errors.isEmpty, "refused without a reason")
        precondition(error.errors.allSatisfy { !$0.description.contains("\n") }, "a problem spans lines")
    }
    return 0
}
