/// The playback position as a function of real time: `position` at real
/// time `anchor`, advancing at `speed` while running, never past `limit`.
/// Pure; real time is any monotonic clock in ms.
public struct PlaybackClock: Sendable, Hashable {
    /// The schedule time (ms) at `anchor`.
    public private(set) var position: Double = 0
    /// The real time (ms) at which `position` held.
    public private(set) var anchor: Int64 = 0
    /// Recording ms per real ms.
    public private(set) var speed: Double = 1
    /// Whether the clock advances.
    public private(set) var isRunning = false
    /// The clock does not advance past this schedule time (the end of the
    /// loaded slices, or the end of the recording).
    public var limit: Double = .infinity

    public init() {}

    /// The schedule time at real time `now`.
    public func time(at now: Int64) -> Double {
        guard isRunning else { return position }
        return min(limit, max(position, position + Double(now - anchor) * speed))
    }

    /// The first real time at which the clock reads `scheduleTime` (nil when
    /// stopped or beyond the limit).
    public func realTime(reaching scheduleTime: Double) -> Int64? {
        guard isRunning, scheduleTime <= limit else { return nil }
        if scheduleTime <= position { return anchor }
        return anchor + Int64(((scheduleTime - position) / speed).rounded(.up))
    }

    /// Starts advancing from the current position.
    public mutating func start(at now: Int64) {
        guard !isRunning else { return }
        anchor = now
        isRunning = true
    }

    /// Freezes at the current time.
    public mutating func stop(at now: Int64) {
        position = time(at: now)
        anchor = now
        isRunning = false
    }

    /// Jumps to `scheduleTime`, keeping the running state.
    public mutating func jump(to scheduleTime: Double, at now: Int64) {
        position = scheduleTime
        anchor = now
    }

    /// Changes the speed from now on, keeping the current time.
    public mutating func setSpeed(_ newSpeed: Double, at now: Int64) {
        position = time(at: now)
        anchor = now
        speed = newSpeed
    }
}
