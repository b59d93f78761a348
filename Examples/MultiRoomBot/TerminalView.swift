import RoomKitLoop
import Foundation
import RoomKit
import RoomKitPluginHost
import RoomKitProtocol
import Synchronization

/// One frame of the live view: plain values, read from the rooms' caches.
struct Dashboard: Sendable {
    struct Row: Sendable {
        var room: String
        var server: String
        var reason: RoomReason
        var code: Int
        var phase: RoomPhase
        var members: Int?
        var events: Int
        var seq: Int64
    }

    var title: String
    var elapsed: Double
    var total: Int
    var rate: Double
    var magix: Int
    var rows: [Row]
    var plugins: [PluginReport]
    var step: String
    var note: String?
}

extension Demo {
    /// The live view's frame. `Room`'s synchronous properties read a cache
    /// under a lock, so any thread may take one.
    func dashboard(_ world: World) -> Dashboard {
        let rows = world.stats.rooms.compactMap { id, count -> Dashboard.Row? in
            guard let room = world.room(id) else { return nil }
            let content = room.content
            let inRoom = content.phase == .connected || content.phase == .reconnecting
            return Dashboard.Row(room: id, server: count.server, reason: content.reason, code: content.errorCode.rawValue,
                                 phase: content.phase, members: inRoom ? content.members.count : nil,
                                 events: count.events, seq: content.seq)
        }
        let origin = world.embedded == nil ? "roomd" : "embedded roomd"
        return Dashboard(title: "RoomKit multi-room bot · \(origin) \(world.serverURL)", elapsed: console.elapsed,
                         total: world.stats.total, rate: world.stats.rate, magix: world.stats.magix, rows: rows,
                         plugins: world.plugins.reports, step: step.withLock { $0 },
                         note: note.withLock { $0 })
    }
}

extension Demo {
    /// Without the live view: the room table as plain lines (at tour checkpoints).
    func showRooms(_ world: World) {
        guard !console.live else { return }
        console.log("   " + TerminalView.header)
        for row in dashboard(world).rows { console.log("   " + TerminalView.format(row)) }
    }
}

/// The live terminal view: redraws in place about five times a second on
/// the alternate screen (cursor home, each line cleared to its end, then the
/// rest of the screen cleared: no flicker), and leaves the terminal as it
/// found it. Safe from any thread.
final class TerminalView: Sendable {
    private let console: Console
    private let active = LockedValue(false)

    init(console: Console) {
        self.console = console
    }

    /// Takes over the screen and redraws `frame()` until `stop()`.
    func start(_ frame: @escaping @Sendable () -> Dashboard) -> Task<Void, Never> {
        active.withLock { $0 = true }
        Console.write("\u{1B}[?1049h\u{1B}[?25l")  // alternate screen, hide cursor
        let console = self.console
        return Task { [self] in
            while !Task.isCancelled {
                let size = Self.terminalSize()
                let text = Self.render(frame(), recent: console.recent(size.rows), width: size.columns, height: size.rows)
                let drawn = active.withLock { active -> Bool in
                    if active { Console.write(text) }
                    return active
                }
                if !drawn { break }
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// Gives the screen back (main screen, cursor shown). Idempotent.
    func stop() {
        active.withLock { active in
            if active { Console.write("\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l") }
            active = false
        }
    }

    static func terminalSize() -> (columns: Int, rows: Int) {
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 {
            return (Int(size.ws_col), Int(size.ws_row))
        }
        return (100, 30)
    }

    /// The whole frame as one string: home, lines each cleared to the end, clear below.
    static func render(_ board: Dashboard, recent: [String], width: Int, height: Int) -> String {
        var lines: [(text: String, color: String?)] = []
        func add(_ text: String, _ color: String? = nil) { lines.append((text, color)) }

        add(board.title, "1")
        add(String(format: "%6.1f s · %d events · %.0f events/s · %d magix · ", board.elapsed, board.total, board.rate, board.magix)
            + "step: " + board.step)
        add("")
        add(Self.header, "2")
        for row in board.rows { add(Self.format(row), Self.color(row.reason)) }
        add("")
        let plugins = board.plugins.map { "\($0.name) \($0.status.rawValue) (\($0.calls) calls)" }.joined(separator: " · ")
        add("plugins: " + plugins)
        if let note = board.note {
            // Wrapped, not clipped: it is meant to be copied.
            var rest = Substring(note)
            while !rest.isEmpty {
                add(String(rest.prefix(max(10, width - 1))), "36")
                rest = rest.dropFirst(max(10, width - 1))
            }
        }
        add("")
        let room = max(0, height - lines.count - 1)
        for line in recent.suffix(room) { add(line, line.contains("── ") ? "1" : nil) }

        var out = "\u{1B}[H"
        for (index, line) in lines.prefix(height).enumerated() {
            let clipped = String(line.text.prefix(max(1, width - 1)))
            out += line.color.map { "\u{1B}[\($0)m\(clipped)\u{1B}[0m" } ?? clipped
            out += "\u{1B}[K"
            if index < min(lines.count, height) - 1 { out += "\n" }
        }
        return out + "\u{1B}[J"
    }

    static let header = left("ROOM", 9) + left("SERVER", 8) + left("REASON", 17) + left("CODE", 8) + left("PHASE", 13)
        + right("MEMBERS", 7) + right("EVENTS", 8) + right("SEQ", 7)

    /// One room as a table row (also used for plain status lines).
    static func format(_ row: Dashboard.Row) -> String {
        left(row.room, 9) + left(row.server, 8) + left(row.reason.rawValue, 17) + left(row.code == 0 ? "0" : String(row.code), 8)
            + left(row.phase.rawValue, 13) + right(row.members.map(String.init) ?? "-", 7) + right(String(row.events), 8)
            + right(String(row.seq), 7)
    }

    /// Left-aligns `text` in `width` columns (at least one space after it).
    static func left(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(1, width - text.count))
    }

    /// Right-aligns `text` in `width` columns.
    static func right(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }

    /// SGR colour of a reason: green in, yellow on the way, red failures, dim out.
    static func color(_ reason: RoomReason) -> String {
        switch reason {
        case .logined, .reconnected: return "32"
        case .logining, .reconnecting: return "33"
        case .loginFailed, .reconnectFailed, .kickOut, .logoutFailed: return "31"
        case .logout: return "2"
        }
    }
}
