import Foundation
import Logging
import RoomKitLoop
import RoomKitProtocol

/// Limits of the live event stream (`GET /v1/events/stream`).
struct EventStreamSettings: Sendable {
    /// The most bytes that may wait for one slow client before it is dropped.
    var maxBufferedBytes = 1 << 20
    /// The most stream clients at once; more are answered 503.
    var maxClients = 32
    /// A comment line is sent this often so idle proxies and dead clients show.
    var keepAliveInterval: Duration = .seconds(15)
}

/// Fans the event log's lines out to Server-Sent-Events clients and keeps
/// each room's last event time (for the dashboard).
///
/// The lines come from `EventLog.addTap`, on whichever thread wrote them;
/// they are handed to the loop, where the clients live. A client that reads
/// too slowly overflows its bounded buffer and is dropped (`HTTPStream`).
final class EventFeed: Sendable {
    /// The open streams and the keep-alive timer: the loop's (`LoopBound`
    /// traps on any other thread).
    struct Streams {
        var clients: [ObjectIdentifier: HTTPStream] = [:]
        var keepAlive: LoopTimer?
    }

    let settings: EventStreamSettings
    private let loop: EventLoop
    private let logger: Logger
    private let streams: LoopBound<Streams>
    /// ms since epoch of each room's last event.
    private let lastEvent = LockedValue<[String: Int64]>([:])
    /// The last `recentLimit` lines with a room, oldest first (a room's
    /// detail view shows its own); bounded whatever the room count.
    private let recent = LockedValue<RecentLines>(RecentLines())
    /// How many lines `recent` keeps.
    static let recentLimit = 2000

    init(loop: EventLoop, settings: EventStreamSettings, logger: Logger) {
        self.loop = loop
        self.settings = settings
        self.logger = logger
        streams = LoopBound(Streams(), loop: loop)
    }

    /// Subscribes to `log`. Call once.
    func attach(to log: EventLog) {
        log.addTap { [weak self] entry in self?.receive(entry) }
    }

    /// Every room's last event time (ms since epoch), for rooms that had one since start.
    var lastEventTimes: [String: Int64] { lastEvent.withLock { $0 } }

    /// The newest `limit` kept lines of `room`, oldest first.
    func recentLines(of room: String, limit: Int) -> [EventLogLine] {
        recent.withLock { $0.lines(of: room, limit: limit) }
    }

    private func receive(_ entry: EventLogLine) {
        if let room = entry.room {
            lastEvent.withLock { $0[room] = entry.ts }
            recent.withLock { $0.append(entry, limit: Self.recentLimit) }
        }
        if loop.inEventLoop {
            broadcast(entry.line)
        } else {
            loop.execute { [self] in broadcast(entry.line) }
        }
    }

    /// Sends one SSE message (`data: <line>`) to every client. Loop thread only.
    private func broadcast(_ line: [UInt8]) {
        let clients = streams.value.clients
        guard !clients.isEmpty else { return }
        var message = Array("data: ".utf8)
        message.reserveCapacity(line.count + 8)
        message.append(contentsOf: line.last == 10 ? line.dropLast() : line[...])
        message.append(contentsOf: [10, 10])
        for stream in clients.values {
            stream.send(message)
        }
    }

    /// Answers `GET /v1/events/stream`: a `text/event-stream` of every event
    /// log line from now on. Loop thread only.
    func open(_ responder: HTTPResponder) {
        if streams.value.clients.count >= settings.maxClients {
            responder.respond(status: 503, text: JSON.object([
                "code": .int(Int64(ErrorCode.rateLimited.rawValue)),
                "message": .string("too many event stream clients (\(settings.maxClients))"),
            ]).jsonString)
            return
        }
        guard let stream = responder.startStream(contentType: "text/event-stream", headers: [("cache-control", "no-store")],
                                                 maxBufferedBytes: settings.maxBufferedBytes) else { return }
        let key = ObjectIdentifier(stream)
        streams.value.clients[key] = stream
        stream.onClose = { [weak self] reason in
            guard let self else { return }
            if reason == .overflow {
                logger.warning("event stream client dropped: it read too slowly",
                               metadata: ["maxBufferedBytes": "\(settings.maxBufferedBytes)"])
            }
            streams.withValue { streams in
                streams.clients[key] = nil
                if streams.clients.isEmpty { streams.keepAlive?.stop() }
            }
        }
        // The first bytes tell the client the stream is live.
        stream.send(Array(": roombot event stream\nretry: 2000\n\n".utf8))
        startKeepAlive()
    }

    private func startKeepAlive() {
        if streams.value.keepAlive == nil {
            streams.value.keepAlive = try? LoopTimer(loop: loop) { [weak self] _ in
                guard let self else { return }
                for stream in streams.value.clients.values { stream.send(Array(": keep-alive\n\n".utf8)) }
            }
        }
        if let keepAlive = streams.value.keepAlive, !keepAlive.isScheduled {
            try? keepAlive.start(after: settings.keepAliveInterval, repeating: settings.keepAliveInterval)
        }
    }

    /// Ends every stream and the keep-alive timer. Loop thread only.
    func stop() {
        let clients = streams.withValue { streams in
            streams.keepAlive?.cancel()
            streams.keepAlive = nil
            return streams.clients
        }
        for stream in clients.values { stream.finish() }
    }
}

/// A ring of the last event-log lines that name a room.
struct RecentLines: Sendable {
    private var ring: [EventLogLine] = []
    /// Where the next line goes once the ring is full.
    private var next = 0

    mutating func append(_ line: EventLogLine, limit: Int) {
        if ring.count < limit {
            ring.append(line)
        } else {
            ring[next] = line
            next = (next + 1) % limit
        }
    }

    /// The newest `limit` lines of `room`, oldest first.
    func lines(of room: String, limit: Int) -> [EventLogLine] {
        var found: [EventLogLine] = []
        let count = ring.count
        var index = 0
        while index < count, found.count < limit {
            let line = ring[(next + count - 1 - index) % count]
            if line.room == room { found.append(line) }
            index += 1
        }
        return found.reversed()
    }
}
