import RoomKitLoop

extension RoomHost {
    /// The request burst the host paces to now: 75% of the bucket the
    /// server's hello reply advertised, or the configuration's
    /// `requestBurst` before (or without) one. A bot's join pipeline keeps
    /// at most this many logins outstanding. Nil once the host is shut down.
    package func requestBurst() async -> Double? {
        try? await loop.submit { [self] in pacing.burst }
    }
}
