// libFuzzer target: control-API and request bodies: images, scenes, scene
// trees and state patches built from arbitrary JSON never crash.
import RoomKitProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControl(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let json = try? JSON.parse(UnsafeBufferPointer(start: data, count: size)) else { return 0 }
    _ = try? Image(json: json)
    if let scene = try? Scene(json: json) {
        var tree = SceneTree()
        _ = try? tree.putScenes(dir: "/fuzz", scenes: [scene], index: 0)
        _ = try? tree.setScenePath("/fuzz/" + scene.name)
        _ = try? tree.removeScenes(path: "/fuzz")
    }
    if let patch = json.objectValue {
        _ = try? RoomState.initial.applying(patch: patch)
        _ = RoomState.mergeMemberState([:], patch)
    }
    return 0
}
