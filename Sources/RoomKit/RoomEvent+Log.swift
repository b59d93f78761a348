import RoomKitProtocol

extension RoomEvent {
    /// The event's name in the event log (CLI.md).
    public var logName: String { Self.logNames[kind] }

    /// Every event's `logName`, by `kind`.
    private static let logNames = [
        "roomStateChanged", "phaseChanged", "roomStateModified", "beingAbleToCommitChange", "disconnectWithError",
        "kickedWithReason", "catchErrorWhenAppendFrame", "magix", "userUpdate", "streamUpdate", "extraInfoUpdate",
        "tokenWillExpire", "throwError", "resync",
    ]

    /// How many kinds of event there are: `kind` is below it.
    static var kinds: Int { logNames.count }

    /// The event's case as a small index (0 ..< `kinds`): its `logName`'s
    /// place in `logNames`, and its counter's in `RoomHostMetrics`.
    var kind: Int {
        switch self {
        case .roomStateChanged: return 0
        case .phaseChanged: return 1
        case .roomStateModified: return 2
        case .beingAbleToCommitChange: return 3
        case .disconnectWithError: return 4
        case .kickedWithReason: return 5
        case .catchErrorWhenAppendFrame: return 6
        case .magix: return 7
        case .userUpdate: return 8
        case .streamUpdate: return 9
        case .extraInfoUpdate: return 10
        case .tokenWillExpire: return 11
        case .throwError: return 12
        case .resync: return 13
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
    /// first, then sorted keys).
    static func line(ts: Int64, name: String, members: ArraySlice<UInt8>) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(members.count + 48)
        append(ts: ts, name: name, to: &line) { $0.append(contentsOf: members) }
        return line
    }

    /// Appends the line to `buffer`, its members written in place by
    /// `members` (`EventMembers`' order): the one place that renames `event`.
    static func append(ts: Int64, name: String, to buffer: inout [UInt8], members: (inout [UInt8]) -> Void) {
        JSON.appendLiteral(#"{"ts":"#, to: &buffer)
        JSON.int(ts).serialize(into: &buffer)
        JSON.appendLiteral(#","event":"#, to: &buffer)
        JSON.string(name).serialize(into: &buffer)
        buffer.append(44)  // ,
        let start = buffer.count
        members(&buffer)
        if buffer.count == start {
            buffer.removeLast()  // no members: no comma
        } else if buffer.count - start > customKey.count,
                  buffer.withUnsafeBufferPointer({ $0[start..<start + customKey.count].elementsEqual(customKey) }) {
            buffer.replaceSubrange(start..<start + customKey.count, with: renamedKey)
        }
        JSON.appendLiteral("}\n", to: &buffer)
    }

    private static let customKey: [UInt8] = Array(#""event":"#.utf8)
    private static let renamedKey: [UInt8] = Array(#""magixEvent":"#.utf8)
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
    /// hot path) and the three events of every login are written straight
    /// from their fields, without building a dictionary; a magix payload as
    /// the text it arrived in when that text is canonical (`JSONText`: the
    /// same bytes serializing its value writes, up to object member order).
    func appendLogMembers(replayed: Bool, to buffer: inout [UInt8]) {
        switch self {
        case .magix(let magix):
            return Self.appendMagixMembers(magix, replayed: replayed, to: &buffer)
        // A login raises these three, five times per room: written straight
        // from their fields in `EventMembers`' order (sorted keys), with no
        // dictionary (issue #26: 1,000,000 logins).
        case .roomStateChanged(let room, let reason, let code, let extendedData)
            where extendedData.isEmpty || Self.isStandardExtension(extendedData):
            // The engine's own extended data (`cause`, `recovered`) sorts around the standard keys.
            if case .int(let cause)? = extendedData["cause"] {
                JSON.appendLiteral(#""cause":"#, to: &buffer)
                JSON.int(cause).serialize(into: &buffer)
                buffer.append(44)  // ,
            }
            JSON.appendLiteral(#""errorCode":"#, to: &buffer)
            JSON.int(Int64(code.rawValue)).serialize(into: &buffer)
            JSON.appendLiteral(#","reason":"#, to: &buffer)
            JSON.string(reason.rawValue).serialize(into: &buffer)
            if case .bool(let recovered)? = extendedData["recovered"] {
                JSON.appendLiteral(recovered ? #","recovered":true"# : #","recovered":false"#, to: &buffer)
            }
            if replayed { JSON.appendLiteral(#","replayed":true"#, to: &buffer) }
            JSON.appendLiteral(#","room":"#, to: &buffer)
            JSON.string(room).serialize(into: &buffer)
        case .phaseChanged(let room, let phase):
            JSON.appendLiteral(#""phase":"#, to: &buffer)
            JSON.string(phase.rawValue).serialize(into: &buffer)
            if replayed { JSON.appendLiteral(#","replayed":true"#, to: &buffer) }
            JSON.appendLiteral(#","room":"#, to: &buffer)
            JSON.string(room).serialize(into: &buffer)
        case .beingAbleToCommitChange(let room, let writable):
            if replayed { JSON.appendLiteral(#""replayed":true,"#, to: &buffer) }
            JSON.appendLiteral(#""room":"#, to: &buffer)
            JSON.string(room).serialize(into: &buffer)
            JSON.appendLiteral(writable ? #","writable":true"# : #","writable":false"#, to: &buffer)
        default:
            var fields = logFields
            if replayed { fields["replayed"] = true }
            EventMembers.append(fields, to: &buffer)
        }
    }

    /// Whether `extendedData` holds only the engine's own keys: an integer
    /// `cause`, a boolean `recovered`, or both.
    private static func isStandardExtension(_ extendedData: [String: JSON]) -> Bool {
        guard extendedData.count <= 2 else { return false }
        var known = 0
        if case .int? = extendedData["cause"] { known += 1 }
        if case .bool? = extendedData["recovered"] { known += 1 }
        return known == extendedData.count
    }

    private static func appendMagixMembers(_ magix: MagixEvent, replayed: Bool, to buffer: inout [UInt8]) {
        JSON.appendLiteral(#""event":"#, to: &buffer)
        JSON.string(magix.event).serialize(into: &buffer)
        JSON.appendLiteral(#","from":"#, to: &buffer)
        JSON.int(magix.from).serialize(into: &buffer)
        JSON.appendLiteral(#","payload":"#, to: &buffer)
        magix.appendPayloadJSON(to: &buffer)
        if magix.replayed || replayed { JSON.appendLiteral(#","replayed":true"#, to: &buffer) }
        JSON.appendLiteral(#","room":"#, to: &buffer)
        JSON.string(magix.room).serialize(into: &buffer)
        JSON.appendLiteral(#","seq":"#, to: &buffer)
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
