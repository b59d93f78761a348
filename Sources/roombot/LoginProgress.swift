import Foundation
import Logging
import RoomKit
import RoomKitCLI
import RoomKitLoop

/// `roombot run`'s start-up progress when it joins more than `threshold`
/// rooms: a stderr line every `interval` while logins are outstanding
/// (`roombot: logins: 140 of 1000 done (138 LOGINED, 2 LOGIN_FAILED)`), and
/// a last one when start-up ends; `info` log lines `logins` in json format.
/// Fewer rooms: silent. Counts `LOGINING` as started and `LOGINED` or
/// `LOGIN_FAILED` as done, from the host's events. Thread-safe.
final class LoginProgress: Sendable {
    private struct Counts {
        var started: Set<String> = []
        var logined = 0
        var failed = 0
        var printed = -1
    }

    private let counts = LockedValue(Counts())
    private let threshold: Int
    private let format: LogFormat
    private let logger: Logger
    private let task = LockedValue<Task<Void, Never>?>(nil)

    init(host: RoomHost, threshold: Int = 100, interval: Duration, format: LogFormat, logger: Logger) {
        self.threshold = threshold
        self.format = format
        self.logger = logger
        host.addObserver { [counts] event in
            guard case .roomStateChanged(let room, let reason, _, _) = event else { return }
            counts.withLock { counts in
                switch reason {
                case .logining: counts.started.insert(room)
                case .logined where counts.started.contains(room): counts.logined += 1
                case .loginFailed where counts.started.contains(room): counts.failed += 1
                default: break
                }
            }
        }
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
        let line: (total: Int, logined: Int, failed: Int)? = counts.withLock { counts in
            let done = counts.logined + counts.failed
            guard counts.started.count > threshold, final || done != counts.printed else { return nil }
            counts.printed = done
            return (counts.started.count, counts.logined, counts.failed)
        }
        guard let line else { return }
        let done = line.logined + line.failed
        if format == .json {
            logger.info("logins", metadata: ["done": "\(done)", "total": "\(line.total)",
                                             "logined": "\(line.logined)", "failed": "\(line.failed)"])
        } else {
            FileHandle.standardError.write(Data(
                "roombot: logins: \(done) of \(line.total) done (\(line.logined) LOGINED, \(line.failed) LOGIN_FAILED)\n".utf8))
        }
    }
}
