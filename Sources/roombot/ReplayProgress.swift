import Foundation
import Logging
import RoomKit
import RoomKitCLI

/// `roombot replay`'s progress on stderr: position, duration and speed. On
/// a terminal one line redrawn in place (4 times a second); otherwise a line
/// every `interval` and one at the end; in `--log-format json`, `info` log
/// lines `replay progress` with the same figures as metadata. stdout stays
/// the event log's.
final class ReplayProgress: @unchecked Sendable {
    // @unchecked Sendable: `task` is set and cancelled by the replay command's
    // task only; the reporting task reads nothing mutable but the player.
    private let player: Player
    private let room: String
    private let format: LogFormat
    private let logger: Logger
    private let terminal: Bool
    private let interval: Duration
    private var task: Task<Void, Never>?

    /// `interval`: between lines when stderr is not a terminal (nil: never report).
    init(player: Player, room: String, format: LogFormat, logger: Logger, interval: Duration?) {
        self.player = player
        self.room = room
        self.format = format
        // Progress is what the user asked for: not hidden by --log-level (default warning).
        self.logger = format == .json ? Logger(label: logger.label) { JSONLogHandler(label: $0, level: .info) } : logger
        terminal = format == .text && isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"
        self.interval = terminal ? .milliseconds(250) : (interval ?? .zero)
        if interval == nil && !terminal { return }
        task = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: self.interval)
                if Task.isCancelled { break }
                report(final: false)
            }
        }
    }

    /// Stops reporting; `ended`: print the last figures (100 %) and end the line.
    func finish(ended: Bool) {
        task?.cancel()
        task = nil
        if ended && (terminal || interval > .zero) {
            report(final: true)
        } else if terminal {
            FileHandle.standardError.write(Data("\n".utf8))
        }
    }

    private func report(final: Bool) {
        let info = player.timeInfo
        guard info.timeDuration > 0 || final else { return }  // nothing loaded yet
        let position = final ? info.timeDuration : min(info.scheduleTime, info.timeDuration)
        let speed = player.playbackSpeed
        if format == .json {
            logger.info("replay progress", metadata: [
                "room": "\(room)", "position_ms": "\(position)", "duration_ms": "\(info.timeDuration)", "speed": "\(speed)",
            ])
            return
        }
        let percent = info.timeDuration > 0 ? Int((Double(position) * 100 / Double(info.timeDuration)).rounded(.down)) : 100
        let line = String(format: "replay %@: %.1f s / %.1f s (%d%%) at %@x", room, Double(position) / 1000,
                          Double(info.timeDuration) / 1000, percent, Self.speedText(speed))
        if terminal {
            FileHandle.standardError.write(Data("\r\u{1B}[K\(line)\(final ? "\n" : "")".utf8))
        } else {
            FileHandle.standardError.write(Data("roombot: \(line)\n".utf8))
        }
    }

    /// `8` rather than `8.0`, `0.5` as it is.
    static func speedText(_ speed: Double) -> String {
        speed == speed.rounded() ? String(Int(speed)) : String(speed)
    }
}
