// libFuzzer target: any bytes a server (or a recording) might send a client.
// Decodes them as `ServerPush`, and applies every room event to a snapshot
// through the one shared `RoomContentModel.apply`: neither may crash, and a
// failed apply must leave the snapshot as it was. The client's byte-level
// read of magix pushes (`ServerPush.scanMagix`) must agree with that full
// decode whenever it answers, and so must its read of login replies
// (`LoginReply.scan`).
import RoomKitProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPush(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let fast = ServerPush.scanMagix(Array(bytes))
    let login = LoginReply.scan(Array(bytes)[...])
    guard let json = try? JSON.parse(bytes) else {
        precondition(fast == nil && login == nil, "a scanner read a message that does not parse")
        return 0
    }
    guard case .success(let push) = ServerPush.decode(json) else {
        precondition(fast == nil && login == nil, "a scanner read a message the decoder rejects")
        return 0
    }
    if let login {
        guard case .reply(let id, .success(let fields)) = push, let reply = try? LoginReply(fields: fields) else {
            preconditionFailure("LoginReply.scan read a message that is not a login reply")
        }
        precondition(login.id == id && login.reply == reply, "LoginReply.scan disagrees with the decoder")
    }
    if let fast {
        guard case .room(let roomPush) = push, case .magix(let from, let event, let payload) = roomPush.body else {
            preconditionFailure("scanMagix read a message that is not a magix push")
        }
        precondition(fast.room == roomPush.room && fast.seq == roomPush.seq && fast.from == from && fast.event == event,
                     "scanMagix disagrees with the decoder")
        precondition(fast.payload.value == payload, "scanMagix's payload differs")
        var text: [UInt8] = []
        fast.payload.serialize(into: &text)
        precondition((try? JSON.parse(text)) == payload, "scanMagix's payload text differs")
    }
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
