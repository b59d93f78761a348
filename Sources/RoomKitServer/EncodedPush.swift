import RoomKitProtocol

/// A room event's push encoded once, as members receive it, the store keeps
/// it and a recording writes it (the bytes are never parsed or serialised
/// again on their way).
///
/// The text has the keys of every object in ascending byte order (what
/// `serialize(into:sortedKeys: true)` writes), so a recording's frame line
/// (PROTOCOL.md §10: the push plus `t`, keys sorted) is these bytes with
/// `"t":…` spliced in at `timeAt`. Rows stored before roomd kept this offset
/// have none, and their frames are re-encoded (`RecordingWriter`).
struct EncodedPush {
    /// The push's JSON text.
    var bytes: [UInt8]
    /// Where a recording frame's `t` member goes: before the first top-level
    /// member whose key sorts after `"t"` (its comma), or before the
    /// closing brace.
    var timeAt: Int

    /// Serialises a push built as a `JSON` object (every op but magix).
    init(_ push: JSON) {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(256)
        guard case .object(let members) = push else {
            push.serialize(into: &buffer, sortedKeys: true)
            self.init(bytes: buffer, timeAt: max(0, buffer.count - 1))
            return
        }
        buffer.append(UInt8(ascii: "{"))
        var timeAt: Int?
        var first = true
        for key in members.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            if timeAt == nil, "t".utf8.lexicographicallyPrecedes(key.utf8) { timeAt = buffer.count }
            if !first { buffer.append(UInt8(ascii: ",")) }
            first = false
            JSON.string(key).serialize(into: &buffer)
            buffer.append(UInt8(ascii: ":"))
            members[key, default: .null].serialize(into: &buffer, sortedKeys: true)
        }
        let at = timeAt ?? buffer.count
        buffer.append(UInt8(ascii: "}"))
        self.init(bytes: buffer, timeAt: at)
    }

    init(bytes: [UInt8], timeAt: Int) {
        self.bytes = bytes
        self.timeAt = timeAt
    }

    /// A magix push written straight from the request's fields:
    /// `{"event":…,"from":…,"op":"magix","payload":…,"room":…,"seq":…,"to":[…]}`.
    /// A payload received as sorted canonical text is copied as is; any
    /// other payload is serialised with sorted keys.
    static func magix(room: String, seq: Int64, from: Int64, event: String, payload: JSONPayload,
                      payloadSorted: Bool, to: [String]?) -> EncodedPush {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(96 + room.utf8.count + event.utf8.count + payloadSize(payload))
        append("{\"event\":", to: &buffer)
        JSON.string(event).serialize(into: &buffer)
        append(",\"from\":", to: &buffer)
        appendInteger(from, to: &buffer)
        append(",\"op\":\"magix\",\"payload\":", to: &buffer)
        switch payload {
        case .text(let text) where payloadSorted:
            buffer.append(contentsOf: text.bytes)
        case .text, .value:
            payload.value.serialize(into: &buffer, sortedKeys: true)
        }
        append(",\"room\":", to: &buffer)
        JSON.string(room).serialize(into: &buffer)
        append(",\"seq\":", to: &buffer)
        appendInteger(seq, to: &buffer)
        let timeAt = buffer.count
        if let to {
            append(",\"to\":[", to: &buffer)
            for (index, id) in to.enumerated() {
                if index > 0 { buffer.append(UInt8(ascii: ",")) }
                JSON.string(id).serialize(into: &buffer)
            }
            buffer.append(UInt8(ascii: "]"))
        }
        buffer.append(UInt8(ascii: "}"))
        return EncodedPush(bytes: buffer, timeAt: timeAt)
    }

    /// A `userUpdate` push written straight from its members, as
    /// `init(ServerMessage.userUpdate(…))` writes it (keys sorted):
    /// `{"op":"userUpdate","room":…,"seq":…,"type":…,"users":[…]}`, each
    /// member `{"memberId":…,"memberState":{…},"name":…,"payload":…,"userId":…}`.
    /// Every login and every leave appends one.
    static func userUpdate(room: String, seq: Int64, type: UpdateType, users: [Member]) -> EncodedPush {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(112 + room.utf8.count + users.count * 64)
        append("{\"op\":\"userUpdate\",\"room\":", to: &buffer)
        JSON.append(string: room, to: &buffer)
        append(",\"seq\":", to: &buffer)
        appendInteger(seq, to: &buffer)
        let timeAt = buffer.count
        append(type == .add ? ",\"type\":\"add\",\"users\":[" : ",\"type\":\"delete\",\"users\":[", to: &buffer)
        for (index, user) in users.enumerated() {
            if index > 0 { buffer.append(UInt8(ascii: ",")) }
            append("{\"memberId\":", to: &buffer)
            appendInteger(user.memberId, to: &buffer)
            append(",\"memberState\":", to: &buffer)
            JSON.object(user.memberState).serialize(into: &buffer, sortedKeys: true)
            if let name = user.name {
                append(",\"name\":", to: &buffer)
                JSON.append(string: name, to: &buffer)
            }
            if let payload = user.payload {
                append(",\"payload\":", to: &buffer)
                payload.serialize(into: &buffer, sortedKeys: true)
            }
            append(",\"userId\":", to: &buffer)
            JSON.append(string: user.userId, to: &buffer)
            buffer.append(UInt8(ascii: "}"))
        }
        append("]}", to: &buffer)
        return EncodedPush(bytes: buffer, timeAt: timeAt)
    }

    /// The reply to a request that appended an event:
    /// `{"id":…,"ok":true,"op":"reply","seq":…}`.
    static func seqReply(id: Int64, seq: Int64) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(64)
        append("{\"id\":", to: &buffer)
        appendInteger(id, to: &buffer)
        append(",\"ok\":true,\"op\":\"reply\",\"seq\":", to: &buffer)
        appendInteger(seq, to: &buffer)
        buffer.append(UInt8(ascii: "}"))
        return buffer
    }

    /// A recording frame line (PROTOCOL.md §10): `push` with `"t":t` at
    /// `timeAt`, then a newline.
    static func appendRecordingLine(push: [UInt8], timeAt: Int, t: Int64, to buffer: inout [UInt8]) {
        let cut = min(max(timeAt, 1), push.count)
        buffer.append(contentsOf: push[0..<cut])
        let opensObject = cut == 1
        if !opensObject { buffer.append(UInt8(ascii: ",")) }
        append("\"t\":", to: &buffer)
        appendInteger(t, to: &buffer)
        if opensObject && cut < push.count && push[cut] != UInt8(ascii: "}") { buffer.append(UInt8(ascii: ",")) }
        buffer.append(contentsOf: push[cut...])
        buffer.append(10)
    }

    private static func payloadSize(_ payload: JSONPayload) -> Int {
        switch payload {
        case .text(let text): return text.bytes.count
        case .value: return 64
        }
    }

    @inline(__always)
    private static func append(_ text: StaticString, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private static func appendInteger(_ value: Int64, to buffer: inout [UInt8]) {
        JSON.int(value).serialize(into: &buffer)
    }
}
