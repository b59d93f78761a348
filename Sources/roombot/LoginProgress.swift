import Foundation
import Logging
import RoomKit
import RoomKitBot
import RoomKitCLI
import RoomKitLoop

/// `roombot run`'s start-up progress when it joins more than `threshold`
/// rooms: a stderr line every `interval` while logins are outstanding
/// (`roombot: logins: 140 of 1000 done (138 LOGINED, 2 LOGIN_FAILED)`), and
/// a last one when start-up ends; `info` log lines `logins` in json format.
/// Fewer rooms: silent. Counts rooms, not attempts: a room is done once it
/// is in or given up, however many attempts it took (`BotRunner.joinProgress`).
/// Thread-safe.
final class LoginProgress: Sendable {
    private let progress: @Sendable () -> JoinProgress
    private let printed = LockedValue(-1)
    private let threshold: Int
    private let format: LogFormat
    private let logger: Logger
    private let task = LockedValue<Task<Void, Never>?>(nil)

    init(progress: @escaping @Sendable () -> JoinProgress, threshold: Int = 100, interval: Duration, format: LogFormat,
         logger: Logger) {
        self.progress = progress
        self.threshold = threshold
        self.format = format
        self.logger = logger
        guard interval > .zero else { return }
        task.withLock {
            $0 = Task { [self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    if !Task.isCancelled { report(final: false) }
                }
            }
        }
    }

    /// Start-up is over: stop the periodic lines and print the last one.
    func finish() {
        task.withLock { $0?.cancel(); $0 = nil }
        report(final: true)
    }

    private func report(final: Bool) {
        let now = progress()
        let done = now.joined + now.failed
        let due = printed.withLock { printed -> Bool in
            guard now.total > threshold, final || done != printed else { return false }
            printed = done
            return true
        }
        guard due else { return }
        if format == .json {
            logger.info("logins", metadata: ["done": "\(done)", "total": "\(now.total)", "logined": "\(now.joined)",
                                             "failed": "\(now.failed)", "retrying": "\(now.retrying)"])
        } else {
            FileHandle.standardError.write(Data(
                "roombot: logins: \(done) of \(now.total) done (\(now.joined) LOGINED, \(now.failed) LOGIN_FAILED)\n".utf8))
        }
    }
}
