import RoomKitLoop
import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTokens
import Synchronization

/// The event log (`--events`): one JSON object per line, `ts` and `event`
/// first. Lines are gathered in a buffer and written together, with one
/// write(2) per flush, so a reader (or a crash) never sees half a line. A
/// log given a loop (`flushOnce(per:)`) flushes once per loop turn (a
/// write(2) per line was 16% of the bot's samples while it logged in to
/// 300,000 rooms, issue #26); `writtenSize` and `close()` flush first, so
/// the store never records a length past the file and a graceful stop
/// loses no line. Without a loop each line is written at once. Safe from
/// any thread.
public final class EventLog: Sendable {
    private let output: LockedValue<Output>
    /// The loop whose turns end with a flush; nil: every line is written at once.
    private let flushLoop = LockedValue<EventLoop?>(nil)
    /// Called with every line written (the dashboard's live tail), on the writer's thread.
    private let taps = LockedValue<[@Sendable (EventLogLine) -> Void]>([])
    /// Lines held past this many bytes are written at once, whatever the loop.
    static let bufferLimit = 256 * 1024

    /// The destination and the lines not yet written to it (under `output`'s lock).
    private struct Output {
        var file: FileHandle?
        var pending: [UInt8] = []
        /// Whether a flush is queued on `flushLoop`.
        var flushQueued = false

        /// Writes the pending lines with one write(2).
        mutating func flush() {
            guard !pending.isEmpty else { return }
            file?.write(Data(pending))
            pending.removeAll(keepingCapacity: pending.count <= EventLog.bufferLimit)
        }
    }

    /// `destination`: a path (appended to, created if missing), `-` for stdout, or nil for none.
    public init(destination: String?) throws {
        switch destination {
        case nil:
            output = LockedValue(Output(file: nil))
        case "-":
            output = LockedValue(Output(file: FileHandle.standardOutput))
        case let path?:
            if !FileManager.default.fileExists(atPath: path) {
                // 0600: the log holds room contents (what the plugins see).
                guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                    throw ConfigError(file: path, field: "", problem: "cannot create the event log")
                }
            }
            guard let file = FileHandle(forWritingAtPath: path) else {
                throw ConfigError(file: path, field: "", problem: "cannot open the event log for writing")
            }
            file.seekToEndOfFile()
            output = LockedValue(Output(file: file))
        }
    }

    /// From now on, lines are written once per turn of `loop` (a task queued
    /// by the first line of a turn), and at once if the loop no longer runs.
    public func flushOnce(per loop: EventLoop) {
        flushLoop.withLock { $0 = loop }
    }

    /// Writes `{"ts":…,"event":name,…fields}` as one line (`EventLogFormat`).
    public func write(_ name: String, _ fields: [String: JSON]) {
        let ts = Int64(Date().timeIntervalSince1970 * 1000)
        let line = EventLogFormat.line(ts: ts, name: name, fields: fields)
        append(line)
        let taps = self.taps.withLock { $0 }
        if !taps.isEmpty {
            let entry = EventLogLine(ts: ts, event: name, room: fields["room"]?.stringValue, line: line)
            for tap in taps { tap(entry) }
        }
    }

    /// Writes the line of one raised event from its one encoding; when the
    /// log has neither a destination nor a tap, nothing is encoded.
    public func write(_ encoding: EventEncoding) {
        let taps = self.taps.withLock { $0 }
        guard output.withLock({ $0.file != nil }) || !taps.isEmpty else { return }
        let ts = Int64(Date().timeIntervalSince1970 * 1000)
        guard !taps.isEmpty else {
            // No tap needs the line as an array of its own: it is written
            // straight into the pending bytes (issue #26: five lines per login).
            return append { encoding.appendLogLine(ts: ts, to: &$0) }
        }
        let line = encoding.logLine(ts: ts)
        append(line)
        let entry = EventLogLine(ts: ts, event: encoding.name, room: encoding.room, line: line)
        for tap in taps { tap(entry) }
    }

    /// Adds `line` to the pending lines and sees that they are written:
    /// now (no loop, a full buffer, a stopped loop) or at the end of the turn.
    private func append(_ line: [UInt8]) {
        append { $0.append(contentsOf: line) }
    }

    /// Adds what `write` appends to the pending lines (under the lock), then
    /// as `append(_:)`.
    private func append(_ write: (inout [UInt8]) -> Void) {
        let loop = flushLoop.withLock { $0 }
        let queue = output.withLock { output -> Bool in
            guard output.file != nil else { return false }
            write(&output.pending)
            guard loop != nil, output.pending.count < Self.bufferLimit else {
                output.flush()
                return false
            }
            defer { output.flushQueued = true }
            return !output.flushQueued
        }
        guard queue, let loop else { return }
        if !loop.execute({ [self] in flush() }) { flush() }
    }

    /// Writes the pending lines now (one write(2)).
    public func flush() {
        output.withLock { output in
            output.flushQueued = false
            output.flush()
        }
    }

    /// Adds `tap`, called with every line written from now on (also when the
    /// log has no destination), on the thread that wrote it.
    public func addTap(_ tap: @escaping @Sendable (EventLogLine) -> Void) {
        taps.withLock { $0.append(tap) }
    }

    public func write(_ event: RoomEvent) {
        write(event.logName, event.logFields)
    }

    /// The length of a file destination after every line written so far,
    /// pending ones flushed first (nil for stdout or no log). The bot's
    /// store records it with each commit.
    public var writtenSize: Int64? {
        output.withLock { output -> Int64? in
            guard let file = output.file, file !== FileHandle.standardOutput else { return nil }
            output.flush()
            guard let offset = try? file.offset() else { return nil }
            return Int64(offset)
        }
    }

    /// Writes the pending lines, then flushes and closes a file destination.
    public func close() {
        output.withLock { output in
            output.flush()
            if let file = output.file, file !== FileHandle.standardOutput {
                try? file.synchronize()
                try? file.close()
            }
            output.file = nil
            output.pending = []
        }
    }
}

