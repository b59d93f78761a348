// libFuzzer target: any bytes a server (or a recording) might send a client.
// Decodes them as `ServerPush`, and applies every room event to a snapshot
// through the one shared `RoomContentModel.apply`: neither may crash, and a
// failed apply must leave the snapshot as it was.
import RoomKitProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPush(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    guard let json = try? JSON.parse(bytes) else { return 0 }
    guard case .success(let push) = ServerPush.decode(json) else { return 0 }
    if case .room(let roomPush) = push {
        var snapshot = RoomSnapshot(state: .initial)
        let before = snapshot
        do {
            try snapshot.apply(roomPush.body)
        } catch {
            precondition(snapshot == before, "a failed apply changed the snapshot")
        }
        // Applying the same event again must be accepted too (idempotent shapes).
        _ = try? snapshot.apply(roomPush.body)
    }
    return 0
}
