import RoomKitProtocol

// The vocabulary of `PlaybackMachine`: its settings, inputs and actions.
extension PlaybackMachine {
    /// The machine's tunables, in ms.
    public struct Settings: Sendable, Hashable {
        /// Recording ms per slice (> 0).
        public var sliceLength: Int64
        /// Real ms between `scheduleTime` reports while playing.
        public var progressInterval: Int64
        /// Retries of a slice request that failed transiently.
        public var retries: Int
        /// Real ms before such a retry.
        public var retryDelay: Int64

        /// Settings; values below 1 ms are raised to 1.
        public init(sliceLength: Int64, progressInterval: Int64 = 250, retries: Int = 2, retryDelay: Int64 = 500) {
            self.sliceLength = max(1, sliceLength)
            self.progressInterval = max(1, progressInterval)
            self.retries = retries
            self.retryDelay = retryDelay
        }
    }

    /// A slice request: frames with `start <= t < end`, with the snapshot
    /// just before `start` when `snapshot`.
    public struct Fetch: Sendable, Hashable {
        /// Identifies the request; an answer for an older one is ignored.
        public let id: UInt64
        /// First ms of the slice (after `beginTimestamp`).
        public let start: Int64
        /// End of the slice, exclusive.
        public let end: Int64
        /// Whether the answer must carry the snapshot at `start` (first frame, seek).
        public let snapshot: Bool

        /// A request (for tests and simulators; the machine makes its own).
        public init(id: UInt64, start: Int64, end: Int64, snapshot: Bool) {
            self.id = id
            self.start = start
            self.end = end
            self.snapshot = snapshot
        }
    }

    /// What happened.
    public enum Input: Sendable, Hashable {
        /// `Player.play()`.
        case play
        /// `Player.pause()`.
        case pause
        /// `Player.stop()`.
        case stop
        /// `Player.seek(toScheduleTime:)`, ms after `beginTimestamp`.
        case seek(Int64)
        /// A new `playbackSpeed` (clamped to `speeds`).
        case setSpeed(Double)
        /// Fetch `id` was answered.
        case loaded(id: UInt64, RecordingSlice)
        /// Fetch `id` failed.
        case failed(id: UInt64, PlayerError)
        /// The timer set by `.setTimer` fired.
        case timer
    }

    /// What the driver must do, in order.
    public enum Action: Sendable, Hashable {
        /// Request a slice; answer with `.loaded` or `.failed` and its id.
        case fetch(Fetch)
        /// Drop the answer of fetch `id`, which is no longer wanted.
        case cancelFetch(UInt64)
        /// Replace the state with a snapshot (first frame, or a seek's target).
        case reset(RoomSnapshot)
        /// Apply these frames, in order.
        case apply([RecordedFrame])
        /// Report a new phase.
        case phase(PlayerPhase)
        /// Report that the first frame is loaded (once).
        case loadFirstFrame
        /// Report that playback entered the slice named `"start-end"`.
        case sliceChanged(String)
        /// Report the schedule time (ms).
        case scheduleTime(Int64)
        /// Report why the player stopped.
        case stoppedWithError(PlayerError)
        /// Arm the single timer for real time `at` (replacing any earlier one).
        case setTimer(Int64)
        /// Disarm the timer.
        case cancelTimer
        /// Release everything: the player has stopped.
        case release
    }
}
