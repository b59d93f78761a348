import RoomKitProtocol

// The vocabulary of `PlaybackMachine`: its settings, its slice requests, and
// what each input leads to.
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

    // Each input has its own method and its own small result, in the shape
    // of `ConnectionMachine` (and Hummingbird's state machines): a result
    // says what happened, and the driver decides the order of the effects
    // it performs for it. The parts every input but `stop()` shares (what
    // the clock did, a seek) are values the results carry.

    /// The single timer: armed for real time `at` (replacing any earlier
    /// one), or disarmed because nothing is due.
    public enum TimerChange: Sendable, Hashable {
        case arm(at: Int64)
        case disarm
    }

    /// What the clock led to when an input arrived: frames fell due, playback
    /// entered another slice, the clock stopped at the end of what is loaded,
    /// a progress report, the next slice to load ahead, and the timer for the
    /// next of these. Every input but `stop()` ends with one, since any input
    /// may be the first news that time has passed.
    public struct Progress: Sendable, Hashable {
        /// Frames now due, in order.
        public var frames: [RecordedFrame]
        /// The slice playback entered, named `"start-end"`.
        public var slice: String?
        /// `buffering` or `ended`: the clock reached the end of what is loaded.
        public var phase: PlayerPhase?
        /// The schedule time to report (ms).
        public var scheduleTime: Int64?
        /// The slice after the loaded ones, requested ahead of the clock.
        public var prefetch: Fetch?
        /// What the timer must do.
        public var timer: TimerChange

        /// A progress (for tests and simulators; the machine makes its own).
        public init(frames: [RecordedFrame] = [], slice: String? = nil, phase: PlayerPhase? = nil,
                    scheduleTime: Int64? = nil, prefetch: Fetch? = nil, timer: TimerChange) {
            self.frames = frames
            self.slice = slice
            self.phase = phase
            self.scheduleTime = scheduleTime
            self.prefetch = prefetch
            self.timer = timer
        }
    }

    /// A move of the position: what was loading is abandoned, and the state
    /// at the target is requested with its snapshot.
    public struct Seek: Sendable, Hashable {
        /// The request it abandons, whose answer must be dropped.
        public var cancelling: UInt64?
        /// `buffering` or `pause`, when the phase changed (never before the
        /// first frame: the player is still waiting for it).
        public var phase: PlayerPhase?
        /// The snapshot request at the target.
        public var fetch: Fetch

        /// A seek (for tests and simulators; the machine makes its own).
        public init(cancelling: UInt64? = nil, phase: PlayerPhase? = nil, fetch: Fetch) {
            self.cancelling = cancelling
            self.phase = phase
            self.fetch = fetch
        }
    }

    /// What a wanted slice brought, before the clock's consequences.
    public struct Arrival: Sendable, Hashable {
        /// The state to start from (the answer to a snapshot request: the
        /// first frame or a seek's target).
        public var snapshot: RoomSnapshot?
        /// Whether that snapshot is the first frame (once per machine).
        public var firstFrame: Bool
        /// The frames up to the landing time, due at once.
        public var frames: [RecordedFrame]
        /// The phase the slice led to, when it changed.
        public var phase: PlayerPhase?
        /// The schedule time to report (ms).
        public var scheduleTime: Int64?
        /// A snapshot request for the position, when the slice left it
        /// unloaded and nothing is loading it or waiting to retry.
        public var fetch: Fetch?

        /// An arrival (for tests and simulators; the machine makes its own).
        public init(snapshot: RoomSnapshot? = nil, firstFrame: Bool = false, frames: [RecordedFrame] = [],
                    phase: PlayerPhase? = nil, scheduleTime: Int64? = nil, fetch: Fetch? = nil) {
            self.snapshot = snapshot
            self.firstFrame = firstFrame
            self.frames = frames
            self.phase = phase
            self.scheduleTime = scheduleTime
            self.fetch = fetch
        }
    }

    /// What `play(now:)` asks for.
    public enum PlayAction: Sendable, Hashable {
        /// Before the first frame: it is loading, and playback starts when it
        /// is there. The request, when none was running yet.
        case loading(Fetch?, Progress)
        /// Out of a pause with the data there: now `playing`, with the time to
        /// report.
        case playing(scheduleTime: Int64?, Progress)
        /// Out of a pause without the data: now `buffering`, with a snapshot
        /// request when nothing is loading the position.
        case buffering(Fetch?, Progress)
        /// After the end: a seek to 0, then playback.
        case restarted(Seek, Progress)
        /// Already playing or buffering: only what the clock did.
        case progressed(Progress)
        /// Stopped: nothing.
        case none
    }

    /// What `pause(now:)` asks for.
    public enum PauseAction: Sendable, Hashable {
        /// Before the first frame: it is loading, and the player stays paused
        /// when it is there. The request, when none was running yet.
        case loading(Fetch?, Progress)
        /// Was playing or buffering: now `pause`, with the time to report.
        case paused(scheduleTime: Int64?, Progress)
        /// Already paused or ended: only what the clock did.
        case progressed(Progress)
        /// Stopped: nothing.
        case none
    }

    /// What `stop()` asks for.
    public enum StopAction: Sendable, Hashable {
        /// Now `stopped`: drop the answer of the request it abandons, disarm
        /// the timer and release everything.
        case stopped(cancelling: UInt64?)
        /// Already stopped: nothing.
        case none
    }

    /// What `seek(to:now:)` asks for.
    public enum SeekAction: Sendable, Hashable {
        case seeking(Seek, Progress)
        /// Stopped: nothing.
        case none
    }

    /// What `setSpeed(_:now:)` asks for.
    public enum SpeedAction: Sendable, Hashable {
        /// The clock runs at the new speed from now on.
        case progressed(Progress)
        /// Stopped: nothing.
        case none
    }

    /// What `loaded(id:_:now:)` asks for.
    public enum LoadedAction: Sendable, Hashable {
        /// The slice is in.
        case loaded(Arrival, Progress)
        /// The slice lacks the snapshot it was asked for: now `stopped`;
        /// report why, disarm the timer and release everything.
        case stopped(PlayerError)
        /// An answer nobody waits for any more (a later request replaced it,
        /// or the player stopped): nothing.
        case none
    }

    /// What `failed(id:_:now:)` asks for.
    public enum FailedAction: Sendable, Hashable {
        /// A transient failure with retries left: the timer wakes the machine
        /// for the retry.
        case retrying(Progress)
        /// Now `stopped`: report why, disarm the timer and release everything.
        case stopped(PlayerError)
        /// A failure nobody waits for any more: nothing.
        case none
    }

    /// What `timerFired(now:)` asks for.
    public enum TimerAction: Sendable, Hashable {
        /// A failed request is due again: send it anew (same id).
        case retry(Fetch, Progress)
        /// Only what the clock did.
        case progressed(Progress)
        /// Stopped: nothing.
        case none
    }
}
