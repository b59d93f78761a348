import Foundation
import RoomKit
import RoomKitProtocol

extension BotRunner {
    /// Logs in to `room` at start. A failure that may pass (the server not
    /// up yet, a timeout, a server error) is retried with the reconnect's
    /// backoff (full jitter, `backoffFirst` doubling up to `backoffCap`) until
    /// the reconnect window has passed since the first attempt; a final one
    /// (bad token, not permitted, ...) is not. Ends early when cancelled.
    /// Each attempt is a real login: LOGINING, then LOGINED or LOGIN_FAILED.
    func join(_ room: String) async {
        let configuration = host.configuration
        let backoff = ConnectionMachine.Backoff(first: configuration.backoffFirst.milliseconds,
                                                cap: configuration.backoffCap.milliseconds)
        let clock = ContinuousClock()
        let giveUp = clock.now + configuration.reconnectWindow
        var attempt = 0
        while !Task.isCancelled, !isStopping {
            do {
                try await host.loginRoom(room, user: config.user, tokenProvider: tokens)
                return
            } catch {
                let code = (error as? RoomError)?.code
                if Task.isCancelled { return }
                guard let code, Self.isTransient(code) else {
                    logger.warning("login failed", metadata: ["room": "\(room)", "error": "\(error)"])
                    return forgetFailed(room)
                }
                let delay = Duration.milliseconds(backoff.delay(attempt: attempt, random: Double.random(in: 0..<1)))
                attempt += 1
                guard clock.now + delay < giveUp else {
                    logger.error("login failed; the reconnect window has passed, not retrying",
                                 metadata: ["room": "\(room)", "attempts": "\(attempt)", "error": "\(error)"])
                    return forgetFailed(room)
                }
                logger.warning("login failed; retrying", metadata: [
                    "room": "\(room)", "error": "\(error)", "attempt": .stringConvertible(attempt), "retryIn": "\(delay)"])
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    return  // cancelled: the bot is stopping
                }
            }
        }
    }

    /// Whether a failed login may succeed if tried again later: no answer in
    /// time (server down or unreachable: 1002053), a lost connection
    /// (1002051), the server's rate limit (1009004) or internal error (1009500).
    static func isTransient(_ code: ErrorCode) -> Bool {
        code == .timedOut || code == .connectionInterrupted || code == .rateLimited || code == .internalError
    }

    /// An operator joined or left `room` through the control API: the room
    /// set follows, and so does readiness (a configured room left this way
    /// is not waited for until it is joined again, or the bot restarts).
    func operatorChose(_ room: String, joined: Bool) {
        remember(room, joined: joined)
        leftByOperator.withLock { left in
            if joined {
                _ = left.remove(room)
            } else {
                _ = left.insert(room)
            }
        }
    }

    /// A remembered room whose login failed for good is no room the bot is in.
    private func forgetFailed(_ room: String) {
        guard !isStopping else { return }
        remember(room, joined: false)
    }

    /// The rooms the bot should be in (`targetRooms`, less the configured
    /// rooms an operator left through the control API) that are not
    /// `LOGINED` or `RECONNECTED`, with their reason and code (`/readyz`).
    public var roomsNotReady: [(room: String, reason: RoomReason, errorCode: ErrorCode)] {
        let left = leftByOperator.withLock { $0 }
        return targetRooms.compactMap { id in
            if left.contains(id) { return nil }
            let content = host.room(id)?.content
            let reason = content?.reason ?? .logout
            if reason == .logined || reason == .reconnected { return nil }
            return (id, reason, content?.errorCode ?? .success)
        }
    }

}
