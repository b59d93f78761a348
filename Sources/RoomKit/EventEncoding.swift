import RoomKitProtocol

/// The one encoding of one raised event (a host's `RoomEvent` or a player's
/// `PlayerEvent`): its fields as JSON object members, written at most once,
/// by the first sink that reads them, and shared by every sink of that
/// event (a sole sink gets them written straight into its own buffer, with
/// no copy kept): the event log's line (`logLine`), the dashboard's stream (which
/// taps the log's lines) and plugins' payloads (`appendObject`). A sink
/// that does not exist costs nothing but this small object, made only when
/// an encoded observer is registered (`RoomHost.addEncodedObserver`,
/// `Player.addEncodedObserver`).
///
/// Made and read on the thread that raises the event (the loop), during
/// the raise.
public final class EventEncoding: @unchecked Sendable {
    // @unchecked Sendable: made on the raising thread and read there, during
    // the raise (the observers are synchronous); `cached` is written once.
    private enum Source {
        case room(RoomEvent, replayed: Bool)
        case player(PlayerEvent)
    }
    private let source: Source
    private var cached: [UInt8]?
    /// Set by the broadcaster when this event has one encoded observer: its
    /// reads write the members straight into the sink's own buffer, with
    /// no copy kept (nothing else will read them; a second read by the
    /// same sink writes them again).
    var soleSink = false

    private init(_ source: Source) {
        self.source = source
    }

    /// A host's event; `replayed`: raised by a resume's replay (the fields
    /// then say `"replayed":true`).
    static func room(_ event: RoomEvent, replayed: Bool) -> EventEncoding { EventEncoding(.room(event, replayed: replayed)) }

    /// A player's event.
    static func player(_ event: PlayerEvent) -> EventEncoding { EventEncoding(.player(event)) }

    /// The event's name in the event log (`logName`).
    public var name: String {
        switch source {
        case .room(let event, _): return event.logName
        case .player(let event): return event.logName
        }
    }

    /// The room the event is about, if any.
    public var room: String? {
        switch source {
        case .room(let event, _): return event.room
        case .player(.magix(let magix)): return magix.room
        case .player: return nil
        }
    }

    /// The fields (`logFields`) as JSON object members without braces, a
    /// magix event's own name (`event`) first, then sorted keys. Written on
    /// first use only.
    public var members: [UInt8] {
        if let cached { return cached }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128)
        write(to: &bytes)
        cached = bytes
        return bytes
    }

    private func write(to buffer: inout [UInt8]) {
        switch source {
        case .room(let event, let replayed): event.appendLogMembers(replayed: replayed, to: &buffer)
        case .player(let event): EventMembers.append(event.logFields, to: &buffer)
        }
    }

    /// Whether the members have been written (a sink read them).
    var isWritten: Bool { cached != nil }

    /// Appends `{` members `}`: the payload plugins receive
    /// (`on_room_event`, `on_player_event`; docs/PLUGINS.md).
    public func appendObject(to buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "{"))
        appendMembers(to: &buffer)
        buffer.append(UInt8(ascii: "}"))
    }

    private func appendMembers(to buffer: inout [UInt8]) {
        if cached == nil && soleSink {
            // The only sink: its buffer is the one copy (no array of our own, no second copy).
            write(to: &buffer)
        } else {
            buffer.append(contentsOf: members)
        }
    }

    /// The event-log line at `ts` (ms since 1970; `EventLogFormat`), from
    /// the same members, newline included.
    public func logLine(ts: Int64) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(160)
        appendLogLine(ts: ts, to: &line)
        return line
    }

    /// Appends `logLine(ts:)` to `buffer`: the event log writes its lines
    /// straight into its pending bytes (as the sole sink, the members too).
    public func appendLogLine(ts: Int64, to buffer: inout [UInt8]) {
        EventLogFormat.append(ts: ts, name: name, to: &buffer) { appendMembers(to: &$0) }
    }
}
