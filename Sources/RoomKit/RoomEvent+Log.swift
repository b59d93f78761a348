import RoomKitProtocol

extension RoomEvent {
    /// The event's name in the event log (CLI.md).
    public var logName: String {
        switch self {
        case .roomStateChanged: return "roomStateChanged"
        case .phaseChanged: return "phaseChanged"
        case .roomStateModified: return "roomStateModified"
        case .beingAbleToCommitChange: return "beingAbleToCommitChange"
        case .disconnectWithError: return "disconnectWithError"
        case .kickedWithReason: return "kickedWithReason"
        case .catchErrorWhenAppendFrame: return "catchErrorWhenAppendFrame"
        case .magix: return "magix"
        case .userUpdate: return "userUpdate"
        case .streamUpdate: return "streamUpdate"
        case .extraInfoUpdate: return "extraInfoUpdate"
        case .tokenWillExpire: return "tokenWillExpire"
        case .throwError: return "throwError"
        case .resync: return "resync"
        }
    }

    /// The event's fields in the event log (CLI.md), without `ts` and `event`.
    /// Plugins receive the same object as their room-event payload.
    public var logFields: [String: JSON] {
        switch self {
        case .roomStateChanged(let room, let reason, let code, let extendedData):
            // Extended data (`cause`, `recovered`) joins the line; it never replaces a standard field.
            let fields: [String: JSON] = ["room": .string(room), "reason": .string(reason.rawValue), "errorCode": .int(Int64(code.rawValue))]
            return fields.merging(extendedData) { standard, _ in standard }
        case .phaseChanged(let room, let phase):
            return ["room": .string(room), "phase": .string(phase.rawValue)]
        case .roomStateModified(let room, let from, let diff):
            return ["room": .string(room), "from": from.map(JSON.int) ?? .null, "keys": .array(diff.keys.map(JSON.string))]
        case .beingAbleToCommitChange(let room, let writable):
            return ["room": .string(room), "writable": .bool(writable)]
        case .disconnectWithError(let room, let error):
            return ["room": .string(room), "error": .string(error)]
        case .kickedWithReason(let room, let code, let reason):
            return ["room": .string(room), "code": .int(Int64(code.rawValue)), "reason": .string(reason)]
        case .catchErrorWhenAppendFrame(let room, let memberId, let error):
            return ["room": .string(room), "memberId": .int(memberId), "error": .string(error)]
        case .magix(let magix):
            var fields: [String: JSON] = ["room": .string(magix.room), "seq": .int(magix.seq), "from": .int(magix.from),
                                          "event": .string(magix.event), "payload": magix.payload]
            if magix.replayed { fields["replayed"] = true }
            return fields
        case .userUpdate(let room, let type, let users):
            return ["room": .string(room), "type": .string(type.rawValue), "users": .array(users.map { .string($0.userId) })]
        case .streamUpdate(let room, let type, let streams):
            return ["room": .string(room), "type": .string(type.rawValue), "streams": .array(streams.map { .string($0.id) })]
        case .extraInfoUpdate(let room, let key, let value):
            return ["room": .string(room), "key": .string(key), "value": .string(value)]
        case .tokenWillExpire(let room, let remaining):
            return ["room": .string(room), "remaining": .int(remaining)]
        case .resync(let resync):
            return ["room": .string(resync.room), "reason": .string(resync.reason.rawValue),
                    "lastAppliedSeq": .int(resync.lastAppliedSeq), "resumedAtSeq": resync.resumedAtSeq.map(JSON.int) ?? .null]
        case .throwError(let domain, let code, let message):
            return ["domain": .string(domain), "code": .int(Int64(code.rawValue)), "message": .string(message)]
        }
    }
}