/// One line of the event log, as handed to `EventLog.addTap`.
public struct EventLogLine: Sendable {
    /// Its `ts` (ms since epoch).
    public let ts: Int64
    /// Its `event` name.
    public let event: String
    /// Its `room` field, when it has one.
    public let room: String?
    /// The whole line, newline included, exactly as written to the log.
    public let line: [UInt8]
}

/// Tokens from the config's `auth`: minted, fixed, or re-read from a file.
public struct BotTokenProvider: TokenProvider {
    public let auth: BotAuth
    public var ttl: Int64 = 3600
    /// With a secret: the token last minted for each user, shared by every
    /// room until half its lifetime has passed. A token per room was a
    /// signature per login and about 260 bytes a room for as long as the
    /// session lasts (issue #26); the bot holds the secret, so a token for
    /// any room (`"room": "*"`) grants it nothing it could not mint.
    private let minted = LockedValue<[String: (token: String, expiresAt: Int64)]>([:])

    public init(auth: BotAuth) { self.auth = auth }

    public func token(room: String, user: String) async throws -> String {
        switch auth {
        case .secret(let secret):
            let now = Int64(Date().timeIntervalSince1970)
            return minted.withLock { minted in
                if let current = minted[user], current.expiresAt - now > ttl / 2 { return current.token }
                let token = TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: "*", role: .writer, exp: now + ttl, iat: now))
                minted[user] = (token, now + ttl)
                return token
            }
        case .tokens(let tokens):
            if let token = tokens[room] ?? tokens["*"] { return token }
            throw RoomError(code: .tokenInvalid, message: "no token for room \(room) in auth.tokens")
        case .tokenFile(let path):
            guard let data = FileManager.default.contents(atPath: path),
                  let map = try? JSON.parse(Array(data)).objectValue,
                  let token = (map[room] ?? map["*"])?.stringValue else {
                throw RoomError(code: .tokenInvalid, message: "no token for room \(room) in \(path)")
            }
            return token
        }
    }

    /// Whether a new token can be had when one is about to expire.
    public var canRenew: Bool {
        if case .tokens = auth { return false }
        return true
    }
}

/// The JSON state file of earlier versions (rooms joined at run time). Read
/// once, to import it into the `BotStore`; never written any more.
public struct BotStateFile: Sendable {
    public let path: String

    public init(path: String) { self.path = path }

    public func load() -> [String] {
        guard let data = FileManager.default.contents(atPath: path),
              let rooms = try? JSON.parse(Array(data))["rooms"]?.arrayValue else { return [] }
        return rooms.compactMap(\.stringValue).filter(RoomID.isValid)
    }
}