/// The event log's line format (CLI.md, "Event log"): one JSON object per
/// line, `ts` and `event` first, then a magix line's `magixEvent`, then the
/// other fields with sorted keys.
public enum EventLogFormat {
    /// `{"ts":…,"event":name,…fields}` and a newline. CLI.md lists `event`
    /// both as every line's type and as a field of magix lines (the custom
    /// event's name); a JSON object cannot hold both, so a field named
    /// `event` is written as `magixEvent` (docs/PROTOCOL.md).
    public static func line(ts: Int64, name: String, fields: [String: JSON]) -> [UInt8] {
        var members: [UInt8] = []
        EventMembers.append(fields, to: &members)
        return line(ts: ts, name: name, members: members[...])
    }

    /// The line around `members` (`EventMembers`: a field named `event`
    /// first, then sorted keys): the one place that renames `event`.
    static func line(ts: Int64, name: String, members: ArraySlice<UInt8>) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(members.count + 48)
        line.append(contentsOf: #"{"ts":"#.utf8)
        line.append(contentsOf: String(ts).utf8)
        line.append(contentsOf: #","event":"#.utf8)
        JSON.string(name).serialize(into: &line)
        if !members.isEmpty {
            line.append(44)  // ,
            let custom = Array(#""event":"#.utf8)
            if members.starts(with: custom) {
                line.append(contentsOf: #""magixEvent":"#.utf8)
                line.append(contentsOf: members.dropFirst(custom.count))
            } else {
                line.append(contentsOf: members)
            }
        }
        line.append(contentsOf: "}\n".utf8)
        return line
    }
}

/// The one serializer of an event's fields, as the members of a JSON object
/// without its braces: a field named `event` (a magix event's own name)
/// first, then the others with sorted keys. The event log (`EventLogFormat`)
/// and plugins' payloads (`{` members `}`) are both cut from its output.
enum EventMembers {
    static func append(_ fields: [String: JSON], to buffer: inout [UInt8]) {
        var first = true
        if let custom = fields["event"] {
            append("event", custom, first: &first, to: &buffer)
        }
        for key in fields.keys.sorted() where key != "event" {
            append(key, fields[key]!, first: &first, to: &buffer)
        }
    }

    private static func append(_ key: String, _ value: JSON, first: inout Bool, to buffer: inout [UInt8]) {
        if !first { buffer.append(44) }  // ,
        first = false
        JSON.string(key).serialize(into: &buffer)
        buffer.append(58)  // :
        value.serialize(into: &buffer)
    }
}

extension RoomEvent {
    /// Appends `logFields` (plus `"replayed":true` when `replayed`) as the
    /// members of a JSON object (`EventMembers`' order). A magix event (the
    /// hot path) is written straight from its fields, without building a
    /// dictionary, the payload as the text it arrived in when that text is
    /// canonical (`JSONText`: the same bytes serializing its value writes,
    /// up to object member order).
    func appendLogMembers(replayed: Bool, to buffer: inout [UInt8]) {
        guard case .magix(let magix) = self else {
            var fields = logFields
            if replayed { fields["replayed"] = true }
            return EventMembers.append(fields, to: &buffer)
        }
        appendASCII(#""event":"#, to: &buffer)
        JSON.string(magix.event).serialize(into: &buffer)
        appendASCII(#","from":"#, to: &buffer)
        JSON.int(magix.from).serialize(into: &buffer)
        appendASCII(#","payload":"#, to: &buffer)
        magix.appendPayloadJSON(to: &buffer)
        if magix.replayed || replayed { appendASCII(#","replayed":true"#, to: &buffer) }
        appendASCII(#","room":"#, to: &buffer)
        JSON.string(magix.room).serialize(into: &buffer)
        appendASCII(#","seq":"#, to: &buffer)
        JSON.int(magix.seq).serialize(into: &buffer)
    }

    /// Appends `logFields` as compact JSON text to `buffer`: the room-event
    /// payload plugins receive (`EventEncoding.appendObject`, for one event
    /// on its own). Object key order is not part of the payload's contract.
    package func appendLogFieldsJSON(to buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "{"))
        appendLogMembers(replayed: false, to: &buffer)
        buffer.append(UInt8(ascii: "}"))
    }
}

/// Appends a literal's bytes (no String, no UTF-8 view).
@inline(__always)
private func appendASCII(_ text: StaticString, to buffer: inout [UInt8]) {
    buffer.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
}
